"""A class of students, each a Streamlit session driven over its own websocket protocol
(no browser per student), against a running app (one process, or `make serve`).

  .venv/bin/python -m benchmarks.class_load --url http://127.0.0.1:8501 --students 1,5,10,20,30
  .venv/bin/python -m benchmarks.class_load --url ... --students 30 --scenario shared

Scenarios
  open    N students open the app at once, each with their own sentence (a link to the
          attention explorer with text=...; it was the first page when this was written),
          then each makes --changes widget changes (the layer or head picker) after 1-3 s
          of thinking. Where the page has the browser's own pickers (app/attention_charts.py: this
          client's sessions, as a browser's) a change sends nothing; the one "pick" the student's next
          action sends after the last change is timed as a change.
  shared  N students open the same link to the step page at once, then press Next --changes times.
  distinct (issue 53) as open, but every student's sentence is one no one else had in this run: the next unused
          line of --sentences (benchmarks/sentences/distinct-en.txt, checked against the training sets), so no
          student finds a page already computed. "open" cycles through 30 sentences: with more than 30 students
          most find theirs computed (the repeated-sentence scenario, kept under its own name).
Timed per page run: from the rerun request to the server's script_finished. "first page
+ static" adds downloading the static files a browser fetches on a first visit (their
list is read from a real Chromium once, if /usr/bin/chromium exists, else from index.html), as
Chromium fetches them: over 6 kept connections (until session 47 one connection a file, which
cost the client, on the server's cores, twice the CPU: docs/benchmarks-history.md, session 47).
Checked per run: the script finished, no exception element, and the translation shown is
that student's own sentence's (computed beforehand from the same checkpoint): a wrong one
is counted as an error and, if it is another student's, as cross-talk.
Server CPU: the summed CPU time of the app processes (and haproxy) over the level's wall time, and per first page
(core-seconds: that CPU time over the level's first pages, widget changes included), and the part of it that the
app processes' event loops spent (their main threads' own clocks, Linux's /proc; about a quarter in session 45).
Memory: the app processes' resident size at the level's end (the largest, and all of them together). The client's
own CPU over the level (this process: the simulated browsers) is reported beside it: it runs on the server's cores,
which a real class's laptops do not (a class of 100 on 2 cores: about a quarter of the CPU, docs/benchmarks-history.md
session 39).
Loopback only; every wait has a timeout and every loop a bound.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
from pathlib import Path

from serving.class_client import pct  # noqa: F401 - the benchmarks' percentile, here as before
from serving.protocol import Run, Student

ROOT = Path(__file__).resolve().parent.parent
SENTENCES = [
    "A man in a blue shirt is standing on a ladder cleaning windows.",
    "Two young girls are playing in the sand at the beach.",
    "A brown dog is running through the tall green grass.",
    "A woman with a red umbrella walks down a busy street.",
    "Three men are sitting on a bench in front of a store.",
    "A little boy is jumping into a swimming pool.",
    "A group of people are dancing at a wedding party.",
    "An old woman is selling vegetables at a market.",
    "A cyclist in a yellow jersey rides up a steep hill.",
    "Two dogs are fighting over a stick in the snow.",
    "A man is cooking food on a grill in his backyard.",
    "A girl in a pink dress is holding a white cat.",
    "Several children are climbing on a playground.",
    "A musician plays the violin on a street corner.",
    "A football player is running with the ball.",
    "A woman is reading a book on a park bench.",
    "Two men are working on the roof of a house.",
    "A child is eating an ice cream cone outside.",
    "A crowd of people watches a parade in the city.",
    "A man and a woman are riding horses on the beach.",
    "A dog catches a frisbee in the air.",
    "A young man is skateboarding down a ramp.",
    "A woman in a black coat is waiting for the bus.",
    "Four people are hiking up a snowy mountain.",
    "A baby is sleeping in a small bed.",
    "A man with a beard is playing the guitar.",
    "Two women are talking at a cafe table.",
    "A boy in a red hat throws a ball to his father.",
    "A worker in an orange vest is fixing the road.",
    "A black and white dog swims in a lake.",
]


# ---- scenarios ----------------------------------------------------------------------------------
async def student(s: Student, expect: str, changes: int, rng: random.Random, static: list[str],
                  shared: bool) -> None:
    """Open the page, then `changes` times, after 1-3 s of thinking: press Next (shared) or
    change the layer or head picker (open). Where the browser draws the explorer's pickers (app/attention_charts.py:
    a browser's session, as this client's) a change sends nothing; the student's next action elsewhere tells the
    server the last one ("pick", a run of the pickers' own fragment): sent once after the changes, timed as a
    change."""
    http_s = await s.open(static)
    first = await s.rerun("first", expect=expect)
    first.with_static = first.seconds + http_s
    for n in range(changes):
        await asyncio.sleep(rng.uniform(1, 3))
        if not shared and "pickers" in s.widgets:
            if n == changes - 1:
                state, _ = s.pick_head(rng)
                await s.rerun("change", [state], expect=expect, fragment=s.fragments.get("pickers", ""))
            continue
        key = "next" if shared else rng.choice(["layer", "head"])
        if key in s.widgets:
            state = s.press(key) if shared else s.choose(key, rng)
            await s.rerun("next" if shared else "change", [state], expect=expect, fragment=s.fragments.get(key, ""))
    await s.close()


def server_processes():
    import psutil
    out = []
    for p in psutil.process_iter(["cmdline", "name"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if ("streamlit" in cmd and "app/main.py" in cmd) or p.info["name"] in ("haproxy", "redis-server"):
            out.append(p)
    return out


def sentence_for(args, i: int, shared: bool) -> str:
    """Student i's sentence: the one shared sentence, one of the 30 cycled, or the next line no one had."""
    if shared:
        return SENTENCES[0]
    if args.scenario != "distinct":
        return SENTENCES[i % len(SENTENCES)]
    if args.used + i >= len(args.distinct):
        raise SystemExit(f"{args.sentences} has {len(args.distinct)} sentences: too few for every student of every "
                         "level to have a new one (make more: python -m benchmarks.distinct_sentences --n N)")
    return args.distinct[args.used + i]


def resident_mb(procs) -> tuple[float, float]:
    """(the largest app process's resident size, all of them together) in MB."""
    sizes = []
    for p in procs:
        try:
            if p.info["name"] not in ("haproxy", "redis-server"):
                sizes.append(p.memory_info().rss / 1e6)
        except Exception:  # noqa: BLE001 - a process that ended has none
            pass
    return (max(sizes, default=0.0), sum(sizes))


def event_loop_seconds(procs) -> float:
    """The app processes' main threads' CPU: the event loop of Streamlit's server (uvicorn: websockets, HTTP,
    the flushing of every session's messages); the page runs have threads of their own, gone when they end."""
    total = 0.0
    for p in procs:
        if p.info["name"] in ("haproxy", "redis-server"):
            continue
        try:
            fields = Path(f"/proc/{p.pid}/task/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")     # utime, stime
        except (OSError, IndexError, ValueError):  # a process that ended, or no /proc (not Linux)
            pass
    return total


def cpu_seconds(procs) -> float:
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except Exception:  # noqa: BLE001 - a process that ended counts what it had
            pass
    return total


async def level(args, n: int, expected: dict[str, str], static: list[str]) -> dict:
    rng = random.Random(n)
    procs = server_processes()
    cpu0, loop0, wall0, client0 = cpu_seconds(procs), event_loop_seconds(procs), time.monotonic(), time.process_time()
    shared = args.scenario == "shared"
    students = []
    for i in range(n):
        text = sentence_for(args, i, shared)
        s = Student(args.url, {"text": text}, page="step" if shared else "explore")
        students.append((s, expected[text]))
    results = await asyncio.wait_for(asyncio.gather(*(student(s, e, args.changes, random.Random(rng.random()), static,
                                                              shared) for s, e in students), return_exceptions=True),
                                     args.max_seconds)
    for (s, _), result in zip(students, results):
        if isinstance(result, BaseException):
            s.runs.append(Run("first" if not s.runs else "change", 0.0, False, f"{type(result).__name__}: {result}"))
    wall = time.monotonic() - wall0
    runs = [r for s, _ in students for r in s.runs]
    cpu = cpu_seconds(procs) - cpu0
    out = summary(n, runs, cpu / wall, expected)
    firsts = max(1, sum(r.kind == "first" for r in runs))
    out["core_s_per_first"] = cpu / firsts
    out["event_loop_core_s_per_first"] = (event_loop_seconds(procs) - loop0) / firsts
    out["client_core_s"] = time.process_time() - client0        # the simulated browsers, on the same cores
    out["rss_mb"] = resident_mb(procs)
    out["rss_max_mb"] = out["rss_mb"][0]
    args.used += n if args.scenario == "distinct" else 0
    out["static_mb"] = max((getattr(s, "static_bytes", 0) for s, _ in students), default=0) / 1e6
    return out


def summary(n: int, runs: list[Run], cores: float, expected: dict[str, str]) -> dict:
    first = [r for r in runs if r.kind == "first"]
    later = [r for r in runs if r.kind != "first"]
    others = set(expected.values())
    errors = [r.error for r in runs if not r.ok]
    crosstalk = [e for e in errors if any(f"translation {o!r}" in e for o in others)]
    return {"students": n, "runs": len(runs), "errors": len(errors), "crosstalk": len(crosstalk),
            "first_p50": pct([r.seconds for r in first], 0.5), "first_p95": pct([r.seconds for r in first], 0.95),
            "first_static_p95": pct([r.with_static or r.seconds for r in first], 0.95),
            "first_static_p50": pct([r.with_static or r.seconds for r in first], 0.5),
            "change_p50": pct([r.seconds for r in later], 0.5), "change_p95": pct([r.seconds for r in later], 0.95),
            "cpu_cores": cores, "error_examples": errors[:3],
            "waited_first": sum(r.waited for r in first), "waited_later": sum(r.waited for r in later)}


def expected_translations(checkpoint: str, texts: list[str]) -> dict[str, str]:
    """What the app's default decoding (beam 4, the model's own alpha) gives for each sentence."""
    from model.inference.options import DecodeOptions
    from model.inference.pipeline import translate
    from model.storage.checkpoint import load_checkpoint
    ckpt = load_checkpoint(checkpoint)
    return dict(zip(texts, translate(ckpt, texts, DecodeOptions("beam", beam_size=4, alpha=ckpt.beam_alpha))))


def static_paths(url: str) -> list[str]:
    """The static files a first visit downloads, as a real Chromium fetched them."""
    if not Path("/usr/bin/chromium").exists():
        return []
    from playwright.sync_api import sync_playwright
    seen = []
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium", args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-dev-shm-usage"])
        page = b.new_page()
        page.on("request", lambda r: seen.append(r.url))
        page.goto(url)
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=120_000)     # any chart: every build has one
        b.close()
    prefix = url.rstrip("/")
    return sorted({u[len(prefix):] for u in seen if u.startswith(prefix + "/static/")} | {"/"})


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8501")
    p.add_argument("--students", default="1,5,10,20,30", help="class sizes, one level each (default 1,5,10,20,30)")
    p.add_argument("--scenario", default="open", choices=["open", "shared", "distinct"])
    p.add_argument("--sentences", default=str(ROOT / "benchmarks" / "sentences" / "distinct-en.txt"),
                   help="the distinct scenario's sentences, one per line, none used twice in a run")
    p.add_argument("--changes", type=int, default=5, help="widget changes (or Next presses) per student")
    p.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "multi30k-en-de"),
                   help="the checkpoint the app opens on, for the expected translations")
    p.add_argument("--no-static", action="store_true", help="do not download the static files")
    p.add_argument("--pause", type=float, default=10, help="seconds between levels")
    p.add_argument("--max-seconds", type=float, default=600, help="bound on one level")
    p.add_argument("--json", help="also write the summaries here")
    args = p.parse_args()
    args.used = 0
    args.distinct = ([line.strip() for line in Path(args.sentences).read_text().splitlines() if line.strip()]
                     if args.scenario == "distinct" else [])
    expected = expected_translations(args.checkpoint, args.distinct or SENTENCES)
    static = [] if args.no_static else static_paths(args.url)
    print(f"{len(static)} static files per first visit; scenario {args.scenario}", flush=True)
    print("| students | first page p50 / p95 | + static p50 / p95 | change p50 / p95 | CPU cores | core-s per first "
          "page | RSS MB (largest / all) | static MB | errors | told their place in line, after 1 s (first / later) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    out = []
    for n in [int(x) for x in args.students.split(",")]:
        s = asyncio.run(level(args, n, expected, static))
        out.append(s)
        print(f"| {n} | {fmt(s['first_p50'])} / {fmt(s['first_p95'])} s | {fmt(s['first_static_p50'])} / "
              f"{fmt(s['first_static_p95'])} s | {fmt(s['change_p50'])} / {fmt(s['change_p95'])} s | "
              f"{s['cpu_cores']:.2f} | {s['core_s_per_first']:.3f} | {s['rss_mb'][0]:.0f} / {s['rss_mb'][1]:.0f} | "
              f"{s['static_mb']:.1f} | {s['errors']} of {s['runs']} "
              f"(cross-talk {s['crosstalk']}) | {s['waited_first']} / {s['waited_later']} |", flush=True)
        print(f"    of which the app processes' event loops (their main threads): "
              f"{s['event_loop_core_s_per_first']:.3f} core-s per first page", flush=True)
        for e in s["error_examples"]:
            print(f"    error: {e}", flush=True)
        time.sleep(args.pause)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
