"""Does the page stay responsive while the training lab trains? (issue 15)

  .venv/bin/python -m benchmarks.lab_latency --url http://127.0.0.1:8501 [--changes 12]

In a real headless Chromium (Debian's /usr/bin/chromium) on the app's /lab page: switch the
sidebar's decoding method between greedy and beam and time each change from the click to
its visible effect (the beam-size slider appears or disappears). Three phases:
  empty      the lab page before any run (no charts);
  trained    after a default run ended (its time to 100 % is printed): the same charts as
             while training, nothing training;
  training   while a run trains: the default reverse task with the positional encoding
             switched off (the same model and cost per step, but it never reaches 100 %, so
             it trains through every measurement).
The browser runs on the same machine as the server and takes its share of the cores.
Start the app yourself (`make app`), nothing else running.
"""
from __future__ import annotations

import argparse
import statistics
import time

from tests.support import settle

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--disable-dev-shm-usage"]


def change(page, method: str) -> float:
    """Choose `method` in the sidebar; seconds until the beam-size slider shows (or goes)."""
    start = time.perf_counter()
    page.locator(".st-key-method label", has_text=method).click()
    page.locator(".st-key-beam_size").wait_for(state="attached" if method == "beam" else "detached", timeout=30_000)
    return time.perf_counter() - start


def measure(page, changes: int, pause_s: float = 1.0) -> list[float]:
    out = []
    for i in range(changes):
        out.append(change(page, "beam" if i % 2 == 0 else "greedy"))
        page.wait_for_timeout(int(pause_s * 1000))
    return out


def line(name: str, xs: list[float]) -> str:
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]
    return f"{name}: n={len(xs)}, median {statistics.median(xs):.3f} s, p95 {p95:.3f} s, max {xs[-1]:.3f} s"


def main(argv: list[str] | None = None) -> None:
    from playwright.sync_api import sync_playwright
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8501")
    ap.add_argument("--changes", type=int, default=12)
    args = ap.parse_args(argv)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        page.goto(f"{args.url}/lab")
        page.wait_for_selector(".st-key-lab_train button", timeout=90_000)
        settle(page)
        if page.locator(".st-key-beam_size").count():
            change(page, "greedy")
        empty = measure(page, args.changes)
        start = time.perf_counter()
        page.locator(".st-key-lab_train button").click()
        page.get_by_text("reached 100 % held-out accuracy", exact=False).wait_for(timeout=300_000)
        reached = time.perf_counter() - start
        settle(page)
        trained = measure(page, args.changes)
        page.locator(".st-key-lab_positional_encoding label").click()
        settle(page)
        page.locator(".st-key-lab_train button").click()
        page.get_by_text("Training: step", exact=False).first.wait_for(timeout=30_000)
        busy = measure(page, args.changes)
        still = page.get_by_text("Training: step", exact=False).count() > 0
        page.locator(".st-key-lab_stop button").click()
        browser.close()
    print(f"default run: 100 % held-out accuracy {reached:.1f} s after the click on Train (browser watching)")
    print(line("empty page", empty))
    print(line("after a run", trained))
    print(line("while training", busy) + ("" if still else "  (WARNING: the run had ended before the last change)"))


if __name__ == "__main__":
    main()
