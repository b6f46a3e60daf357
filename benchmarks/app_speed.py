"""App speed in a real headless Chromium, and server time of a decoding step.

1. Browser: type a sentence, press Enter, time until the script run is over and every
   chart is drawn (the translation and all heatmaps visible). Repeated with new
   sentences (no cache hits), median reported.
2. Server: AppTest time of one "Next" click in the step-through view (script run
   only; no model call, the decoding is cached), and of one widget change (the
   explore page's layer picker).

  .venv/bin/python -m benchmarks.app_speed [--runs 7] [--checkpoints DIR]

--checkpoints: the directory the app takes its models from (default: checkpoints/);
the app opens on multi30k-en-de if it is there, else on the first one.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from benchmarks.common import app_server

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
# ~20 subword tokens each (en); each one new, so nothing is served from the cache
SENTENCES = [
    "A young woman in a blue jacket is walking her dog along the beach at sunset.",
    "Two men in orange vests are working on the road next to a yellow truck today.",
    "A little girl with a pink helmet rides her bicycle down the hill near her house.",
    "Several people are sitting at a long table outside a small cafe in the old city.",
    "A man wearing a black hat plays the guitar while a crowd watches him on the street.",
    "Three children in red shirts are jumping into the lake from a wooden dock in summer.",
    "An old man is reading a newspaper on a green bench in front of a large building.",
    "A brown dog is catching a white frisbee in the air over the grass in the park.",
]


def wait_ready(page) -> None:
    page.wait_for_timeout(100)
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=60_000)


# The explorer's two charts, drawn in the browser (app/attention_charts.py): each says when its data is on screen.
DRAWN = ".attention-chart[data-state='drawn'] .main-svg"
ALL_DRAWN = ("() => { const c = document.querySelectorAll('.attention-chart');"
             " return c.length >= 2 && [...c].every(e => e.dataset.state === 'drawn'); }")


def browser_timings(url: str, runs: int) -> list[float]:
    from playwright.sync_api import sync_playwright
    out = []
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-dev-shm-usage"])
        page = b.new_page(viewport={"width": 1500, "height": 1100})
        page.goto(f"{url.rstrip('/')}/explore")       # the explorer: the page these numbers were first taken on
        page.wait_for_selector(DRAWN, timeout=90_000)
        wait_ready(page)
        box = page.get_by_label("Sentence to translate", exact=False)
        for text in SENTENCES[:runs]:
            box.fill(text)
            start = time.perf_counter()
            box.press("Enter")
            page.wait_for_selector("[data-testid='stApp'][data-test-script-state='running']", timeout=10_000)
            page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=60_000)
            page.wait_for_function(ALL_DRAWN)
            out.append(time.perf_counter() - start)
        b.close()
    return out


def step_server_times(runs: int) -> list[float]:
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=120)
    at.query_params.update({"view": "step", "text": SENTENCES[0]})     # a link to the step page
    at.run()
    times = []
    for _ in range(runs):
        if at.button(key="next").disabled:
            at.button(key="reset").click().run()
        start = time.perf_counter()
        at.button(key="next").click().run()
        times.append(time.perf_counter() - start)
        assert not at.exception
    return times


def widget_server_times(runs: int) -> list[float]:
    """AppTest time of a layer change on the explore page (the explanation is cached)."""
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=120)
    at.query_params.update({"text": SENTENCES[1]})
    at.run()
    n_layers = len(at.selectbox(key="layer").options)
    times = []
    for i in range(runs):
        start = time.perf_counter()
        at.selectbox(key="layer").set_value((i + 1) % n_layers).run()
        times.append(time.perf_counter() - start)
        assert not at.exception
    return times


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--checkpoints", help="directory of checkpoints for the app (default checkpoints/)")
    a = p.parse_args(argv)
    if a.checkpoints:
        os.environ["TRANSFORMER_CHECKPOINTS"] = str(Path(a.checkpoints).resolve())
    with app_server(a.port) as url:
        t = browser_timings(url, a.runs)
    print(f"browser, Enter -> translation and all charts drawn: median {statistics.median(t):.2f} s "
          f"(min {min(t):.2f}, max {max(t):.2f}, n={len(t)})")
    for name, fn in (("one 'Next' step", step_server_times), ("one widget change (layer)", widget_server_times)):
        s = fn(max(a.runs * 2, 10))
        print(f"server, {name} (script run): median {statistics.median(s) * 1000:.0f} ms "
              f"(min {min(s) * 1000:.0f}, max {max(s) * 1000:.0f}, n={len(s)})")


if __name__ == "__main__":
    main()
