"""How long "Heads across the corpus" takes to open from a checkpoint's shipped statistics file:
in a fresh app process (the model already loaded by another page, as when a class has been using
the app), the page's first run reads and checks the file (fingerprint of the weights, JSON) and
draws its figures; a second run is what the next student pays; a click on another head redraws
its profile. Script time in AppTest, each round in a new process; medians.

  .venv/bin/python -m benchmarks.heads_page [--rounds 5] [--checkpoint multi30k-en-de]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.page_times import open_page

HERE = Path(__file__).resolve().parent.parent


def one_round(checkpoint: str) -> dict[str, float]:
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_file(str(HERE / "app" / "main.py"), default_timeout=300)
    at.query_params["checkpoint"] = checkpoint
    at.run()
    open_page(at, "card")                                   # loads the model (not this page's cost)
    out = {"first": open_page(at, "heads"), "again": open_page(at, "heads")}
    at.selectbox(key="head").set_value(3)
    start = time.perf_counter()
    at.run()
    out["another head"] = time.perf_counter() - start
    if at.exception:
        raise RuntimeError(at.exception[0].message)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--checkpoint", default="multi30k-en-de")
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)     # a round, in this process
    a = p.parse_args(argv)
    if a.one:
        print(json.dumps(one_round(a.checkpoint)))
        return 0
    rounds = []
    for _ in range(a.rounds):
        done = subprocess.run([sys.executable, "-m", "benchmarks.heads_page", "--one", "--checkpoint", a.checkpoint],
                              cwd=HERE, capture_output=True, text=True, check=True)
        rounds.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(json.dumps({"checkpoint": a.checkpoint, "rounds": a.rounds, "ms": {
        k: round(1000 * statistics.median(r[k] for r in rounds), 1) for k in rounds[0]}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
