"""The whole-model overview in a real browser (issue 13): how long from submitting a sentence
to the overview painted, and from clicking a block to its panel.

  .venv/bin/python -m benchmarks.overview_speed --url http://127.0.0.1:8501 [--sentences 6]

Debian's Chromium, headless, on the app's overview (its first page, at /; start the app yourself,
nothing else running). Submit: type a new sentence of about 20 subword tokens (never seen by this
server, so nothing is cached), press Enter, stop the clock when the script run is over and
the figure shows the new translation's numbers. Open: click a block in the figure (where
plotly drew it), stop when its panel's header is drawn.
"""
from __future__ import annotations

import argparse
import statistics
import time

from benchmarks.lab_latency import ARGS, CHROMIUM, line
from tests.support import click_block, settle

SENTENCES = [
    "A young woman in a red jacket is walking her small dog along the beach at sunset.",
    "Two old men are playing chess on a wooden table in the middle of a busy park.",
    "A boy wearing a blue helmet rides his bicycle down a steep hill next to the river.",
    "Several workers in orange vests are repairing the road in front of a large building.",
    "A little girl with curly hair is eating a green apple while sitting on the grass.",
    "The man in the black suit is talking on his phone while waiting for the train.",
    "A group of children are singing songs together in a bright classroom with big windows.",
    "Three dogs are running across a snowy field toward a man holding a red ball.",
]
BLOCKS = [("decoder.feed_forward", "Position-wise feed-forward network"),
          ("encoder.self_attn.norm", "Add & Norm after self attn"),
          ("output.softmax", "The output: linear layer"),
          ("encoder.embedding", "Input embedding"),
          ("decoder.cross_attn", "Cross-attention (queries"),
          ("encoder.positional", "Positional encoding added")]




def submit(page, text: str) -> float:
    box = page.get_by_label("Sentence to translate", exact=False)
    box.fill(text)
    before = page.locator(".st-key-translation h3").first.inner_text()
    start = time.perf_counter()
    box.press("Enter")
    page.wait_for_function("""(before) => {
        const h = document.querySelector('.st-key-translation h3');
        const app = document.querySelector("[data-testid='stApp']");
        return h && h.innerText !== before && app.getAttribute('data-test-script-state') === 'notRunning'
            && document.querySelector('.st-key-overview_figure .js-plotly-plot .heatmaplayer');
    }""", arg=before, timeout=60_000, polling="raf")
    return time.perf_counter() - start


def open_block(page, block: str, header: str) -> float:
    start = time.perf_counter()
    click_block(page, block)
    page.locator("h3", has_text=header).first.wait_for(timeout=30_000)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    from playwright.sync_api import sync_playwright
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8501")
    ap.add_argument("--sentences", type=int, default=6, help=f"at most {len(SENTENCES)}")
    args = ap.parse_args(argv)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1600})
        page.goto(args.url)                    # the overview is the first page, at /
        page.wait_for_selector(".st-key-overview_figure .js-plotly-plot", timeout=90_000)
        settle(page)
        submits = [submit(page, s) for s in SENTENCES[:args.sentences]]
        settle(page)
        opens = []
        for block, header in BLOCKS:
            opens.append(open_block(page, block, header))
            settle(page)
        browser.close()
    print(line("submit -> overview painted", submits))
    print(line("click a block -> its panel", opens))
    print(f"(medians: {statistics.median(submits):.2f} s and {statistics.median(opens):.2f} s)")


if __name__ == "__main__":
    main()
