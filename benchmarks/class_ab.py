"""A class before and after a change, in one sitting: builds served in turn, each fresh, the same load.

  git worktree add /tmp/before <commit>
  .venv/bin/python -m benchmarks.class_ab --build before=/tmp/before --build after=. --rounds 5

Each round serves every build once, in a rotated order (round 1: A B C, round 2: B C A, ...), so that a
machine drifting slower over the hour does not favour one build. Per build and round: a fresh server from that
checkout (`python -m serving.launcher`, or `deploy/serve.py` for builds from before serving/ existed) with
--processes app processes behind HAProxy, every process warmed up, then `benchmarks.class_load` (this checkout's)
with --students students in the --scenario (open, or distinct: every student a new sentence), then the server
is stopped. Each build decodes with its own
checkpoints (the expected translations are read from them). Prints each run as it ends and, at the end, the
median over rounds per build with the ratio to the first build. Nothing else should run meanwhile: say so in
the numbers' notes. Loopback only; every wait has a timeout.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import ROOT, machine

KEYS = (("first_p50", "first page p50"), ("first_p95", "first page p95"),
        ("first_static_p95", "first page + its static files p95 (what a new browser waits)"),
        ("change_p95", "a widget change p95"),
        ("cpu_cores", "server CPU (cores)"), ("core_s_per_first", "core-seconds per first page"),
        ("event_loop_core_s_per_first", "of which the event loops"),
        ("rss_max_mb", "largest app process (MB)"), ("client_core_s", "the load client's own core-s (same cores)"))


def serve_command(build: Path, port: int, processes: int) -> list[str]:
    """The build's own launcher: serving/ since the layout of issue 25, deploy/ before it."""
    script = ["-m", "serving.launcher"] if (build / "serving" / "launcher.py").is_file() else ["deploy/serve.py"]
    return [sys.executable, *script, "--bind", f"127.0.0.1:{port}", "--processes", str(processes)]


def start(build: Path, port: int, processes: int, log: Path, timeout: float = 240) -> subprocess.Popen:
    """A server from `build`, returned once each of its app processes says it is warmed up."""
    with log.open("w") as out:       # the server keeps its own copy of the file
        proc = subprocess.Popen(serve_command(build, port, processes), cwd=build, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout
    while log.read_text().count("warmed up") < processes:
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            raise SystemExit(f"{build}: the server did not warm up (see {log})")
        time.sleep(0.5)
    return proc


def stop(proc: subprocess.Popen) -> None:
    """The launcher and everything it started (app processes, HAProxy, redis-server): one process group."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(wait)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def one_run(build: Path, args: argparse.Namespace, stem: Path) -> dict:
    """Serve `build`, load it with a class, stop it; class_load's summary of the level."""
    proc = start(build, args.port, args.processes, stem.with_suffix(".server.log"))
    try:
        time.sleep(args.settle)
        subprocess.run([sys.executable, "-m", "benchmarks.class_load", "--url", f"http://127.0.0.1:{args.port}",
                        "--students", str(args.students), "--pause", "0", "--scenario", args.scenario, "--checkpoint",
                        str(build / "checkpoints" / args.checkpoint), "--json", str(stem.with_suffix(".json"))],
                       cwd=ROOT, check=True, stdout=subprocess.DEVNULL, timeout=args.max_seconds)
    finally:
        stop(proc)
    return json.loads(stem.with_suffix(".json").read_text())[0]


def rotated(names: list[str], rounds: int) -> list[list[str]]:
    return [names[r % len(names):] + names[: r % len(names)] for r in range(rounds)]


def report(names: list[str], runs: dict[str, list[dict]]) -> None:
    """Medians over rounds per build, and each build's ratio to the first."""
    ratios = [f"{n} / {names[0]}" for n in names[1:]]
    print(f"\nmedians over {len(runs[names[0]])} rounds ({machine()}):")
    print(_row(["", *names, *ratios]))
    print("|---" * (1 + len(names) + len(ratios)) + "|")
    for key, label in KEYS:
        seen = {n: [r[key] for r in runs[n] if r.get(key) is not None] for n in names}
        if not all(seen.values()):
            continue                                   # a key an older run's summary does not have
        med = {n: statistics.median(v) for n, v in seen.items()}
        print(_row([label, *(_num(med[n]) for n in names), *(f"{med[n] / med[names[0]]:.2f}" for n in names[1:])]))
    print(_row(["errors", *(str(sum(r["errors"] for r in runs[n])) for n in names), *([""] * len(ratios))]))


def _num(x: float) -> str:
    """Three decimals under 1 (core-seconds a first page: issue 53's target is 0.08), else two."""
    return f"{x:.3f}" if abs(x) < 1 else f"{x:.2f}"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def parse_build(text: str) -> tuple[str, Path]:
    name, sep, path = text.partition("=")
    build = Path(path).resolve()
    if not sep or not name or not (build / "app" / "main.py").is_file():
        raise argparse.ArgumentTypeError(f"expected NAME=DIR with DIR a checkout of this project, got {text!r}")
    return name, build


def server_arguments(p: argparse.ArgumentParser, rounds: int, port: int, out: str) -> None:
    """The options of a build-against-build benchmark's servers (this one's, benchmarks/follow_ab.py's)."""
    p.add_argument("--build", type=parse_build, action="append", required=True, metavar="NAME=DIR",
                   help="a build to serve (a checkout or git worktree); the first is the reference; repeat")
    p.add_argument("--rounds", type=int, default=rounds,
                   help=f"rounds; each serves every build once (default {rounds})")
    p.add_argument("--processes", type=int, default=2, help="app processes per server (default 2)")
    p.add_argument("--port", type=int, default=port, help=f"the proxy's port (default {port})")
    p.add_argument("--settle", type=float, default=3.0, help="seconds between warm and the class (default 3)")
    p.add_argument("--out", default=out, help="where each run's files and server log go")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.class_ab", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    server_arguments(p, rounds=5, port=8700, out="runs/class_ab")
    p.add_argument("--students", type=int, default=30, help="students in the class (default 30)")
    p.add_argument("--scenario", default="open", choices=("open", "distinct"),
                   help="open: 30 sentences cycled (the repeated-sentence scenario); distinct: every student a "
                        "sentence no one else had (issue 53); default open")
    p.add_argument("--checkpoint", default="multi30k-en-de", help="the checkpoint the app opens on")
    p.add_argument("--max-seconds", type=float, default=600, help="bound on one class (default 600)")
    args = p.parse_args(argv)
    builds = dict(args.build)
    names = list(builds)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[dict]] = {n: [] for n in names}
    for r, order in enumerate(rotated(names, args.rounds)):
        for name in order:
            s = one_run(builds[name], args, out / f"{name}-{r}")
            runs[name].append(s)
            print(f"round {r + 1} {name}: first page p50 / p95 {s['first_p50']:.2f} / {s['first_p95']:.2f} s, "
                  f"change p95 {s['change_p95']:.2f} s, CPU {s['cpu_cores']:.2f}, errors {s['errors']}", flush=True)
    report(names, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
