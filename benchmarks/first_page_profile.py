"""Where a class's first pages spend the server's CPU (issue 53), by part of the page.

  .venv/bin/pip install py-spy          # a sampling profiler; not one of the project's dependencies
  .venv/bin/python -m benchmarks.first_page_profile --students 30

A fresh server (`serving.launcher --processes 2`, as class_ab starts it), then class_load's distinct scenario (every
student a sentence no one else had, then --changes layer or head changes each) while py-spy samples every app
process 100 times a second. Each sample's stack goes into the first bucket below that it holds (the beam search
before the page that called it); the app processes' CPU time over the class (psutil) is shared out by the buckets'
samples, and HAProxy's own CPU (it sends the static files, gzipped once and kept) is read apart. Printed: core-seconds
per first page for each bucket. py-spy adds a few per cent of CPU to the processes it samples; class_load's one
Chromium visit (to learn the static files) adds a first page before the class. Nothing else should run meanwhile.

Every thread that is not idle is sampled, also one waiting for the GIL: it is counted where it let the GIL go (a
socket read, a large hash update), which inflates those places when the sessions' threads compete. --gil samples
only the thread holding the GIL: right for Python code, but torch releases the GIL while it computes, so the model's
passes then count for less than their CPU. Compare both (docs/benchmarks-history.md, session 39). A sample whose
innermost frame waits (a condition, the event loop's epoll) is left out: py-spy's --nonblocking sampling does not
always see that such a thread sleeps (a third of all samples in session 47), and counted they gave the event loop's
bucket 40 % of the CPU where its own clock says about a quarter.
"""
from __future__ import annotations

import argparse
import collections
import json
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.class_ab import start, stop
from benchmarks.class_load import cpu_seconds, server_processes
from benchmarks.common import ROOT, machine

# (what a stack holds, the bucket's name): the first that a sample's stack holds names it
BUCKETS = (
    ("decode_many (model/inference/pipeline.py", "beam search (decode_many: the batch of the moment)"),
    ("explain_decoded (model/inference/pipeline.py", "teacher-forced pass with its trace (explain_decoded)"),
    ("draw (app/attention_charts.py", "the explorer's two charts (their numbers to the browser)"),
    ("streamlit/elements/spinner.py", "st.spinner"),
    ("_mount_component (", "components (mounting)"),
    ("(app/", "the page's other code (app/, figures/, model/)"),
    ("(figures/", "the page's other code (app/, figures/, model/)"),
    ("(model/", "the page's other code (app/, figures/, model/)"),
    ("script_runner.py", "Streamlit's script run around the page"),
    ("", "other threads (the event loop: websockets, messages; timers)"),
)


# innermost frames of a thread that waits (for a condition or a lock's wake-up, or in the event loop's epoll)
WAITS = ("Condition.wait (threading.py", "EpollSelector.select (selectors.py")


def bucket_counts(raw_files: list[Path]) -> collections.Counter:
    """Samples per bucket over py-spy's raw files (one line per stack: frames joined by ';', then a count); the
    samples of a waiting thread (WAITS) under None."""
    counts: collections.Counter = collections.Counter()
    for path in raw_files:
        for line in path.read_text().splitlines():
            stack, _, n = line.rpartition(" ")
            if not (stack and n.isdigit()):
                continue
            waits = stack.rpartition(";")[2].startswith(WAITS)
            counts[None if waits else next(name for key, name in BUCKETS if key in stack)] += int(n)
    return counts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--students", type=int, default=30)
    p.add_argument("--changes", type=int, default=5, help="layer or head changes per student (class_load's)")
    p.add_argument("--processes", type=int, default=2, help="app processes (the launcher's default on 2 cores)")
    p.add_argument("--port", type=int, default=8770)
    p.add_argument("--out", help="keep py-spy's raw stacks and the server's log in this folder")
    p.add_argument("--gil", action="store_true", help="sample only the thread holding the GIL (see above)")
    args = p.parse_args(argv)
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        raise SystemExit("needs py-spy: .venv/bin/pip install py-spy")
    out = Path(args.out or tempfile.mkdtemp(prefix="first-page-profile-"))
    out.mkdir(parents=True, exist_ok=True)
    server = start(ROOT, args.port, args.processes, out / "server.log")
    try:
        procs = [p for p in server_processes() if p.info["name"] not in ("redis-server",)]
        apps = [p for p in procs if "streamlit" in " ".join(p.cmdline())]
        proxy = [p for p in procs if p.info["name"] == "haproxy"]
        spies = [subprocess.Popen([spy, "record", *(["--gil"] if args.gil else []), "-p", str(a.pid), "-r", "100",
                                   "-f", "raw", "--nonblocking",
                                   "-o", str(out / f"app-{a.pid}.txt")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for a in apps]
        app_before, proxy_before = cpu_seconds(apps), cpu_seconds(proxy)
        summary = out / "class.json"
        subprocess.run([sys.executable, "-m", "benchmarks.class_load", "--url", f"http://127.0.0.1:{args.port}",
                        "--students", str(args.students), "--scenario", "distinct", "--changes", str(args.changes),
                        "--pause", "0", "--json", str(summary)], cwd=ROOT, check=True)
        app_cpu, proxy_cpu = cpu_seconds(apps) - app_before, cpu_seconds(proxy) - proxy_before
        for s in spies:
            s.send_signal(signal.SIGINT)
        for s in spies:
            s.wait(60)
    finally:
        stop(server)
    level = json.loads(summary.read_text())[0]
    counts = bucket_counts(sorted(out.glob("app-*.txt")))
    waits = counts.pop(None, 0)
    total = sum(counts.values()) or 1
    firsts = args.students
    print(f"\n{machine()}; {args.students} students, each a new sentence, {args.changes} changes each; "
          f"{args.processes} app processes; raw stacks in {out}")
    print(f"first page p50 / p95 {level['first_p50']:.2f} / {level['first_p95']:.2f} s, class_load's core-s per "
          f"first page {level['core_s_per_first']:.3f}; errors {level['errors']}")
    print(f"samples of waiting threads left out: {waits} of {waits + sum(counts.values())}")
    print("| where | share of the app processes' samples | core-s per first page |")
    print("|---|---|---|")
    for name, n in counts.most_common():
        print(f"| {name} | {n / total:.0%} | {app_cpu * n / total / firsts:.3f} |")
    print(f"| the app processes together | 100 % | {app_cpu / firsts:.3f} |")
    print(f"| HAProxy (static files, websockets) | | {proxy_cpu / firsts:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
