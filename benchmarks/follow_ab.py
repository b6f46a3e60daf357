"""A class following its teacher, build against build, in one sitting (issue 53's "a teacher's change reaches 30
followers in p95 <= 0.5 s").

  git worktree add /tmp/before <commit>
  .venv/bin/python -m benchmarks.follow_ab --build before=/tmp/before --build now=. --rounds 4

Each round serves every build once, in turn (A B, A B, ...: the machine drifts over the hour), each on a fresh
server from that checkout (`serving.launcher`, --processes app processes, warmed up: as benchmarks/class_ab.py),
and runs `benchmarks.class_follow` against it (this checkout's client): a teacher on the step page, --students
followers, ten changes (Next, once a new sentence), a few seconds of idle following, a poll. Prints each round as
it ends, then the medians over rounds per build. The follow latencies count from the teacher's run finishing (the
view published) to each follower's page showing the change. Nothing else should run meanwhile: say so in the
numbers' notes. The client shares the machine's cores with the server.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from benchmarks import class_follow
from benchmarks.class_ab import server_arguments, start, stop
from benchmarks.common import machine

KEYS = (("follow_p95", "every change p95"), ("follow_p50", "every change p50"),
        ("follow_next_p95", "Next alone p95"), ("follow_sentence_p50", "a new sentence p50"),
        ("follow_sentence_p95", "a new sentence p95"), ("reveal_p95", "a poll's reveal p95"),
        ("idle_cores", "idle following: server cores"), ("missed", "missed"), ("errors", "errors"))


def one_round(build: Path, args: argparse.Namespace, log: Path) -> dict:
    server = start(build, args.port, args.processes, log)
    try:
        time.sleep(args.settle)
        follow = argparse.Namespace(url=f"http://127.0.0.1:{args.port}", students=args.students, changes=args.changes,
                                    think=2.0, idle=args.idle, timeout=20.0)
        return asyncio.run(class_follow.measure(follow))
    finally:
        stop(server)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.follow_ab", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    server_arguments(p, rounds=4, port=8760, out="runs/follow_ab")
    p.add_argument("--students", type=int, default=30, help="followers (default 30)")
    p.add_argument("--changes", type=int, default=10, help="the teacher's changes a round (default 10)")
    p.add_argument("--idle", type=float, default=5.0, help="seconds of idle following measured (default 5)")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = [n for n, _ in args.build]
    runs: dict[str, list[dict]] = {n: [] for n in names}
    for r in range(args.rounds):
        for name, build in args.build:
            got = one_round(build, args, out / f"{name}-{r + 1}.server.log")
            runs[name].append(got)
            print(f"round {r + 1} {name}: " + ", ".join(f"{label} {_num(got[key])}" for key, label in KEYS[:4]),
                  flush=True)
    print(f"\nmedians over {args.rounds} rounds ({machine()}):")
    print("| | " + " | ".join(names) + " |\n|---" + "|---" * len(names) + "|")
    for key, label in KEYS:
        meds = [statistics.median(x[key] for x in runs[n] if x.get(key) is not None) for n in names]
        print(f"| {label} | " + " | ".join(_num(m) for m in meds) + " |")
    return 0


def _num(x: float | int | None) -> str:
    return "-" if x is None else str(x) if isinstance(x, int) else f"{x:.3f}"


if __name__ == "__main__":
    raise SystemExit(main())
