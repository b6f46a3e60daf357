"""The explorer's two big charts, drawn in the browser: the grid of every layer × head and the one-head chart.

The server sends one kind's attention as compact numbers (figures/browser.py) and builds no plotly figure; a small
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
from figures.browser import attention_charts

SCRIPT = Path(figures.__file__).with_name("attention_charts.mjs")       # package data of figures/

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
    n_heads = attn.shape[1]

    def picked() -> None:
        index = getattr(state.widget(SINGLE), "pick", None)
        if isinstance(index, int) and 0 <= index < attn.shape[0] * n_heads:
            on_pick(*divmod(index, n_heads))

    grid, single = where
    with grid:
        _component(key="grid", data={**data, "chart": "grid"})
    _described(grid, describe.heatmaps_sentence(words["title"], attn[0, 0], attn.shape[0] * n_heads),
               attn[0, 0], None, None, settings)
    with single:
        _component(key=SINGLE, data={**data, "chart": SINGLE}, on_pick_change=picked)
    shown, labels = data["names"][layer * n_heads + head], (data["rows"], data["cols"])   # as the axes write them
    _described(single, describe.heatmaps_sentence(shown, attn[layer, head], 1, *labels), attn[layer, head], *labels,
               settings)


def _described(where: DeltaGenerator, sentence: str, z: np.ndarray, rows: list[str] | None, cols: list[str] | None,
               settings: SidebarChoices) -> None:
    """As app.ui.described says a plotly chart: the sentence, hidden but read out; the numbers when asked."""
    described(where, None, settings, (sentence, lambda: describe.matrix_table(z, rows, cols)))
