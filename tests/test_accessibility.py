"""Charts for every reader: each has a one-sentence text alternative (read out by screen readers) and,
on request, its numbers as a table; and no chart tells two things apart by red against green alone
(about one boy in twelve cannot). Checked on every chart of every page, as the app draws them."""
from __future__ import annotations

import colorsys
import json

import numpy as np
import plotly.graph_objects as go
import pytest
from streamlit.testing.v1 import AppTest

from app.pages import PAGES as APP_PAGES
from figures import describe
from tests.support import APP, goto, page_of

PAGES = tuple(p.slug for p in APP_PAGES)        # every page of the app, by its slug
RED_GREEN_SCALES = {"rdylgn", "piyg", "prgn", "picnic", "portland", "jet", "rainbow", "hsv", "spectral"}


def _rgb(color) -> tuple[float, float, float] | None:
    if not isinstance(color, str):
        return None
    c = color.strip().lower()
    if c.startswith("#") and len(c) == 7:
        return tuple(int(c[i:i + 2], 16) / 255 for i in (1, 3, 5))
    if c.startswith("rgb"):
        parts = [float(x) for x in c[c.index("(") + 1:c.index(")")].split(",")[:3]]
        return tuple(p / 255 for p in parts)
    return {"red": (1, 0, 0), "green": (0, 0.5, 0)}.get(c)


def hue_class(color) -> str | None:
    """"red", "green" or None: the two hues that red-green colour blindness confuses."""
    rgb = _rgb(color)
    if rgb is None:
        return None
    h, s, v = colorsys.rgb_to_hsv(*rgb)
    h *= 360
    if s < 0.3 or v < 0.25:
        return None
    return "red" if (h < 15 or h > 345) else "green" if 75 < h < 165 else None


def _each(value, n: int) -> list:
    return list(value) if isinstance(value, list | tuple) else [value] * n


def red_green_alone(spec: dict) -> list[str]:
    """What in a plotly figure (as JSON) is told apart by red against green with nothing else."""
    found = []
    marks: list[tuple[str, tuple]] = []        # (hue, what else sets it apart)
    for t in spec.get("data", []):
        scale = t.get("colorscale")
        if isinstance(scale, str) and scale.lower().rstrip("_r") in RED_GREEN_SCALES:
            found.append(f"{t.get('type')}: colour scale {scale}")
        if isinstance(scale, list) and {hue_class(c) for _, c in scale} >= {"red", "green"}:
            found.append(f"{t.get('type')}: a colour scale from red to green")
        marker, line = t.get("marker") or {}, t.get("line") or {}
        n = max(len(t.get("x") or []) if isinstance(t.get("x"), list) else 1, 1)
        colours = _each(marker.get("color", line.get("color")), n)
        symbols = _each(marker.get("symbol"), n)
        patterns = _each((marker.get("pattern") or {}).get("shape", marker.get("pattern_shape")), n)
        for i, colour in enumerate(colours):
            hue = hue_class(colour)
            if hue:
                marks.append((hue, (symbols[i % len(symbols)], patterns[i % len(patterns)], line.get("dash"))))
    reds = {other for hue, other in marks if hue == "red"}
    greens = {other for hue, other in marks if hue == "green"}
    found += [f"red and green marks alike in every other way: {o}" for o in reds & greens]
    return found


def test_the_red_green_check_finds_colour_alone_and_passes_colour_with_pattern():
    alone = go.Figure([go.Bar(x=[0, 1], y=[1, 2], marker_color=["#d62728", "#2ca02c"])])
    told = go.Figure([go.Bar(x=[0, 1], y=[1, 2], marker=dict(color=["#d62728", "#2ca02c"],
                                                             pattern=dict(shape=["/", ""])))])
    scale = go.Figure(go.Heatmap(z=[[0, 1]], colorscale="RdYlGn"))
    assert red_green_alone(json.loads(alone.to_json()))
    assert not red_green_alone(json.loads(told.to_json()))
    assert red_green_alone(json.loads(scale.to_json()))


def test_a_figure_in_words():
    import figures
    fig = figures.attention_heatmap(np.array([[0.1, 0.9], [0.7, 0.3]]), ["a", "b"], ["x", "y"], title="layer 0")
    assert describe.summary(fig) == ("Chart “layer 0”: a heatmap of 2 rows × 2 columns, largest value 0.9 at row a, "
                                     "column y.")
    columns, rows = describe.table(fig)
    assert columns == ["", "0: x", "1: y"] and rows == [["0: a", 0.1, 0.9], ["1: b", 0.7, 0.3]]
    bars = figures.top_k_bar(["▁Ein", "▁Der"], [0.8, 0.1], title="next token")
    assert describe.summary(bars) == "Chart “next token”: 1 series of 2 values; the largest, 0.8, at ▁Ein."
    assert describe.table(bars) == (["", "value"], [["0: ▁Ein", 0.8], ["1: ▁Der", 0.1]])


def test_every_heads_sentence_at_once_is_the_one_said_head_by_head():
    """The explorer's 32-48 heads' sentences, found together, say what each head's own sentence says: the first
    largest value (ties), unlabelled positions, markup in labels and titles, no finite value, nan and inf."""
    rng = np.random.default_rng(0)
    for trial in range(120):
        k, t, s = (int(n) for n in rng.integers(1, 9, size=3))
        z = rng.random((k, t, s)).astype(np.float32)
        z[rng.random(z.shape) < (0.3 if trial % 3 == 0 else 0.0)] = np.nan
        z[rng.random(z.shape) < (0.2 if trial % 5 == 0 else 0.0)] = np.inf
        if trial % 7 == 0:
            z[0] = np.nan
        if trial % 4 == 0:
            z[:, -1, -1] = z[:, 0, 0] = 2.0
        rows = [f"<b>▁r{i}</b> &amp;" for i in range(t)] if trial % 2 else None
        cols = [f"c{i}" for i in range(s)] if trial % 3 else None
        titles = [f"layer {i} <i>head</i>" if i % 2 else "" for i in range(k)]
        assert describe.heads_sentences(titles, z, rows, cols) == [
            describe.heatmaps_sentence(title, z[i], 1, rows, cols) for i, title in enumerate(titles)], trial
    empty = np.zeros((1, 0, 3))
    assert describe.heads_sentences(["a"], empty) == [describe.heatmaps_sentence("a", empty[0], 1)]


@pytest.fixture(scope="module")
def walked(app_checkpoints):
    """Every page's charts and the app's hidden chart descriptions, with each chart's table asked for."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
        at = AppTest.from_file(APP, default_timeout=90)
        at.run()
        at.toggle(key="tables").set_value(True).run()
        pages = {}
        for slug in PAGES:
            goto(at, slug)
            assert not at.exception and page_of(at) == slug, (slug, at.exception)
            specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
            hidden = [m.value for m in at.markdown if m.value.startswith('<p style="position:absolute')]
            pages[slug] = (specs, hidden, len(at.dataframe))
        return pages


def test_no_chart_tells_things_apart_by_red_and_green_alone(walked):
    found = {slug: problems for slug, (specs, _, _) in walked.items()
             if (problems := [p for s in specs for p in red_green_alone(s)])}
    assert not found, found


def test_every_chart_is_described_in_words_and_can_show_its_numbers(walked):
    for slug, (specs, hidden, tables) in walked.items():
        assert len(hidden) >= len(specs), (slug, len(hidden), len(specs))
        assert all("Chart “" in h for h in hidden), slug
        if any(t["type"] in ("heatmap", "bar", "scatter") for s in specs for t in s["data"]):
            assert tables >= 1, slug
