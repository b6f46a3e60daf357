"""Memory under a long class (issue 14): N students wander over every page for a while; the
resident memory of the server processes before, during and after.

  .venv/bin/python -m benchmarks.soak --url http://127.0.0.1:8501 --students 10 --minutes 10

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
import random
import statistics
import time

from streamlit.util import calc_hash

from benchmarks.class_load import ROOT, SENTENCES, expected_translations, server_processes
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8501")
    p.add_argument("--students", type=int, default=10)
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument("--after", type=float, default=60, help="seconds of sampling after the students leave")
    p.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "multi30k-en-de"))
    args = p.parse_args()
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
