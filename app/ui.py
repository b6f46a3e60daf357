"""Small Streamlit helpers shared by the pages."""

from __future__ import annotations

import functools
import html
import re
import weakref
from collections.abc import Callable
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from app.settings import SidebarChoices, chosen_language
from figures import describe
from i18n import _, language, use
from model.analysis.readings import matrix_csv
from model.network.trace import Trace

# WCAG AA for every text: Streamlit draws captions in a faded grey (#828180 on white: 3.9:1, where
# axe-core's colour-contrast rule wants 4.5:1); this grey, unfaded, gives 6.5:1 on white and 5.8:1 on
# the sidebar's background.
# A table's toolbar buttons (show/hide columns, download, search, full screen) show no focus of their own:
# a keyboard user gets the same ring as everywhere else (tests/test_keyboard.py).
STYLE = ("<style>[data-testid='stCaptionContainer'], [data-testid='stCaptionContainer'] p "
         "{color: #5f5e5b !important; opacity: 1 !important} "
         "[data-testid='stElementToolbar']:focus-within {opacity: 1 !important} "
         "[data-testid='stElementToolbar'] button:focus-visible {outline: 2px solid #1c5fb8 !important; "
         "outline-offset: 1px}"
         "</style>")


MARKDOWN = re.compile(r"[\\`*_{}\[\]()#+\-.!|~<>$:]")   # what Streamlit's Markdown reads


def plain(text: str) -> str:
    """A student's text shown as itself where Streamlit reads Markdown (a label, a message)."""
    return MARKDOWN.sub(r"\\\g<0>", text)


def page_style() -> None:
    """What every page's look needs beyond Streamlit's theme (a <style> only: it takes no space)."""
    st.html(STYLE)


# The front of a room (projector mode): less empty space above and between the blocks, so that a
# page's picture starts in the upper half of a 1280x720 or 1024x768 window.
COMPACT_STYLE = ("<style>[data-testid='stMainBlockContainer'] {padding-top: 3rem !important; "
                 "padding-bottom: 2rem !important} "
                 "[data-testid='stMainBlockContainer'] [data-testid='stVerticalBlock'] {gap: 0.6rem} "
                 ".st-key-header p {margin-bottom: 0} "
                 # the sentence on the slim line, whole: wrapped onto a second line rather than cut
                 ".st-key-edit_sentence button {height: auto; min-height: 2.5rem; text-align: left} "
                 ".st-key-edit_sentence button, .st-key-edit_sentence button * {white-space: normal !important; "
                 "text-overflow: clip !important; overflow: visible !important; overflow-wrap: anywhere}</style>")


def compact_style() -> None:
    st.html(COMPACT_STYLE)


def why_box(where: DeltaGenerator, key: str) -> DeltaGenerator:
    """The "Why?" button of compact mode; what is written into it shows when it is pressed."""
    return where.popover(_("Why?"), icon=":material/help:", type="tertiary", key=f"why_{key}")


def why(where: DeltaGenerator, text: str, compact: bool, key: str, formula: str | None = None,
        more: str | None = None) -> None:
    """A page's explanatory paragraph (with its formula and a further note): captions, or in compact mode
    folded behind a "Why?" button whose popover holds the same, so that the picture comes first."""
    if compact:
        where = why_box(where, key)
    (where.markdown if compact else where.caption)(text)
    if formula:
        where.latex(formula)
    if more:
        (where.markdown if compact else where.caption)(more)


def chart(where: DeltaGenerator, fig: go.Figure, key: str, settings: SidebarChoices) -> None:
    """Show a figure; its camera icon downloads it as PNG or SVG (the sidebar's choice). Described
    in words too (`described`)."""
    where.plotly_chart(
        fig,
        width="stretch",
        key=key,
        config={
            "displaylogo": False,
            "toImageButtonOptions": {"format": settings.image_format, "filename": key, "scale": 2},
        },
    )
    described(where, fig, settings)


# Seen by no one, read out by screen readers (the usual visually-hidden pattern).
HIDDEN = ("position:absolute;width:1px;height:1px;padding:0;margin:-1px;overflow:hidden;clip:rect(0,0,0,0);"
          "white-space:nowrap;border:0")


_SAID: dict[int, dict[str, str]] = {}     # id of a figure alive -> {language: its sentence}


def _sentence(fig: go.Figure) -> str:
    """describe.summary once per figure and language: most figures are cached and shared, and a
    rerun's few charts would otherwise pay 0.2-0.3 ms each every time (the entry goes with the figure)."""
    said = _SAID.get(id(fig))
    if said is None:
        said = _SAID[id(fig)] = {}
        weakref.finalize(fig, _SAID.pop, id(fig), None)
    lang = language()
    if lang not in said:
        said[lang] = describe.summary(fig)
    return said[lang]


def described(where: DeltaGenerator, fig: go.Figure | None, settings: SidebarChoices | None,
              said: tuple[str, Callable[[], describe.Table]] | None = None) -> None:
    """A chart's text alternative: one sentence for screen readers (figures/describe.py), and its
    numbers as a table when the sidebar asks for them. A chart the browser draws (no plotly figure
    here) gives its sentence and what makes its table as `said`."""
    sentence = said[0] if said is not None else _sentence(fig)
    where.markdown(f'<p style="{HIDDEN}">{html.escape(sentence)}</p>', unsafe_allow_html=True)
    if settings is None or not settings.tables:
        return
    numbers = said[1]() if said is not None else describe.table(fig)
    if numbers is not None:
        columns, rows = numbers
        where.dataframe(pd.DataFrame(rows, columns=[c or " " for c in columns]), hide_index=True)


def lazy_expander(where: DeltaGenerator, label: str, key: str) -> tuple[DeltaGenerator, bool]:
    """An expander whose content is drawn only while it is open: opening it reruns the page (a light run),
    so that a closed one costs no student a chart they did not ask for (each chart costs a page its
    building and sending: BENCHMARKS.md, session 23). Returns the expander and whether it is open."""
    box = where.expander(label, key=key, on_change="rerun")
    return box, bool(box.open)


def csv_button(where: DeltaGenerator, matrix: Any, rows: list[str], cols: list[str], name: str) -> None:
    """A download button for the matrix a figure shows; its CSV is written when it is clicked (a page run that
    wrote it every time spent ~1.5 % of a class's first pages on files hardly anyone downloads)."""
    where.download_button(_("Download {name}.csv").format(name=name), data=lambda: matrix_csv(matrix, rows, cols),
                          file_name=f"{name}.csv",
                          mime="text/csv", key=f"csv_{name}", on_click="ignore")


def fragment(func: Callable | None = None, *, run_every: float | None = None) -> Callable:
    """`st.fragment` whose every run speaks the session's language: a fragment's run does not
    pass through main(), which sets it otherwise (i18n/)."""
    def wrap(f: Callable) -> Callable:
        @functools.wraps(f)
        def in_language(*args: Any, **kw: Any) -> Any:
            use(chosen_language())
            return f(*args, **kw)
        return st.fragment(in_language, run_every=run_every)
    return wrap(func) if func is not None else wrap


def tokens_for(trace: Trace, side: str, index: int = 0) -> list[str]:
    """The tokens along one side ("source" or "target") of a trace's batch entry."""
    return trace.tokens(side, index)
