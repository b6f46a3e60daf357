"""A class across two machines, on this one (issue 43, item 5): serving/netns.py builds them (network
namespaces, each with its own app process, one HAProxy and one Redis in front), a teacher and --students
followers hold a class with a poll, and one machine is lost. Figures: seconds until each follower follows the
teacher again, answers kept. Needs root and iproute2 (`ip netns`), haproxy and redis-server.

  sudo .venv/bin/python -m benchmarks.machines --students 30
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from benchmarks.class_load import ROOT, SENTENCES
from benchmarks.common import machine
from serving.netns import lesson, machines, school, unavailable


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.machines", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--students", type=int, default=30)
    p.add_argument("--processes", type=int, default=1, help="app processes per machine (default 1)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "out" / "machines"), help="the logs and the JSON")
    args = p.parse_args(argv)
    why = unavailable()
    if why:
        sys.exit(f"error: {why}")
    out = Path(args.out)
    with machines(2) as ms, school(ms, args.processes, out) as s:
        result = {"machine": machine(), **asyncio.run(lesson(s, args.students, SENTENCES))}
    print(json.dumps(result, indent=1))
    (out / "machines.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
