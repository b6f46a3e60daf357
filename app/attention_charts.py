"""The explorer's two big charts, drawn in the browser: the grid of every layer × head and the one-head chart.

The server sends one kind's attention as compact numbers (figures/browser.py), once per browser (later runs send
their name: `_to_send`), and builds no plotly figure; a small
Streamlit component (components v2: JavaScript in the page, no iframe) builds both figures with plotly.js
(figures/attention_charts.mjs) and redraws only what changed when a picker changes. The one-head chart's menu
shows another head at once, in the browser, and tells the server (`pick`), which makes it the chosen layer and head
as if the pickers had changed, so the link and a following class get it.

Where a browser draws the page for one student (`browser_chooses`), the layer and head pickers are the
component's too (`pickers`): a choice is drawn at once and written into the address bar, and the server hears of
it (`pick`) only with the student's next action elsewhere on the page, sent before that action on the same
socket. Clicking through heads then costs the server nothing: five such changes were ~40 % of a class's
first-page CPU (issue 53; BENCHMARKS.md, session 50). The one-head chart's sentence for screen readers and its
CSV (from the numbers the browser holds: 16-bit, within 7.7e-6) follow the choice in the browser too.

plotly.js is Streamlit's own copy: the module Streamlit loads for st.plotly_chart sets `window.Plotly`; the
component loads that module (its file name is found here) when no chart on the page has loaded it yet.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import numpy as np
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

import figures
from app import state
from app.settings import HEAD, LAYER, SidebarChoices
from app.ui import described
from figures import describe
from figures.browser import attention_charts, numbers_ref
from i18n import _

SCRIPT = Path(figures.__file__).with_name("attention_charts.mjs")       # package data of figures/

KEPT_ON_SERVER = 6         # names of numbers the browser holds, by this session's count: fewer than it keeps (8)
SINGLE = "single"          # the one-head chart's key: its element, and where Streamlit keeps its `pick`
PICKERS = "pickers"        # the browser's layer and head pickers (`pickers`): the same
_component = st.components.v2.component("transformer_explained.attention_charts", js=SCRIPT.read_text(),
                                         isolate_styles=False)    # plotly's own styles live in the document


@functools.cache
def plotly_module() -> str | None:
    """The file name of Streamlit's plotly.js module (beside its index script), or None if this Streamlit has
    none by that name (then the charts wait for a plotly chart elsewhere on the page to load it)."""
    found = sorted((Path(st.__file__).parent / "static" / "static" / "js").glob("PlotlyChart.*.js"))
    return found[0].name if len(found) == 1 else None


def draw(
    where: tuple[DeltaGenerator, DeltaGenerator],
    attn: np.ndarray,
    rows: list[str],
    cols: list[str],
    layer_head: tuple[int, int],
    words: dict[str, str],
    settings: SidebarChoices,
    highlight_row: int | None,
    on_pick: Callable[[int, int], None],
    csv: dict | None = None,
) -> None:
    """The grid in where[0], the one-head chart in where[1], each with its sentence for screen readers (and its
    numbers as a table when the sidebar asks). attn (L, H, Tq, Tk); words: "title" of the grid, "row_title" and
    "col_title" of the one-head chart. on_pick(layer, head) when the chart's menu shows another head. With `csv`
    ({"label": the button's words with {name}, "names": each head's file name, "rows", "cols": the tokens}) the
    browser chooses (`pickers`): the chart's sentence and CSV button follow its choice there."""
    layer, head = layer_head
    data = attention_charts(attn, rows, cols, layer, head, words["title"], words["row_title"], words["col_title"],
                            settings.display, highlight_row)
    data.update(plotly=plotly_module(), image_format=settings.image_format, **_choosing(csv is not None))
    numbers, named = _to_send(data.pop("numbers"))
    n_heads = attn.shape[1]
    picked = _on_pick(SINGLE, attn.shape[0], n_heads, on_pick)
    grid, single = where
    with grid:     # data in a list: Streamlit looks through a dict's values for data frames, every run
        _component(key="grid", data=[{**data, "chart": "grid", "numbers": numbers}], on_missing_change=_resend)
    _sent(named["ref"])                 # once on its way (a run stopped before it leaves them unsent)
    _described(grid, describe.heatmaps_sentence(words["title"], attn[0, 0], attn.shape[0] * n_heads),
               attn[0, 0], None, None, settings)
    labels = (data["rows"], data["cols"])                  # as the axes write them
    extra = {} if csv is None else {"csv": csv, "said": describe.heads_sentences(
        data["names"], attn.reshape(-1, *attn.shape[2:]), *labels)}
    with single:
        _component(key=SINGLE, data=[{**data, **extra, "chart": SINGLE, "numbers": named}], on_pick_change=picked,
                   on_missing_change=_resend)
    if csv is None:                     # else the browser says the chosen head's sentence
        shown = data["names"][layer * n_heads + head]
        _described(single, describe.heatmaps_sentence(shown, attn[layer, head], 1, *labels), attn[layer, head],
                   *labels, settings)


def pickers(where: DeltaGenerator, layer_head: tuple[int, int], n_layers: int, n_heads: int,
            on_pick: Callable[[int, int], None]) -> None:
    """The layer and head pickers, drawn by the browser (where `browser_chooses`): a choice is the browser's until
    the student's next action elsewhere on the page, which tells the server first (`pick`)."""
    layer, head = layer_head
    with where:
        _component(key=PICKERS, data=[{"chart": PICKERS, "layer": layer, "head": head, "n_layers": n_layers,
                                       "n_heads": n_heads, "labels": {"layer": _("Layer"), "head": _("Head")},
                                       **_choosing(True)}],
                   on_pick_change=_on_pick(PICKERS, n_layers, n_heads, on_pick))


def browser_chooses(settings: SidebarChoices, others_follow: bool, compared: bool) -> bool:
    """Whether the browser chooses the layer and head (`pickers`): a browser draws the page (AppTest and other
    clients that run no script have Streamlit's pickers), no class follows this student and this student follows
    no teacher (`others_follow`: a teacher's class, and a follower's own change, which makes them leave the
    teacher's view, are told at once; a student of a class exploring on their own chooses in the browser), the
    numbers are not shown as tables (the server writes them), the projector is off (its compact row keeps
    Streamlit's pickers) and "change a word", which compares the chosen layer, is closed (`compared`)."""
    return (st.context.url is not None and not others_follow and not compared and not settings.tables
            and not settings.projector)


def _choosing(local: bool) -> dict:
    """What the browser needs to choose by itself: the link's names of layer and head and their defaults."""
    return {"local": local, "params": {"layer": LAYER.param, "head": HEAD.param},
            "defaults": {"layer": LAYER.default, "head": HEAD.default}}


def _on_pick(key: str, n_layers: int, n_heads: int, on_pick: Callable[[int, int], None]) -> Callable[[], None]:
    def picked() -> None:
        index = getattr(state.widget(key), "pick", None)
        if isinstance(index, int) and 0 <= index < n_layers * n_heads:
            on_pick(*divmod(index, n_heads))
    return picked


def _to_send(numbers: dict) -> tuple[dict, dict]:
    """What the grid and the one-head chart are sent of packed numbers: the grid the numbers with their name the
    first time this session's browser gets them (`_sent`), else (and the one-head chart always) only their name
    and shape; the browser keeps the last 8 by name (KEPT in figures/attention_charts.mjs). A layer or head change
    then sends no numbers (they were 2 x ~50 KB through JSON, hashing and the socket on every run). A browser
    that lacks a name it is sent (a page drawn anew, a run it never drew) says so (`missing`): the next run
    sends the numbers again."""
    ref = numbers_ref(numbers)
    named = {"ref": ref, "shape": numbers["shape"]}
    return (named if ref in (state.held(state.CHARTS_SENT) or []) else {**numbers, "ref": ref}), named


def _sent(ref: str) -> None:
    """The browser has the numbers named `ref` (the most recently used last)."""
    sent = state.held(state.CHARTS_SENT) or []
    state.hold(state.CHARTS_SENT, [*(r for r in sent if r != ref), ref][-KEPT_ON_SERVER:])


def _resend() -> None:
    """The browser lacks numbers it was sent by name: send them all again."""
    state.hold(state.CHARTS_SENT, [])


def _described(where: DeltaGenerator, sentence: str, z: np.ndarray, rows: list[str] | None, cols: list[str] | None,
               settings: SidebarChoices) -> None:
    """As app.ui.described says a plotly chart: the sentence, hidden but read out; the numbers when asked."""
    described(where, None, settings, (sentence, lambda: describe.matrix_table(z, rows, cols)))
