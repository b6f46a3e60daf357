"""How long "Heads across the corpus" takes to open from a checkpoint's shipped statistics file:
in a fresh app process (the model already loaded by another page, as when a class has been using
the app), the page's first run reads and checks the file (fingerprint of the weights, JSON) and
draws its figures; a second run is what the next student pays; a click on another head redraws
its profile. Script time in AppTest, each round in a new process; medians. With --browser: in a
real Chromium, each round on a new server, the page menu's click on "Heads across the corpus"
(after the model card page loaded the model) until the grid, the profile and the map are drawn.

  .venv/bin/python -m benchmarks.heads_page [--rounds 5] [--checkpoint multi30k-en-de] [--browser]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.app_speed import CHROMIUM, wait_ready
from benchmarks.common import app_server
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


def browser_round(checkpoint: str, port: int) -> float:
    """Seconds from the menu click to the page's three charts, on a fresh server."""
    from playwright.sync_api import sync_playwright
    with app_server(port) as url, sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-dev-shm-usage"])
        page = b.new_page(viewport={"width": 1500, "height": 1800})
        page.goto(f"{url}/card?checkpoint={checkpoint}")
        page.wait_for_selector(".st-key-page-card", timeout=120_000)
        wait_ready(page)
        link = page.get_by_text("Heads across the corpus", exact=True)
        link.hover()                     # waits until the menu is actionable (about 2 s after a first load)
        start = time.perf_counter()
        link.click(force=True)            # no further actionability wait inside the timing
        for key in ("heads_grid", "heads_profile", "heads_map"):
            page.wait_for_selector(f".st-key-{key} .js-plotly-plot", timeout=60_000)
        wait_ready(page)
        seconds = time.perf_counter() - start
        b.close()
    return seconds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--checkpoint", default="multi30k-en-de")
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)     # a round, in this process
    p.add_argument("--browser", action="store_true", help="time the page in Chromium instead")
    p.add_argument("--port", type=int, default=8766)
    a = p.parse_args(argv)
    if a.browser:
        t = [browser_round(a.checkpoint, a.port) for _ in range(a.rounds)]
        print(json.dumps({"checkpoint": a.checkpoint, "rounds": a.rounds, "browser_s": {
            "median": round(statistics.median(t), 3), "min": round(min(t), 3), "max": round(max(t), 3)}}))
        return 0
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
