"""From an offline bundle to a served app, timed as a school would live it (issue 29's budget: 3 minutes).

    python -m benchmarks.bundle_install                      # makes a bundle for this machine, 3 installs
    python -m benchmarks.bundle_install --bundle DIR --rounds 5

Each round: a fresh home and prefix, pip cut off from every network and configuration
(transformer_explained.bundle.offline_user), `sh install.sh`, then the installed command starts
the app, and one session draws its first page (the overview) over Streamlit's protocol. Prints each
stage per round and the medians: install, app healthy, first page drawn, total.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import machine
from serving.launcher import healthy
from serving.warmup import warm_blocking
from transformer_explained import bundle


def wait_healthy(port: int, proc: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the app exited ({proc.returncode})")
        if healthy(port):
            return
        time.sleep(0.1)
    raise TimeoutError("the app did not answer")


def one_round(folder: Path, work: Path, port: int) -> dict[str, float]:
    home = work / "home"
    home.mkdir(parents=True)
    env = bundle.offline_user(home)
    start = time.monotonic()
    subprocess.run(["sh", str(folder / "install.sh"), "--prefix", str(home / "app")], env=env, check=True,
                   stdout=subprocess.DEVNULL, cwd=home)
    installed = time.monotonic()
    app = subprocess.Popen([str(home / ".local" / "bin" / "transformer-explained"), "--port", str(port),
                            "--no-browser"], env=env, cwd=home, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(port, app)
        healthy = time.monotonic()
        warm_blocking(port, pages=("overview",))
        drawn = time.monotonic()
    finally:
        app.terminate()
        app.wait(timeout=30)
    return {"install": installed - start, "healthy": healthy - installed, "first page": drawn - healthy,
            "total": drawn - start}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bundle_install", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bundle", type=Path, help="an existing bundle (default: make one for this machine)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--port", type=int, default=8797)
    args = p.parse_args(argv)
    print(machine())
    with tempfile.TemporaryDirectory(prefix="bundle-bench-") as tmp:
        folder = args.bundle
        if folder is None:
            folder = Path(tmp) / "bundle"
            start = time.monotonic()
            subprocess.run([sys.executable, "-m", "transformer_explained", "bundle", "--out", str(folder)], check=True)
            print(f"bundle made in {time.monotonic() - start:.1f} s")
        size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 1e6
        print(f"bundle: {folder} ({size:.0f} MB)")
        rounds = []
        for i in range(args.rounds):
            times = one_round(folder, Path(tmp) / f"round-{i}", args.port)
            rounds.append(times)
            print(f"round {i + 1}: " + ", ".join(f"{k} {v:.1f} s" for k, v in times.items()), flush=True)
        print("median: " + ", ".join(f"{k} {statistics.median(r[k] for r in rounds):.1f} s" for k in rounds[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
