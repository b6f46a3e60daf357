"""The training lab in a real headless Chromium: train the default task and see the curve
and the reverse alignment; one training slot: a second tab waits in the queue and starts
when the first tab is closed. Screenshots go to test-artifacts/."""
from __future__ import annotations

import json
import os
import re
import time

import numpy as np
import pytest

from tests.support import ARTIFACTS, CHROMIUM, app_server, no_errors, open_page, settle

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} not installed "
                                 "(apt-get install -y chromium)")]


@pytest.fixture(scope="module")
def lab_server(app_checkpoints):
    with app_server(app_checkpoints, TRANSFORMER_LAB_SLOTS="1") as url:
        yield url


def open_lab(browser, url: str, height: int = 1100):
    return open_page(browser, f"{url}/lab", ".st-key-lab_train button", height)


def figure_z(page, key: str) -> np.ndarray:
    """The z matrix of the first heatmap of the plotly chart drawn under widget key `key`."""
    data = page.evaluate(f"""() => {{
        const el = document.querySelector('.st-key-{key} .js-plotly-plot') ||
                   [...document.querySelectorAll('.js-plotly-plot')].find(p => p.closest('[class*="st-key-{key}"]'));
        return JSON.stringify(Array.from(el._fullData[0].z, row => Array.from(row)));   // decoded typed arrays
    }}""")
    return np.array(json.loads(data), dtype=float)


def test_train_the_default_task_and_see_the_alignment_form(lab_server, browser):
    page = open_lab(browser, lab_server, height=3200)          # tall: the screenshots show the whole page
    page.locator(".st-key-lab_train button").click()
    page.get_by_text(re.compile(r"Training: step [3-9]\d\d of")).first.wait_for(timeout=90_000)   # half-way
    page.screenshot(path=str(ARTIFACTS / "lab-training.png"), full_page=True)
    page.get_by_text("reached 100 % held-out accuracy", exact=False).wait_for(timeout=150_000)
    settle(page)
    no_errors(page)
    assert page.locator(".st-key-lab_curves .js-plotly-plot").count() == 1
    seq_acc = page.evaluate("() => document.querySelector('.st-key-lab_curves .js-plotly-plot').data[3].y")
    assert seq_acc[0] < 0.05 and seq_acc[-1] == 1.0
    cross = figure_z(page, "lab_cross_mean")                    # (T, S): decoder input x source (with </s>)
    n = cross.shape[1] - 1
    assert [int(cross[i, :n].argmax()) for i in range(n)] == list(range(n - 1, -1, -1))   # the anti-diagonal
    page.locator(".st-key-lab_text input").wait_for()
    assert "Step 0" in page.inner_text("body")
    page.screenshot(path=str(ARTIFACTS / "lab-trained.png"), full_page=True)
    # the tabs of the attention grids are lazy: the open one's grid alone is drawn, another tab draws its own
    def drawn(part: str = "") -> int:
        return page.locator(f"[class*='st-key-lab_grid_{part}'] .js-plotly-plot").count()
    assert drawn() == 1 and drawn("decoder-cross_attn") == 1
    page.get_by_role("tab", name="encoder self-attention").click()
    page.locator(".st-key-lab_grid_encoder-self_attn .js-plotly-plot").wait_for(timeout=30_000)
    settle(page)
    assert drawn() == 1
    no_errors(page)


def test_one_slot_a_second_tab_queues_and_starts_when_the_first_closes(lab_server, browser):
    first = open_lab(browser, lab_server)
    first.locator(".st-key-lab_positional_encoding label").click()      # never reaches 100 %: it keeps training
    settle(first)
    first.locator(".st-key-lab_train button").click()
    first.get_by_text("Training: step", exact=False).first.wait_for(timeout=30_000)
    second = open_lab(browser, lab_server)
    second.locator(".st-key-lab_train button").click()
    second.get_by_text("you are number 1 in the queue", exact=False).wait_for(timeout=15_000)
    second.screenshot(path=str(ARTIFACTS / "lab-queued.png"), full_page=False)
    closed = time.monotonic()
    first.close()
    second.get_by_text("in the queue", exact=False).first.wait_for(state="detached", timeout=15_000)
    assert time.monotonic() - closed < 8              # the closed tab's run stopped, its slot went to the next
    second.get_by_text("Training: step", exact=False).first.wait_for(timeout=60_000)   # a new training process
    second.locator(".st-key-lab_stop button").click()
    second.get_by_text("The run was stopped", exact=False).wait_for(timeout=15_000)
    settle(second)
    no_errors(second)
