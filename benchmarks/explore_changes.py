"""What one student's first page and each layer or head change on the explorer cost the server, build by build.

  .venv/bin/python -m benchmarks.explore_changes --build before=/tmp/before --build now=. --rounds 2

Per build and round: a fresh server from that checkout (one app process behind HAProxy, as class_ab starts it),
then one student at a time opens the explorer with a new sentence (benchmarks/sentences/distinct-en.txt, none
repeated) and changes the layer or head picker --changes times, as a browser asks (the rerun of the picker's
fragment when it is in one; where the browser draws the pickers, app/attention_charts.py, a change sends nothing
and what is timed is the "pick" the student's next action elsewhere sends, as if one followed every change).
Measured: the app process's CPU time (psutil) around each first page, and around
each student's whole run of changes, divided by their number: the clock ticks are 10 ms, longer than a change
(until session 48 each change was timed alone, and their median could only read 0, 10 or 20 ms). The first pages
here are one at a time (no batch): a class's first pages are class_ab's. Nothing else should run meanwhile.
"""
from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
from pathlib import Path

from benchmarks.class_ab import start, stop
from benchmarks.class_load import cpu_seconds, server_processes
from benchmarks.common import ROOT, machine
from serving.protocol import Student

SENTENCES = ROOT / "benchmarks" / "sentences" / "distinct-en.txt"


async def one_build(url: str, sentences: list[str], changes: int, seed: int) -> tuple[list[float], list[float]]:
    procs = [p for p in server_processes() if p.info["name"] not in ("haproxy", "redis-server")]
    rng = random.Random(seed)
    firsts, reruns = [], []
    for text in sentences:
        s = Student(url, {"text": text}, page="explore")
        await s.open()
        before = cpu_seconds(procs)
        await s.rerun("first")
        firsts.append(cpu_seconds(procs) - before)
        before = cpu_seconds(procs)
        for _ in range(changes):
            if "pickers" in s.widgets:          # the browser chooses: what the next action elsewhere tells the server
                state, key = s.pick_head(rng)[0], "pickers"
            else:
                key = rng.choice(["layer", "head"])
                state = s.choose(key, rng)
            run = await s.rerun("change", [state], fragment=s.fragments.get(key, ""))
            if not run.ok:
                raise SystemExit(f"a change failed: {run.error}")
        reruns.append((cpu_seconds(procs) - before) / changes)        # this student's changes, each on average
        await s.close()
    return firsts, reruns


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", action="append", required=True, metavar="NAME=DIR", help="a checkout to serve")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--students", type=int, default=8, help="students per build and round, one after another")
    p.add_argument("--changes", type=int, default=30, help="layer/head changes per student")
    p.add_argument("--port", type=int, default=8730)
    args = p.parse_args(argv)
    builds = dict(b.split("=", 1) for b in args.build)
    lines = [line.strip() for line in SENTENCES.read_text().splitlines() if line.strip()]
    out = Path(ROOT / "runs" / "explore_changes")
    out.mkdir(parents=True, exist_ok=True)
    got: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in builds}
    used = 0
    for r in range(args.rounds):
        names = list(builds)[r % len(builds):] + list(builds)[:r % len(builds)]
        sentences = lines[used:used + args.students]
        used += args.students
        for name in names:
            server = start(Path(builds[name]).resolve(), args.port, 1, out / f"{name}-{r}.server.log")
            try:
                firsts, reruns = asyncio.run(one_build(f"http://127.0.0.1:{args.port}", sentences, args.changes, r))
            finally:
                stop(server)
            got[name][0].extend(firsts)
            got[name][1].extend(reruns)
            print(f"round {r + 1} {name}: first page {1000 * statistics.median(firsts):.0f} ms, a change "
                  f"{1000 * statistics.median(reruns):.1f} ms (medians over the students of the app process's CPU)",
                  flush=True)
    print(f"\n{machine()}; one app process; medians over {args.rounds} rounds:")
    print("| build | first page (one at a time) | a layer or head change (a student's changes, each) | changes "
          "measured |\n|---|---|---|---|")
    for name, (firsts, reruns) in got.items():
        print(f"| {name} | {1000 * statistics.median(firsts):.0f} ms | {1000 * statistics.median(reruns):.1f} ms "
              f"(students {1000 * min(reruns):.1f}-{1000 * max(reruns):.1f}) | {len(reruns) * args.changes} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
