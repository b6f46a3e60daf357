"""Memory under a long class (issue 14): N students wander over every page for a while; the
resident memory of the server processes before, during and after. With --follow (issue 42): a
teacher leads N followers for a whole lesson instead.

  .venv/bin/python -m benchmarks.soak --url http://127.0.0.1:8501 --students 10 --minutes 10
  .venv/bin/python -m benchmarks.soak --url http://127.0.0.1:8501 --follow --students 30 --minutes 60

--follow: the teacher (benchmarks/class_follow.py's sessions, their timed fragments run as a browser
runs them) presses Next every --think seconds and types a new sentence every --steps changes; per
change, the seconds until each follower shows it. Every --sample-every seconds, per server process
(each app process with its children, HAProxy, Redis): resident memory, open file descriptors,
open sockets. At the end: each process's memory at the start, after --warm minutes (the caches
filled) and at the end; descriptors and sockets at the start and the end; the follow p50/p95 of the
first and the last --window minutes; errors (runs that failed, followers that never caught up).

Each student (Streamlit's websocket protocol, no browser; benchmarks/class_load.Student)
opens the app with its own sentence, then every 1-3 s moves to a random page (by its
script hash, as a click in the menu does) and checks that the run finished without an
exception and, on pages that show one, with its own sentence's translation. The resident
memory (RSS) of every app process (and its children) and HAProxy is summed every 2 s; after
the students leave, it is sampled for --after seconds more. Loopback only; bounded in time.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time

from streamlit.util import calc_hash

from benchmarks.class_follow import change, end_class, open_class
from benchmarks.class_load import ROOT, SENTENCES, expected_translations, pct, server_processes
from serving.protocol import Student

SENTENCE_PAGES = {"overview", "explore", "lesson", "step", "positional", "masks", "head", "knockout"}
OTHER_PAGES = {"lab", "card"}


def rss_mb() -> float:
    total = 0
    for p in server_processes():
        try:
            total += p.memory_info().rss + sum(c.memory_info().rss for c in p.children(recursive=True))
        except Exception:  # noqa: BLE001 - a process that ended has no memory left
            pass
    return total / 2 ** 20


async def wander(s: Student, expect: str, until: float, rng: random.Random) -> None:
    await s.open()
    await s.rerun("first", expect=expect)
    pages = sorted(SENTENCE_PAGES | OTHER_PAGES)
    while time.monotonic() < until:
        await asyncio.sleep(rng.uniform(1, 3))
        slug = rng.choice(pages)
        s.page_hash = calc_hash(slug)
        await s.rerun(slug, expect=expect if slug in SENTENCE_PAGES else None)
    await s.close()


async def sample(into: list[tuple[float, float]], start: float, stop: asyncio.Event) -> None:
    while not stop.is_set():
        into.append((time.monotonic() - start, rss_mb()))
        try:
            await asyncio.wait_for(stop.wait(), 2.0)
        except TimeoutError:
            pass


async def soak(args) -> tuple[list[Student], list[tuple[float, float]], float]:
    expected = expected_translations(args.checkpoint, SENTENCES)
    start = time.monotonic()
    samples: list[tuple[float, float]] = []
    stop = asyncio.Event()
    sampler = asyncio.create_task(sample(samples, start, stop))
    until = start + 60 * args.minutes
    students = [Student(args.url, {"text": SENTENCES[i % len(SENTENCES)]}) for i in range(args.students)]
    await asyncio.wait_for(asyncio.gather(*(wander(s, expected[s.query["text"]], until, random.Random(i))
                                            for i, s in enumerate(students)), return_exceptions=True),
                           60 * args.minutes + 300)
    left = time.monotonic() - start
    await asyncio.sleep(args.after)
    stop.set()
    await sampler
    return students, samples, left


# ---- --follow: a whole lesson led by a teacher ----------------------------------------------------------
def _name(p) -> str:
    cmd = p.info.get("cmdline") or []
    if "--server.port" in cmd:
        return f"app:{cmd[cmd.index('--server.port') + 1]}"
    return p.info["name"]


def process_stats() -> dict[str, dict[str, float]]:
    """Per server process: resident MB (an app process with its children), open descriptors, sockets."""
    out = {}
    for p in server_processes():
        try:
            with p.oneshot():
                rss = p.memory_info().rss + sum(c.memory_info().rss for c in p.children(recursive=True))
                out[_name(p)] = {"rss_mb": rss / 2 ** 20, "fds": p.num_fds(),
                                 "sockets": len(p.net_connections(kind="inet"))}
        except Exception:  # noqa: BLE001 - a process that ended has nothing left to count
            pass
    return out


async def lesson(args) -> dict:
    teacher, followers, tasks = await open_class(args.url, args.students, SENTENCES[0])
    await asyncio.sleep(3)
    start = time.monotonic()
    until, next_sample = start + 60 * args.minutes, start
    changes: list[tuple[float, list[float], int]] = []
    missed_at: list[dict] = []           # which changes some follower never showed, and what they were
    samples: list[tuple[float, dict]] = []
    i = 0
    while time.monotonic() < until:
        if time.monotonic() >= next_sample:
            samples.append((time.monotonic() - start, process_stats()))
            next_sample += args.sample_every
        sentence = SENTENCES[(i // args.steps + 1) % len(SENTENCES)] if i % args.steps == 0 else None
        got, missed = await change(teacher, followers, f"change {i}", sentence, args.timeout)
        changes.append((time.monotonic() - start, got, missed))
        if missed:
            missed_at.append({"t": round(changes[-1][0], 1), "change": i, "sentence": sentence, "missed": missed,
                              "teacher_link": teacher.s.link})
        i += 1
        await asyncio.sleep(args.think)
    samples.append((time.monotonic() - start, process_stats()))
    await end_class(teacher, followers, tasks)
    errors = [e for x in (teacher, *followers) for e in x.errors]
    result = report(args, changes, samples, errors)
    result["missed_at"] = missed_at
    return result


def report(args, changes, samples, errors) -> dict:
    window, end = 60 * args.window, changes[-1][0] if changes else 0.0
    first = [x for t, got, _ in changes if t <= window for x in got]
    last = [x for t, got, _ in changes if t >= end - window for x in got]
    warm = next((stats for t, stats in samples if t >= 60 * args.warm), samples[-1][1])
    start_stats, end_stats = samples[0][1], samples[-1][1]
    processes = {name: {"rss_start_mb": start_stats.get(name, {}).get("rss_mb"),
                        "rss_warm_mb": warm.get(name, {}).get("rss_mb"), "rss_end_mb": end_stats[name]["rss_mb"],
                        "fds_start": start_stats.get(name, {}).get("fds"), "fds_end": end_stats[name]["fds"],
                        "fds_max": max(s[name]["fds"] for _, s in samples if name in s),
                        "sockets_start": start_stats.get(name, {}).get("sockets"),
                        "sockets_end": end_stats[name]["sockets"],
                        "sockets_max": max(s[name]["sockets"] for _, s in samples if name in s)}
                 for name in sorted(end_stats)}
    return {"students": args.students, "minutes": args.minutes, "changes": len(changes),
            "missed": sum(m for _, _, m in changes), "errors": len(errors), "error_samples": errors[:5],
            "follow_p50_first": pct(first, 0.5), "follow_p95_first": pct(first, 0.95),
            "follow_p50_last": pct(last, 0.5), "follow_p95_last": pct(last, 0.95), "window_minutes": args.window,
            "warm_minutes": args.warm, "processes": processes,
            "samples": [(round(t, 1), stats) for t, stats in samples]}


def print_lesson(r: dict) -> None:
    print(f"{r['students']} followers for {r['minutes']:g} min: {r['changes']} changes, {r['missed']} missed "
          f"follows, {r['errors']} errors")
    print(f"follow p50 / p95: first {r['window_minutes']:g} min {r['follow_p50_first']:.3f} / "
          f"{r['follow_p95_first']:.3f} s, last {r['window_minutes']:g} min {r['follow_p50_last']:.3f} / "
          f"{r['follow_p95_last']:.3f} s")
    for name, p in r["processes"].items():
        growth = p["rss_end_mb"] / p["rss_warm_mb"] - 1 if p["rss_warm_mb"] else float("nan")
        print(f"  {name}: RSS {p['rss_start_mb'] or 0:.0f} MB at the start, {p['rss_warm_mb'] or 0:.0f} after "
              f"{r['warm_minutes']:g} min, {p['rss_end_mb']:.0f} at the end ({growth:+.1%} since warm); "
              f"fds {p['fds_start']} -> {p['fds_end']} (max {p['fds_max']}); sockets {p['sockets_start']} -> "
              f"{p['sockets_end']} (max {p['sockets_max']})")
    for e in r["error_samples"]:
        print(f"    error: {e}")
    for m in r.get("missed_at", [])[:10]:
        what = "new sentence" if m["sentence"] else "Next"
        print(f"    missed by {m['missed']} at {m['t']} s (change {m['change']}, {what})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8501")
    p.add_argument("--students", type=int, default=10)
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument("--after", type=float, default=60, help="seconds of sampling after the students leave")
    p.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "multi30k-en-de"))
    p.add_argument("--follow", action="store_true", help="a teacher leads the students (a whole lesson)")
    p.add_argument("--think", type=float, default=5.0, help="--follow: seconds between the teacher's changes")
    p.add_argument("--steps", type=int, default=6, help="--follow: a new sentence every this many changes")
    p.add_argument("--timeout", type=float, default=20.0, help="--follow: seconds a follower may take")
    p.add_argument("--sample-every", type=float, default=30.0, help="--follow: seconds between process samples")
    p.add_argument("--warm", type=float, default=5.0, help="--follow: minutes after which the caches count as full")
    p.add_argument("--window", type=float, default=5.0, help="--follow: minutes of the first and last follow figures")
    p.add_argument("--json", help="--follow: also write the result here")
    args = p.parse_args()
    if args.follow:
        result = asyncio.run(lesson(args))
        print_lesson(result)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
        return
    before = rss_mb()
    students, samples, left = asyncio.run(soak(args))
    runs = [r for s in students for r in s.runs]
    errors = [r for r in runs if not r.ok]
    during = [mb for t, mb in samples if t <= left]
    after = [mb for t, mb in samples if t > left]
    per_page: dict[str, int] = {}
    for r in runs:
        per_page[r.kind] = per_page.get(r.kind, 0) + 1
    print(f"{args.students} students for {args.minutes:g} min: {len(runs)} page runs, {len(errors)} errors "
          f"({', '.join(f'{k} {v}' for k, v in sorted(per_page.items()))})")
    print(f"page run p50 {statistics.median(r.seconds for r in runs):.3f} s")
    print(f"RSS of the server processes: before {before:.0f} MB, during median {statistics.median(during):.0f} / "
          f"max {max(during):.0f} MB, {args.after:g} s after the students left: {after[-1]:.0f} MB")
    for e in errors[:5]:
        print(f"    error: {e.kind}: {e.error}")


if __name__ == "__main__":
    main()
