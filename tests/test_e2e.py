"""End to end in a real headless Chromium: start the server, type a sentence, wait for
the charts, step a beam search to its end, compare with `python -m model.translate`.
Screenshots of each view go to test-artifacts/."""
from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest

from tests.support import (
    ALL_DRAWN,
    ARTIFACTS,
    CHROMIUM,
    EXPLORE_DRAWN,
    QUIET_MS,
    ROOT,
    RUN_STARTS_MS,
    Tabs,
    axe,
    choose,
    english_sentences,
    go_to,
    no_errors,
    open_page,
    settle,
    shown_value,
    wait_drawn,
    wait_in_page,
)

SENTENCE = "Two young children are playing with a ball in the park."
pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not installed "
                                 "(apt-get install -y chromium)")]


@pytest.fixture
def server(shipped_server):
    """The app on the shipped checkpoints (tests/conftest.py): real translations in the screenshots."""
    return shipped_server, ROOT / "checkpoints"


def open_app(browser, url: str):
    """A new page on the app's attention explorer, its first charts drawn and its sentence box shown (else the
    failure says what the page shows instead: a full run here once found no box for 30 s after the charts)."""
    page = open_page(browser, f"{url}/explore", EXPLORE_DRAWN)
    wait_drawn(page, ".st-key-text input", timeout=30_000)
    return page


def test_translate_explore_and_step_through_beam(server, browser, tmp_path):
    url, root = server
    page = open_app(browser, url)

    box = page.get_by_label("Sentence to translate", exact=False)
    box.fill(SENTENCE)
    box.press("Enter")
    settle(page)
    wait_in_page(page, ALL_DRAWN)
    no_errors(page)
    shown = page.locator(".st-key-translation h3").first.inner_text().strip()
    page.screenshot(path=str(ARTIFACTS / "explore.png"), full_page=True)
    with page.expect_download(timeout=30_000) as download:        # the chosen head's numbers, written on the click
        page.get_by_role("button", name=re.compile(r"Download cross-layer0-head0\.csv")).click()
    rows = list(csv.reader(io.StringIO(Path(download.value.path()).read_text())))
    assert download.value.suggested_filename == "cross-layer0-head0.csv" and len(rows) > 2
    assert all(abs(sum(float(v) for v in row[1:]) - 1) < 1e-3 for row in rows[1:])     # each query's row sums to 1
    choose(page, "head", "1")                  # the browser's own choice, drawn at once
    assert "layer 0, head 1" in page.locator(".attention-chart .gtitle").last.text_content()
    # a run of the head's fragment (a highlighted row) sends the numbers by name only; a browser that lost them
    # asks for them and gets them again; the run knows head 1 (told before the row's change)
    page.evaluate("() => window.__attentionNumbers.clear()")
    choose(page, "query", "0: <s>")
    settle(page)
    wait_in_page(page, ALL_DRAWN, timeout=30_000)
    assert "layer 0, head 1" in page.locator(".attention-chart .gtitle").last.text_content()
    assert "head=1" in page.url and "query=0" in page.url, page.url

    page.get_by_text("Step through decoding").click()
    settle(page)
    no_errors(page)
    page.screenshot(path=str(ARTIFACTS / "step-0.png"), full_page=True)
    next_button = page.locator(".st-key-next button").first
    last = int(re.search(r"Step 0 of (\d+)", page.inner_text("body")).group(1))
    for i in range(last):
        if i % 2:
            page.keyboard.press("ArrowRight")                    # the keyboard shortcut steps too
        else:
            next_button.click()
        settle(page)
        assert f"Step {i + 1} of {last}" in page.inner_text("body")
    assert page.locator(".st-key-next button:disabled").count() >= 1     # nothing left to step
    no_errors(page)
    assert f"Step {last} of {last}" in page.inner_text("body")
    assert f"step={last}" in page.url                  # stepping (a fragment's rerun) keeps the link current
    page.screenshot(path=str(ARTIFACTS / "step-last.png"), full_page=True)

    ckpt = root / "multi30k-en-de"
    cli = subprocess.run([sys.executable, "-m", "model.translate", "--checkpoint", str(ckpt)], input=SENTENCE + "\n",
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    expected = cli.stdout.strip() or "(empty output)"
    assert shown == expected


def test_markup_is_not_executed(server, browser):
    page = open_app(browser, server[0])
    dialogs = []

    def on_dialog(dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()
    page.on("dialog", on_dialog)
    box = page.get_by_label("Sentence to translate", exact=False)
    box.fill("<b>hi</b><script>alert(1)</script><img src=x onerror=alert(2)>")
    box.press("Enter")
    settle(page)
    page.wait_for_timeout(500)
    page.remove_listener("dialog", on_dialog)          # the tab is kept for the next test (tests/support.Tabs)
    assert dialogs == []
    no_errors(page)






def test_every_page_from_another_in_the_browser(server, browser):
    """Issue 12's regression: a typed sentence, layer 1 / head 2 and step 2 survive the moves between
    the pages, clicked in the page menu: a round of all pages, each entered from one five places before
    it in the menu (every ordered pair of pages is walked in tests/test_pages.py, on the app's own runs)."""
    from app.pages import BY_SLUG, PAGES
    from tests.support import LAYER_PAGES, round_of

    page = open_app(browser, server[0])
    titles = {p.slug: p.title for p in PAGES}
    box = page.get_by_label("Sentence to translate", exact=False)
    box.fill(SENTENCE)
    box.press("Enter")
    settle(page)
    choose(page, "layer", "1")
    choose(page, "head", "2")
    page.locator("[data-testid='stSidebarNavLink']", has_text=titles["step"]).click()
    settle(page)
    for _ in range(2):
        page.locator(".st-key-next button").first.click()
        settle(page)
    translation = page.locator(".st-key-translation h3").first.inner_text().strip()
    route = round_of(list(titles), "step")
    for a, b in zip(route, route[1:]):
        where = f"after {a} -> {b}"
        go_to(page, titles[b], b)
        assert page.locator(f".st-key-page-{b}").count() == 1, where
        no_errors(page)
        if BY_SLUG[b].takes_sentence:
            assert page.get_by_label("Sentence to translate", exact=False).input_value() == SENTENCE, where
            assert page.locator(".st-key-translation h3").first.inner_text().strip() == translation, where
        if b in LAYER_PAGES:
            assert (shown_value(page, "layer"), shown_value(page, "head")) == ("1", "2"), where
        if b == "step":
            assert "Step 2 of" in page.inner_text("body"), where
        assert "layer=1" in page.url and "head=2" in page.url and "step=2" in page.url, (where, page.url)
    page.screenshot(path=str(ARTIFACTS / "after-every-move.png"), full_page=True)


def test_an_old_view_link_opens_its_page_at_its_path(server, browser):
    from playwright.sync_api import expect
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    page.goto(f"{server[0]}/?view=masks&text=A+dog+runs+on+the+beach.&layer=1&mask_kind=cross")
    page.wait_for_selector(".st-key-page-masks", timeout=90_000)
    settle(page)
    no_errors(page)
    assert "/masks?" in page.url and "view=" not in page.url and "layer=1" in page.url
    expect(page.get_by_label("Sentence to translate", exact=False)).to_have_value("A dog runs on the beach.",
                                                                                 timeout=10_000)
    assert shown_value(page, "layer") == "1"


def test_a_link_value_that_does_not_fit_is_said_on_the_page_it_opens(server, browser):
    """An old root link (no `block`) opens the explorer by a page switch: what did not fit in it is said on
    the explorer, not on the run the switch cut short."""
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    page.goto(f"{server[0]}/?text=A+dog.&beam=999")
    page.wait_for_selector(".st-key-page-explore", timeout=90_000)
    settle(page)
    no_errors(page)
    assert "“beam” is not a value this page takes" in page.inner_text("[data-testid='stAlert']")


def test_the_overview_opens_a_block_clicked_in_the_figure(server, browser):
    from tests.support import click_block
    page = open_page(browser, server[0], ".st-key-overview_figure .js-plotly-plot", height=2400)   # / is the overview
    no_errors(page)
    page.screenshot(path=str(ARTIFACTS / "overview.png"), full_page=True)
    for block, header in (("decoder.feed_forward", "Position-wise feed-forward network"),
                          ("encoder.self_attn.norm", "Add & Norm after self attn"),
                          ("output.softmax", "The output: linear layer, softmax")):
        click_block(page, block)
        page.get_by_text(header, exact=False).first.wait_for(timeout=20_000)
        settle(page)
        no_errors(page)
        assert f"block={block}" in page.url
    page.screenshot(path=str(ARTIFACTS / "overview-output.png"), full_page=True)


def test_the_whole_lesson_by_keyboard(server, browser):
    from app.views.lesson import STEPS
    page = open_page(browser, f"{server[0]}/lesson", ".st-key-page-lesson [data-testid='stPlotlyChart']", 1400)
    for k, step in enumerate(STEPS, start=1):
        page.locator("h2", has_text=step.title).first.wait_for(timeout=20_000)
        page.wait_for_selector(".st-key-page-lesson [data-testid='stPlotlyChart']")
        no_errors(page)
        if k > 1:                                    # the link is written as the run ends, after its heading shows
            wait_in_page(page, "(k) => new URLSearchParams(location.search).get('lesson') === String(k)",
                         arg=k, timeout=10_000)
        assert (f"lesson={k}" in page.url) == (k > 1), page.url
        if k in (1, 4, 6, 14):
            page.screenshot(path=str(ARTIFACTS / f"lesson-{k}.png"), full_page=True)
        if k < len(STEPS):
            page.locator("h2", has_text=step.title).first.click()        # focus on the page, not a widget
            page.keyboard.press("ArrowRight")
            settle(page)
    page.keyboard.press("ArrowLeft")
    page.locator("h2", has_text=STEPS[-2].title).first.wait_for(timeout=20_000)


def test_an_attention_block_opens_the_explorer_from_the_overview(server, browser):
    page = open_page(browser, f"{server[0]}/?block=encoder.self_attn&ov_layer=1", ".st-key-ov_open_attention button",
                     2000)
    page.locator(".st-key-ov_open_attention button").click()
    page.wait_for_selector(".st-key-page-explore", timeout=30_000)
    settle(page)
    no_errors(page)
    assert "kind=encoder_self" in page.url and "layer=1" in page.url, page.url      # explore lives at /


def test_the_app_opens_on_the_overview_and_older_root_links_on_the_explorer(server, browser):
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    page.goto(server[0])
    page.wait_for_selector(".st-key-page-overview", timeout=90_000)
    settle(page)
    assert "block=encoder.self_attn" in page.url                     # an overview link always names its block
    page.goto(f"{server[0]}/?text=A+dog+runs.&layer=1&head=2")      # made when the explorer was at /
    page.wait_for_selector(".st-key-page-explore", timeout=60_000)
    settle(page)
    assert (shown_value(page, "layer"), shown_value(page, "head")) == ("1", "2")
    page.goto(f"{server[0]}/?text=A+dog+runs.&block=decoder.feed_forward&layer=1")
    page.wait_for_selector(".st-key-page-overview", timeout=60_000)
    page.get_by_text("Position-wise feed-forward network", exact=False).first.wait_for(timeout=30_000)
    no_errors(page)


def test_a_click_on_a_head_opens_its_profile_and_the_explorer(server, browser):
    """Heads across the corpus: a click on a grid cell picks that head (the link follows), and a
    typical sentence opens the explorer on it, at the same kind, layer and head."""
    page = open_page(browser, f"{server[0]}/heads?kind=decoder_self", ".st-key-heads_grid .js-plotly-plot", 1800)
    no_errors(page)
    x, y = page.evaluate("""() => {
        const el = document.querySelector('.st-key-heads_grid .js-plotly-plot');
        const l = el._fullLayout;
        return [l.xaxis._offset + l.xaxis.l2p(3), l.yaxis._offset + l.yaxis.l2p(1)];
    }""")
    box = page.locator(".st-key-heads_grid .js-plotly-plot").bounding_box()
    page.mouse.click(box["x"] + x, box["y"] + y)
    page.locator("h3", has_text="Layer 1, head 3:").first.wait_for(timeout=30_000)
    settle(page)
    no_errors(page)
    assert "layer=1" in page.url and "head=3" in page.url, page.url
    page.screenshot(path=str(ARTIFACTS / "heads.png"), full_page=True)
    page.locator(".st-key-heads_open_t0 button").first.click()
    page.wait_for_selector(".st-key-page-explore", timeout=30_000)
    settle(page)
    no_errors(page)
    assert "kind=decoder_self" in page.url and "layer=1" in page.url and "head=3" in page.url, page.url


def test_a_click_on_the_knockout_grid_shows_that_knockouts_translation(server, browser):
    """Streamlit reports no click on a heatmap cell (streamlit#8760): the grid's cells carry invisible markers."""
    page = open_page(browser, f"{server[0]}/knockout", ".st-key-ko_grid .js-plotly-plot", 1600)
    x, y = page.evaluate("""() => {
        const l = document.querySelector('.st-key-ko_grid .js-plotly-plot')._fullLayout;
        return [l.xaxis._offset + l.xaxis.l2p(2), l.yaxis._offset + l.yaxis.l2p(0)];
    }""")
    box = page.locator(".st-key-ko_grid .js-plotly-plot").bounding_box()
    page.mouse.click(box["x"] + x, box["y"] + y)
    page.get_by_text("Without ", exact=False).first.wait_for(timeout=30_000)
    no_errors(page)


# The page's own words, without what is data: code, inputs, figures (their titles are read apart), the
# translation, and containers keyed "data-..." (a corpus's sentences).
PAGE_WORDS = """() => {
  const skip = 'code, pre, input, textarea, .js-plotly-plot, .st-key-translation, [class*="st-key-data-"]';
  const copy = document.querySelector('[data-testid="stApp"]').cloneNode(true);
  copy.querySelectorAll(skip).forEach(e => e.remove());
  copy.style.position = 'absolute'; copy.style.left = '-100000px';
  document.body.appendChild(copy);
  const lines = copy.innerText.split('\\n');
  copy.remove();
  const figures = [...document.querySelectorAll('.js-plotly-plot :is(.gtitle, .xtitle, .ytitle, .legendtext)')];
  return lines.concat(figures.map(e => e.textContent));
}"""



def test_every_page_in_german_reads_german_and_passes_axe(server, browser):
    """A browser that speaks German gets the app in German (no link needed); every page, reached from
    the menu, draws without error, has no English sentence left in its words or its figures, and
    axe-core finds no serious or critical WCAG 2.1 A/AA violation on it (with axe-core installed:
    `make test` installs it), nor in projector mode. Screenshots of every page in test-artifacts/."""
    from app.pages import PAGES
    from i18n import _, using
    context = browser.new_context(viewport={"width": 1400, "height": 1100}, locale="de-DE")
    page = context.new_page()
    page.goto(server[0])
    page.wait_for_selector(".st-key-page-overview", timeout=90_000)
    settle(page)
    assert "lang=de" in page.url and "Der Transformer, erklärt" in page.inner_text("h1")
    english, violations, counts = {}, {}, {}
    for p in PAGES:
        with using("de"):
            title = _(p.title)
        page.locator("[data-testid='stSidebarNavLink']", has_text=title).first.click()
        page.wait_for_selector(f".st-key-page-{p.slug}", timeout=90_000)
        settle(page)
        no_errors(page)
        if found := english_sentences(page.evaluate(PAGE_WORDS)):
            english[p.slug] = found
        page.screenshot(path=str(ARTIFACTS / f"{p.slug}.png"), full_page=True)
        axe(page, p.slug, counts, violations)
    page.locator(".st-key-projector label").first.click()          # projector mode: large fonts, high contrast
    settle(page)
    no_errors(page)
    page.screenshot(path=str(ARTIFACTS / "projector.png"), full_page=False)
    axe(page, "card, projector mode", counts, violations)
    context.close()
    assert not english, english
    assert not violations, violations
    print("axe-core violations (any impact) per page:", counts)


def _tab_to(page, test: str, presses: int = 120) -> None:
    """Press Tab until the focused element passes `test` (JS, on `e`)."""
    for _ in range(presses):
        page.keyboard.press("Tab")
        if page.evaluate(f"() => {{ const e = document.activeElement; return !!e && ({test}); }}"):
            return
    raise AssertionError(f"Tab never reached an element with {test}")


def test_the_step_page_by_keyboard_alone(server, browser):
    """No mouse: Tab to the sentence box and type a sentence, to the preset list and choose one with
    the arrow keys, to Next and press it."""
    page = open_page(browser, f"{server[0]}/step", ".st-key-next button")
    page.keyboard.press("Escape")
    _tab_to(page, "e.tagName === 'INPUT' && (e.getAttribute('aria-label') || '').startsWith('Sentence to translate')")
    page.keyboard.press("Control+A")
    page.keyboard.type("A dog runs in the park.")
    page.keyboard.press("Enter")
    settle(page)
    wait_in_page(page, "() => document.body.innerText.includes('Step 0 of')")
    assert "A+dog+runs+in+the+park." in page.url
    page.locator("h1").first.click()                             # start again from the top of the page
    _tab_to(page, "e.getAttribute('role') === 'combobox' && e.closest('.st-key-preset') !== null")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    settle(page)
    wait_in_page(page, """() => [...document.querySelectorAll('input')].some(i =>
      (i.getAttribute('aria-label') || '').startsWith('Sentence to translate') && i.value &&
      i.value !== 'A dog runs in the park.')""", timeout=10_000)  # the preset's sentence (a full run failed at once)
    _tab_to(page, "e.tagName === 'BUTTON' && e.closest('.st-key-next') !== null")
    page.keyboard.press("Enter")
    settle(page)
    wait_in_page(page, "() => document.body.innerText.includes('Step 1 of')")
    no_errors(page)


SWITCH_TIMER = """([chart, k]) => {
    const gd = document.querySelector(chart);
    window.__switch = {clicked: null, drawn: null};
    document.addEventListener("click", () => { window.__switch.clicked ??= performance.now(); },
                              {capture: true, once: true});
    gd.once("plotly_afterplot", () => { window.__switch.drawn = performance.now(); });
}"""


# The menu's entries that its scroll box shows without scrolling: inside the chart's box.
VISIBLE_ENTRIES = """(chart) => {
  const box = document.querySelector(chart + ' .main-svg').getBoundingClientRect();
  return [...document.querySelectorAll(chart + ' .updatemenu-dropdown-button')]
    .map((e, k) => [k, e.getBoundingClientRect()])
    .filter(([k, r]) => r.height > 0 && r.top >= box.top && r.bottom <= box.bottom).map(([k, r]) => k);
}"""


# Whether the one-head chart shows head k: false while the element is being replaced (no chart, no data yet).
SHOWN_HEAD = """([chart, k]) => {
  const c = document.querySelector(chart);
  return !!(c && c._fullData) && c._fullData.findIndex(t => t.visible === true) === k;
}"""


def test_the_heads_chart_switches_heads_in_the_browser_and_the_server_follows(server, browser):
    """Issue 43, item 4: the one-head chart holds every head; its menu shows another at once (no round trip),
    and the pickers and the link follow (the server learns it with the student's next action elsewhere: the next
    test). The time from the click to the new chart is measured in the page (performance.now at the click, at
    plotly's redraw)."""
    import statistics
    page = open_app(browser, server[0])
    chart = ".st-key-single .js-plotly-plot"
    page.wait_for_selector(f"{chart} .main-svg", state="attached", timeout=60_000)      # drawn after the first
    labels = page.evaluate(f"document.querySelector('{chart}').layout.updatemenus[0].buttons.map(b => b.label)")
    pairs = [tuple(int(n) for n in re.findall(r"\d+", label)) for label in labels]     # (layer, head) per button
    n_heads = max(h for _, h in pairs) + 1
    page.locator(f"{chart} .updatemenu-header-group").first.click()          # the menu: which entries its scroll
    shown_now = page.evaluate(VISIBLE_ENTRIES, chart)                        # box shows unscrolled (a deep model
    page.locator(f"{chart} .updatemenu-header-group").first.click()          # has more than fit)
    wanted = [(i, h) for k, (i, h) in enumerate(pairs) if i > 0 and h > 0 and k in shown_now]   # the link names it
    assert len(wanted) >= 3, (shown_now, pairs)
    wanted = sorted(wanted, key=lambda p: (p[1], p[0]))[::max(1, len(wanted) // 5)][:5]   # heads differ in turn
    seconds = []
    for k in [pairs.index(p) for p in wanted]:
        page.locator(f"{chart} .updatemenu-header-group").first.click()
        page.evaluate(SWITCH_TIMER, [chart, k])
        page.locator(f"{chart} .updatemenu-dropdown-button").nth(k).click()
        wait_in_page(page, "window.__switch.drawn !== null", timeout=5_000)
        seconds.append(page.evaluate("(window.__switch.drawn - window.__switch.clicked) / 1000"))
        # the chosen head, drawn in the browser; read when the chart is there (the server's rerun may be
        # replacing the element at that moment: then the new one is read)
        wait_in_page(page, SHOWN_HEAD, arg=[chart, k], timeout=10_000)
        layer, head = divmod(k, n_heads)
        wait_in_page(page, f"location.search.includes('layer={layer}') && location.search.includes('head={head}')",
                     timeout=30_000)                         # ... and the server caught up
        settle(page)
        assert (shown_value(page, "layer"), shown_value(page, "head")) == (str(layer), str(head))
    no_errors(page)
    median = statistics.median(seconds)
    print(f"click to new chart, in the browser: median {median * 1000:.0f} ms over {len(seconds)} switches "
          f"({', '.join(f'{s * 1000:.0f}' for s in seconds)} ms)")
    assert median < 0.25, seconds                                     # measured ~tens of ms; the issue asks 0.05


def test_a_kept_tab_comes_back_blank_at_the_size_asked_and_a_closed_one_is_not_kept(browser):
    """tests/support.Tabs, the browser fixture's tabs: what a test left in a tab, and the contexts it opened, are
    gone before the next test; the kept tab is the same tab (no new renderer), at the size the next test asks. A tab
    the fixture kept and another `Tabs` closed is not handed out again."""
    browser.new_page()
    browser.end_test()                                  # the module's fixture keeps that tab: closed below
    tabs = Tabs(browser.browser)
    first = tabs.new_page(viewport={"width": 800, "height": 600})
    first.set_content("<p id='left'>left by a test</p>")
    own = tabs.new_context()
    own.new_page().set_content("<p>its own</p>")
    tabs.end_test()
    assert first.url == "about:blank" and own not in browser.browser.contexts
    again = tabs.new_page(viewport={"width": 1000, "height": 700})
    assert again is first and again.viewport_size == {"width": 1000, "height": 700}
    assert again.locator("#left").count() == 0
    again.close()                                       # a tab the test closed is not handed out again
    tabs.end_test()
    other = tabs.new_page()
    assert other is not first and other.viewport_size == Tabs.DEFAULT
    other.context.close()
    assert not browser.new_page().is_closed()


# A page that acts as the app's root does (tests/support.settle reads it): a click starts a "run" after `delay` ms
# that lasts `run` ms (none when `run` is 0); the button `cut` drops its connection.
FAKE_APP = """data:text/html,<div data-testid='stApp' data-test-script-state='notRunning'
  data-test-connection-state='CONNECTED'><button id='go'>go</button><button id='cut'>cut</button></div>
<script>
  const app = document.querySelector('[data-testid=stApp]'), set = (s) => { app.dataset.testScriptState = s; };
  window.plan = {delay: 0, run: 0};
  document.getElementById('go').onclick = () => { if (plan.run) setTimeout(() => { set('running');
    setTimeout(() => set('notRunning'), plan.run); }, plan.delay); };
  document.getElementById('cut').onclick = () => { app.dataset.testConnectionState = 'PINGING_SERVER'; };
</script>"""


def _forward_msg(**fields) -> list[int]:
    """A ForwardMsg as Streamlit sends it, as the bytes the page's websocket would receive."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    msg = ForwardMsg()
    msg.metadata.delta_path.extend([0, 1])
    if "script_finished" in fields:
        msg.script_finished = fields["script_finished"]
    else:
        msg.new_session.page_script_hash = fields["new_session"]
    return list(msg.SerializeToString())


def test_settle_waits_for_the_run_a_click_began_and_no_longer_than_needed(browser):
    """tests/support.settle: a run that begins late is waited for to its end and QUIET_MS past it; a click that
    begins no run costs RUN_STARTS_MS, not the old fixed 400 ms; a run the server ended early for a rerun (its
    status read from Streamlit's own message) holds the page unsettled until the next run begins, however long
    the root says "notRunning" between; a page cut from its server is not settled."""
    import time

    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    page = browser.new_page({"width": 400, "height": 300})     # a kept tab: the watcher is in it
    page.goto(FAKE_APP)
    page.evaluate("() => { plan.delay = 200; plan.run = 600; }")
    started = time.monotonic()
    page.click("#go")
    settle(page)
    waited = time.monotonic() - started
    assert page.get_attribute("[data-testid=stApp]", "data-test-script-state") == "notRunning"
    assert waited >= (200 + 600 + QUIET_MS) / 1000, waited            # the whole run, and quiet after it
    page.evaluate("() => { plan.run = 0; }")
    started = time.monotonic()
    page.click("#go")
    settle(page)
    waited = time.monotonic() - started
    assert RUN_STARTS_MS / 1000 <= waited < 2.0, waited               # a run could have begun: given its time

    early, begins = _forward_msg(script_finished=2), _forward_msg(new_session="next page")
    page.evaluate("""([early, begins]) => { const bytes = (a) => new Uint8Array(a).buffer;
      window.__runs.read(bytes(early)); setTimeout(() => window.__runs.read(bytes(begins)), 900); }""",
                  [early, begins])
    started = time.monotonic()
    settle(page, started=True)
    waited = time.monotonic() - started
    assert waited >= (900 + QUIET_MS) / 1000, waited                  # the run that follows, and quiet after it
    page.evaluate("(done) => window.__runs.read(new Uint8Array(done).buffer)", _forward_msg(script_finished=0))
    started = time.monotonic()
    settle(page, started=True)
    assert time.monotonic() - started < 1.5                            # a run that simply ended holds nothing
    page.click("#cut")
    with pytest.raises(PlaywrightTimeout):
        settle(page, timeout=1_000)


def test_a_layer_or_head_change_costs_the_server_nothing_and_the_next_action_tells_it(server, browser):
    """Issue 53: the explorer's layer and head pickers are the browser's. Changes send the server nothing (no
    websocket frame), the charts, the screen reader's sentence, the CSV button and the link follow at once; the
    student's next action elsewhere (a page in the menu) tells the server first, so the next page has the head."""
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    frames: list[str] = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda payload: frames.append("sent")))
    page.goto(f"{server[0]}/explore?text=A+dog+runs+on+the+beach.")
    wait_drawn(page, EXPLORE_DRAWN)
    settle(page)
    wait_in_page(page, ALL_DRAWN)
    assert page.locator(".st-key-layer, .st-key-head").count() == 0        # no server pickers: the browser's
    before = len(frames)
    for layer, head in ((1, 0), (1, 2), (0, 3), (2, 5)):
        choose(page, "layer", str(layer))
        choose(page, "head", str(head))
        name = f"layer {layer}, head {head}"
        assert name in page.locator(".attention-chart .gtitle").last.text_content()
        assert page.locator(".st-key-single p").last.text_content().startswith(f"Chart “{name}”")
        assert page.get_by_role("button", name=f"Download cross-layer{layer}-head{head}.csv").count() == 1
        linked = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(page.url).query))   # 0: the default, left out
        assert (linked.get("layer", "0"), linked.get("head", "0")) == (str(layer), str(head)), page.url
    page.wait_for_timeout(500)
    assert len(frames) == before, "a layer or head change sent the server something"
    assert page.get_by_role("button", name="Download cross-layer2-head5.csv").count() == 1
    with page.expect_download(timeout=30_000) as download:          # the browser's CSV: the chosen head's numbers
        page.get_by_role("button", name="Download cross-layer2-head5.csv").click()
    rows = list(csv.reader(io.StringIO(Path(download.value.path()).read_text())))
    assert download.value.suggested_filename == "cross-layer2-head5.csv" and rows[0][1].startswith("0:")
    assert all(abs(sum(float(v) for v in row[1:]) - 1) < 1e-3 for row in rows[1:])
    # a press elsewhere at once (no pause): the choice is told first, and the press still does its own work (the
    # sidebar's tables: Streamlit's pickers come back, on the chosen head, as the server draws the tables)
    choose(page, "head", "4")
    page.locator(".st-key-tables label").first.click()
    settle(page)
    wait_drawn(page, ".st-key-head [role='combobox']", timeout=30_000)
    assert len(frames) > before and (shown_value(page, "layer"), shown_value(page, "head")) == ("2", "4")
    page.locator(".st-key-tables label").first.click()
    settle(page)
    choose(page, "head", "5")
    go_to(page, "Inside one head", "head")                            # the next action: told first
    assert (shown_value(page, "layer"), shown_value(page, "head")) == ("2", "5")
    assert "layer=2" in page.url and "head=5" in page.url, page.url
    no_errors(page)

