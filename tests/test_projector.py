"""The front of a room (issue 44): in projector mode, at a projector's 1280x720 and 1024x768, every page
that shows a chart shows it first: its top edge in the upper half of the window, at least 60 % of it
visible without scrolling, no horizontal scroll, no button, tab or label cut, the sidebar collapsed.
axe-core finds nothing serious or critical in that layout. Screenshots of every page at both sizes go to
test-artifacts/projector/."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import ARTIFACTS, CHROMIUM, axe, go_to, no_errors, settle, wait_drawn, wait_in_page

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not installed "
                                 "(apt-get install -y chromium)")]

SIZES = ((1280, 720), (1024, 768))
NO_CHART = {"lab"}          # the training lab draws its charts once a model trains
# Where the first chart is, how much of it the window shows, and which names do not fit their box (a
# button's, a tab's or a widget label's text wider than the box that clips it).
MEASURE = """() => {
  const vh = window.innerHeight, vw = window.innerWidth;
  const charts = [...document.querySelectorAll('.js-plotly-plot')].filter(e => e.getBoundingClientRect().height > 30);
  let chart = null;
  if (charts.length) {
    const r = charts[0].getBoundingClientRect();
    chart = {top: r.top, visible: Math.max(0, Math.min(r.bottom, vh) - Math.max(r.top, 0)) / r.height};
    // what stands above it, for a failure's message: each drawn element's test id, top, height and words
    chart.above = [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stElementContainer"]')]
      .map(e => [e, e.getBoundingClientRect()]).filter(([e, b]) => b.height > 0 && b.bottom <= r.top + 1)
      .map(([e, b]) => `${(e.firstElementChild || e).getAttribute('data-testid')}@${Math.round(b.top)}+` +
           `${Math.round(b.height)}:${(e.innerText || '').trim().slice(0, 30)}`);
  }
  const cut = [];
  const names = "button, [role='tab'], [data-testid='stWidgetLabel'], [data-testid='stWidgetLabel'] *, " +
                "button *, [role='tab'] *";
  for (const el of document.querySelectorAll(names)) {
    const r = el.getBoundingClientRect();
    if (r.width < 5 || r.bottom < 0 || r.top > vh || !(el.innerText || '').trim()) continue;
    if (el.closest('[data-testid="stSidebar"]')) continue;
    const cs = getComputedStyle(el);
    const clips = cs.textOverflow === 'ellipsis' || ['hidden', 'clip'].includes(cs.overflowX);
    if (clips && el.scrollWidth > el.clientWidth + 1) cut.push(el.innerText.trim().slice(0, 40));
  }
  const sidebar = document.querySelector('[data-testid="stSidebar"]');
  const open = sidebar !== null && sidebar.getBoundingClientRect().right > 5;
  return {chart, cut, hscroll: document.documentElement.scrollWidth > vw + 1, sidebarOpen: open};
}"""


# Where every chart and the page's width are: unchanged over two looks 150 ms apart, the layout is done.
BOXES = """() => JSON.stringify([document.documentElement.scrollWidth,
  ...[...document.querySelectorAll('.js-plotly-plot .main-svg')].map(e => { const r = e.getBoundingClientRect();
     return [r.x, r.y, r.width, r.height]; })])"""


def laid_out(page, most_ms: int = 3000) -> None:
    """Wait until the page's layout (its charts' boxes, its width) stops changing, at most `most_ms`."""
    page.wait_for_timeout(150)
    last = page.evaluate(BOXES)
    for _ in range(most_ms // 150):
        page.wait_for_timeout(150)
        now = page.evaluate(BOXES)
        if now == last:
            return
        last = now


def _measure(page, slug: str, size: tuple[int, int]) -> list[str]:
    """What is wrong with the page as the window of `size` shows it (nothing: [])."""
    width, height = size
    m = page.evaluate(MEASURE)
    page.screenshot(path=str(ARTIFACTS / "projector" / f"{slug}-{width}x{height}.png"))
    wrong = []
    if slug not in NO_CHART:
        chart = m["chart"]
        if chart is None:
            wrong.append("no chart")
        elif chart["top"] > height / 2 or chart["visible"] < 0.6:
            wrong.append(f"chart at {chart['top']:.0f} px, {chart['visible']:.0%} visible; above it: {chart['above']}")
    if m["hscroll"]:
        wrong.append("horizontal scroll")
    if m["cut"]:
        wrong.append(f"cut: {m['cut']}")
    if m["sidebarOpen"]:
        wrong.append("sidebar open")
    return [f"{width}x{height}: {w}" for w in wrong]


def test_projector_mode_shows_every_pages_picture_first(shipped_server, browser):
    """Each page drawn once, looked at in both windows (the second by resizing the first). The first page comes
    from its link, the others from the menu with the sidebar closed, as a teacher moves (the link's settings
    kept), each looked at from the top of the page, where a page opened from its link starts."""
    from app.pages import PAGES
    (ARTIFACTS / "projector").mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport=dict(zip(("width", "height"), SIZES[0], strict=True)))
    problems, violations, counts = {}, {}, {}
    # the first page lives at "/", where an old-style link with settings opens the explorer: name it
    page.goto(f"{shipped_server}/?view={PAGES[0].slug}&projector=1")
    for p in PAGES:
        page.set_viewport_size(dict(zip(("width", "height"), SIZES[0], strict=True)))
        if p is not PAGES[0]:
            go_to(page, p.title, p.slug, collapsed=True)
            page.evaluate("() => window.scrollTo(0, 0)")
        assert "projector=1" in page.url, page.url
        wait_drawn(page, f".st-key-page-{p.slug}")      # else: what the page shows instead
        if p.slug not in NO_CHART:
            page.wait_for_selector(".js-plotly-plot .main-svg", state="attached", timeout=90_000)
        settle(page)
        laid_out(page)                      # the charts' own layout pass
        no_errors(page)
        wrong = _measure(page, p.slug, SIZES[0])
        axe(page, p.slug, counts, violations)         # on the compact layout (with axe-core installed)
        for size in SIZES[1:]:
            page.set_viewport_size(dict(zip(("width", "height"), size, strict=True)))
            laid_out(page)                  # the page and its charts laid out again
            wrong += _measure(page, p.slug, size)
        if wrong:
            problems[p.slug] = wrong
    page.close()
    assert not problems, problems
    assert not violations, violations


PRESENTED = """(key) => {
  const el = document.querySelector('.st-key-' + key), r = el.getBoundingClientRect();
  const seen = (e) => getComputedStyle(e).visibility === 'visible' && e.getBoundingClientRect().height > 0;
  const others = [...document.querySelectorAll('.js-plotly-plot')].filter(e => !el.contains(e) && seen(e));
  const sidebar = document.querySelector('[data-testid="stSidebar"]');
  return {top: r.top, left: r.left, width: r.width, fixed: getComputedStyle(el).position === 'fixed',
          others: others.length, sidebar: sidebar !== null && seen(sidebar)};
}"""


def test_the_presentation_view_from_a_link_steps_with_the_arrow_keys_and_esc_returns(shipped_server, browser):
    """?present=1 shows the page's main chart alone on the whole window; ← and → step the decoding
    beneath it (the link's step follows), Esc returns to the whole page."""
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(f"{shipped_server}/step?present=1&projector=1")
    page.wait_for_selector(".st-key-tree .js-plotly-plot .main-svg", state="attached", timeout=90_000)
    settle(page)
    shown = page.evaluate(PRESENTED, "tree")
    page.screenshot(path=str(ARTIFACTS / "projector" / "present-step.png"))
    assert shown["fixed"] and shown["top"] <= 1 and shown["left"] <= 1 and shown["width"] >= 1270, shown
    assert shown["others"] == 0 and not shown["sidebar"], shown
    violations: dict = {}
    axe(page, "presentation view", {}, violations)
    assert not violations, violations
    for _ in range(2):
        page.keyboard.press("ArrowRight")
        settle(page)
    wait_in_page(page, "() => location.search.includes('step=2')", timeout=30_000)
    page.keyboard.press("Escape")
    settle(page)
    page.wait_for_selector(".st-key-present_close", state="detached", timeout=30_000)
    assert not page.evaluate(PRESENTED, "tree")["fixed"]
    assert "present" not in page.url and "step=2" in page.url
    no_errors(page)
    page.close()


LONG = "The animal didn't cross the street because it was too tired, and the driver waited patiently."
SLIM_LINE = """() => {
  const button = document.querySelector('.st-key-edit_sentence button');
  const r = button.getBoundingClientRect();
  const clipped = [button, ...button.querySelectorAll('*')].filter(e => {
    const cs = getComputedStyle(e);
    return (cs.textOverflow === 'ellipsis' || ['hidden', 'clip'].includes(cs.overflowX)) &&
           e.scrollWidth > e.clientWidth + 1;
  }).length;
  const label = button.querySelector('[data-testid="stMarkdownContainer"]') || button;
  return {text: label.innerText.replace(/\\s+/g, ' ').trim(), lines: Math.round(r.height), clipped,
          right: r.right, width: window.innerWidth};
}"""


def test_projector_mode_shows_the_whole_sentence_on_its_slim_line(shipped_server, browser):
    """A sentence longer than the slim line is wrapped onto a second line, never cut, at both sizes; the
    page's picture still starts in the upper half."""
    from urllib.parse import quote_plus
    page = browser.new_page(viewport={"width": 1024, "height": 768})
    page.goto(f"{shipped_server}/?view=explore&projector=1&text={quote_plus(LONG)}")
    page.wait_for_selector(".st-key-edit_sentence button", timeout=90_000)
    page.wait_for_selector(".js-plotly-plot .main-svg", state="attached", timeout=90_000)
    settle(page)
    laid_out(page)
    for size in SIZES[::-1]:
        page.set_viewport_size(dict(zip(("width", "height"), size, strict=True)))
        laid_out(page)
        line = page.evaluate(SLIM_LINE)
        page.screenshot(path=str(ARTIFACTS / "projector" / f"slim-line-{size[0]}x{size[1]}.png"))
        assert line["text"] == LONG and line["clipped"] == 0, (size, line)
        assert line["right"] <= line["width"], (size, line)
        assert not [w for w in _measure(page, "explore-long", size) if "chart" in w or "scroll" in w]
    page.close()
