"""The guided lesson's "Try it" buttons (issue 54) in a real browser, on the shipped models: each opens its page
with its question asked (a forced first word, why one word and not another, a changed word, a word of several
pieces) and shows its answer; in German too. Screenshots go to test-artifacts/try-it-*.png."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import ARTIFACTS, CHROMIUM, no_errors, open_page, settle, wait_drawn

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not installed "
                                 "(apt-get install -y chromium)")]

LESSON = ".st-key-page-lesson [data-testid='stPlotlyChart']"
# lesson step -> (the page it opens, what its answer shows: a selector, and words on the page)
ANSWERS = {
    12: ("step", ".st-key-what_if_banner", "What if:"),
    11: ("attribution", ".st-key-why_not_chart .js-plotly-plot", "log p("),
    10: ("explore", ".st-key-compare_chart .js-plotly-plot", "first different token"),
    5: ("explore", ".st-key-several_chart .js-plotly-plot", "in every head"),
}


def _try(browser, server: str, step: int, lang: str = "en") -> object:
    suffix = "" if lang == "en" else f"&lang={lang}"
    page = open_page(browser, f"{server}/lesson?lesson={step}{suffix}", LESSON, 1400)
    page.get_by_role("button", name="Try it" if lang == "en" else "Ausprobieren").click()
    slug, selector, _words = ANSWERS[step]
    wait_drawn(page, f".st-key-page-{slug}")
    settle(page)
    wait_drawn(page, selector)
    no_errors(page)
    return page


@pytest.mark.parametrize("step", sorted(ANSWERS))
def test_each_try_it_opens_its_page_with_the_question_asked(shipped_server, browser, step):
    page = _try(browser, shipped_server, step)
    slug, _selector, words = ANSWERS[step]
    assert f"/{slug}" in page.url and words in page.inner_text("body")
    assert "The animal didn" in page.url or "animal" in page.url.replace("+", " ")
    if step == 12:
        assert "forced=" in page.url                                      # the class sees it too
    page.screenshot(path=str(ARTIFACTS / f"try-it-{step}.png"), full_page=True)


def test_a_try_it_in_german(shipped_server, browser):
    page = _try(browser, shipped_server, 12, "de")
    body = page.inner_text("body")
    assert "Was wäre, wenn:" in body and "Zurück zur eigenen Übersetzung des Modells" in body
