"""Helpers for the benchmark scripts: alternating timing and medians, an app server."""
from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {torch.get_num_threads()} torch threads, torch {torch.__version__}, {platform.python_version()}"


def alternate(
    a: Callable[[], object], b: Callable[[], object], rounds: int, warmup: int = 2
) -> tuple[list[float], list[float]]:
    """Time a and b alternately (A B A B ...), after warm-up; returns the two lists of seconds."""
    for _ in range(warmup):
        a(), b()
    ta, tb = [], []
    for _ in range(rounds):
        for fn, out in ((a, ta), (b, tb)):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    return ta, tb


def ratio_line(name_a: str, ta: list[float], name_b: str, tb: list[float]) -> str:
    ma, mb = statistics.median(ta), statistics.median(tb)
    ratios = sorted(x / y for x, y in zip(ta, tb))
    return (f"{name_a}: median {ma * 1000:.1f} ms | {name_b}: median {mb * 1000:.1f} ms | "
            f"ratio {name_a}/{name_b}: median {statistics.median(ratios):.3f} "
            f"(pairwise min {ratios[0]:.3f}, max {ratios[-1]:.3f}, n={len(ratios)})")


ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def app_server(port: int, env: dict[str, str] | None = None) -> Iterator[str]:
    """`streamlit run app/main.py` on 127.0.0.1:port, once healthy: its URL; stopped afterwards."""
    server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "app" / "main.py"),
                               "--server.headless", "true", "--server.port", str(port), "--server.address",
                               "127.0.0.1", "--browser.gatherUsageStats", "false"], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ, **(env or {})))
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read() == b"ok":
                    break
            except OSError:
                time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
