"""The explorer's two big charts, drawn in the browser: the grid of every layer × head and the one-head chart.

The server sends one kind's attention as compact numbers (figures/browser.py), once per browser (later runs send
their name: `_to_send`), and builds no plotly figure; a small
Streamlit component (components v2: JavaScript in the page, no iframe) builds both figures with plotly.js
(figures/attention_charts.mjs) and redraws only what changed when a picker changes. The one-head chart's menu
shows another head at once, in the browser, and tells the server (`pick`), which makes it the chosen layer and head
as if the pickers had changed, so the link and a following class get it.

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
from app.settings import SidebarChoices
from app.ui import described
from figures import describe
from figures.browser import attention_charts, numbers_ref

SCRIPT = Path(figures.__file__).with_name("attention_charts.mjs")       # package data of figures/

KEPT_ON_SERVER = 6         # names of numbers the browser holds, by this session's count: fewer than it keeps (8)
SINGLE = "single"          # the one-head chart's key: its element, and where Streamlit keeps its `pick`
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
) -> None:
    """The grid in where[0], the one-head chart in where[1], each with its sentence for screen readers (and its
    numbers as a table when the sidebar asks). attn (L, H, Tq, Tk); words: "title" of the grid, "row_title" and
    "col_title" of the one-head chart. on_pick(layer, head) when the chart's menu shows another head."""
    layer, head = layer_head
    data = attention_charts(attn, rows, cols, layer, head, words["title"], words["row_title"], words["col_title"],
                            settings.display, highlight_row)
    data.update(plotly=plotly_module(), image_format=settings.image_format)
    numbers, named = _to_send(data.pop("numbers"))
    n_heads = attn.shape[1]

    def picked() -> None:
        index = getattr(state.widget(SINGLE), "pick", None)
        if isinstance(index, int) and 0 <= index < attn.shape[0] * n_heads:
            on_pick(*divmod(index, n_heads))

    grid, single = where
    with grid:     # data in a list: Streamlit looks through a dict's values for data frames, every run
        _component(key="grid", data=[{**data, "chart": "grid", "numbers": numbers}], on_missing_change=_resend)
    _sent(named["ref"])                 # once on its way (a run stopped before it leaves them unsent)
    _described(grid, describe.heatmaps_sentence(words["title"], attn[0, 0], attn.shape[0] * n_heads),
               attn[0, 0], None, None, settings)
    with single:
        _component(key=SINGLE, data=[{**data, "chart": SINGLE, "numbers": named}], on_pick_change=picked,
                   on_missing_change=_resend)
    shown, labels = data["names"][layer * n_heads + head], (data["rows"], data["cols"])   # as the axes write them
    _described(single, describe.heatmaps_sentence(shown, attn[layer, head], 1, *labels), attn[layer, head], *labels,
               settings)


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
