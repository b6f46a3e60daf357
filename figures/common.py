"""What every figure shares: token labels and axes, margins, colours, and the display.

Conventions: axes that carry tokens use integer positions with the tokens as tick text
(repeated tokens stay separate ticks) and tokens are HTML-escaped.

The display (font size, colour scale; projector mode chooses both) is applied in one place,
`Display.apply`, after a builder returns: builders draw at the base font size, and mark
what the display's sequential colour scale colours (`meta=SEQUENTIAL` on a trace, or on
the layout for a shared colour axis).
"""
from __future__ import annotations

import functools
import html
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.colors
import plotly.graph_objects as go
import plotly.io

from i18n import _, marks

COLORSCALE = "Blues"
CONTRAST_COLORSCALE = "Viridis"
DIVERGING = "RdBu"
MARGIN = dict(l=10, r=10, t=50, b=10)  # every figure: room for its title, tight elsewhere
# Okabe & Ito's palette: told apart with any of the common colour-vision deficiencies (and, where they
# mark something, never by colour alone: a symbol, a pattern or a word goes with them).
STATUS_COLORS = {"kept": "#0072B2", "finished": "#009E73", "pruned": "#999999", "live": "#0072B2", "chosen": "#D55E00"}
SEQUENTIAL = "sequential"   # marks what the display's sequential colour scale colours
FOLLOWS_FONT = "follows-font"   # an annotation's name: its size moves with the display's font size
BASE_FONT = 12


VALIDATE = "TRANSFORMER_VALIDATE_FIGURES"     # set (not "0"): figures from plain dicts validated too (the tests)


def from_spec(data: list[dict], layout: dict) -> go.Figure:
    """A figure from plain dicts, as plotly.js reads them, without plotly.py's property validation: the
    costliest part of building a big figure (every head of a sentence: ~5x, BENCHMARKS.md session 23), and
    the builders' dicts are fixed by their code. With TRANSFORMER_VALIDATE_FIGURES set (tests/conftest.py
    sets it for the whole suite) every property is validated, so a wrong one still fails a test."""
    return go.Figure(dict(data=data, layout=layout), _validate=validating())


def validating() -> bool:
    """Whether figures are checked as they are made and used (TRANSFORMER_VALIDATE_FIGURES set, not "0")."""
    return os.environ.get(VALIDATE, "0") not in ("", "0")


class SharedFigure(go.Figure):
    """A figure built once and shown to many sessions (app/resources.get_figure), never changed once shared:
    the dict st.plotly_chart sends (plotly's deep copy of every property and its base64 pass over the arrays,
    about half of what st.plotly_chart spends on a big figure) is made once, not on every rerun of every
    session. With TRANSFORMER_VALIDATE_FIGURES set (the tests) each use checks that the figure was not changed
    after all."""

    def to_dict(self) -> dict:
        made = self.__dict__.get("_shared_dict")
        if made is None:
            made = self._shared_dict = super().to_dict()
        elif validating():
            # validate=False: validating a dict builds a Figure from it, and plotly pops each trace's "type" out of
            # the dict and back in as it does; this dict is shared, and a session reading it at that moment drew a
            # heatmap as a scatter ("Invalid property specified for object of type Scatter", session 37)
            now = plotly.io.to_json(super().to_dict(), validate=False)
            assert plotly.io.to_json(made, validate=False) == now, "a shared figure was changed"
        return made


def shared(fig: go.Figure) -> SharedFigure:
    """`fig`, from now on shared and never changed (its dict made once): see SharedFigure."""
    fig.__class__ = SharedFigure
    return fig


@dataclass(frozen=True)
class Display:
    """How figures look on this screen: the one place font size and colour scale are applied."""
    font_size: int = BASE_FONT
    sequential: str = COLORSCALE

    @classmethod
    def for_projector(cls, projector: bool) -> Display:
        """Large fonts and a high-contrast scale for a projector; the defaults otherwise."""
        return cls(18, CONTRAST_COLORSCALE) if projector else cls()

    @property
    def large(self) -> bool:
        return self.font_size > 14

    def apply(self, fig: go.Figure) -> go.Figure:
        """Set the numbers' decimal and thousands marks (the interface's language), the font size
        (annotations named FOLLOWS_FONT, drawn at sizes near the base, move by as much; others keep
        theirs) and the sequential colour scale of the marked traces. Changes `fig` (a fresh one:
        call it before caching)."""
        fig.layout.font.size = self.font_size
        fig.layout.separators = marks()
        delta = self.font_size - BASE_FONT
        if delta:
            for note in fig.layout.annotations:
                if note.name == FOLLOWS_FONT and note.font.size is not None:
                    note.font.size += delta
        for trace in fig.data:
            if trace.meta == SEQUENTIAL:
                trace.colorscale = scale(self.sequential)
        if fig.layout.meta == SEQUENTIAL:
            fig.layout.coloraxis.colorscale = scale(self.sequential)
        return fig


def scale(colours: str | Sequence) -> list[list]:
    """A colour scale (a name, or [position, colour] pairs) as the pairs plotly's validation makes of it
    (plotly.js has scales of the same names that differ: a figure from plain dicts names none). A new list
    each time (a figure may change its own); a name is looked up once (plotly's lookup was 3 % of a class's
    first pages)."""
    pairs = _named_scale(colours) if isinstance(colours, str) else colours
    return [[float(at), colour] for at, colour in pairs]


@functools.lru_cache(maxsize=64)
def _named_scale(name: str) -> tuple[tuple[float, str], ...]:
    return tuple((float(at), colour) for at, colour in plotly.colors.get_colorscale(name))


def label(token: str) -> str:
    """A token as shown on an axis: escaped, with sentencepiece's word mark kept visible."""
    return html.escape(token, quote=False)


def labels(tokens: Sequence[str]) -> list[str]:
    return [label(t) for t in tokens]


def axis(tokens: Sequence[str], title: str | None = None, reverse: bool = False) -> dict:
    """An axis whose ticks are the tokens, at integer positions."""
    ax = dict(tickmode="array", tickvals=list(range(len(tokens))), ticktext=labels(tokens), showgrid=False,
              zeroline=False)
    if title:
        ax["title"] = dict(text=title)
    if reverse:
        ax["autorange"] = "reversed"
    return ax


def hover(row_name: str, col_name: str) -> str:
    return (f"{row_name}: %{{customdata[0]}}<br>{col_name}: %{{customdata[1]}}<br>"
            + _("weight: %{z:.4f}<extra></extra>"))


def customdata(rows: Sequence[str], cols: Sequence[str]) -> np.ndarray:
    """(Tq, Tk, 2) hover labels "i: token". A string array, not Python objects: a cached figure
    then holds ~200 objects for the garbage collector to walk instead of ~2,000 (same JSON)."""
    r, c = labels(rows), labels(cols)
    return np.array([[[f"{i}: {r[i]}", f"{j}: {c[j]}"] for j in range(len(c))] for i in range(len(r))], dtype=str)


def cell_targets(n_rows: int, n_cols: int, customdata, hovertemplate: str) -> go.Scatter:
    """Invisible markers on the centre of every heatmap cell (x = column, y = row), carrying the
    heatmap's hover: Streamlit reports no click on a heatmap (streamlit#8760), but does on markers,
    as {"x": column, "y": row}. Add it after the heatmap, whose own hover is then skipped."""
    cols, rows = np.meshgrid(np.arange(n_cols), np.arange(n_rows))
    return go.Scatter(x=cols.ravel(), y=rows.ravel(), mode="markers", showlegend=False,
                      customdata=np.asarray(customdata, dtype=object).reshape(n_rows * n_cols, -1)[:, 0],
                      marker=dict(symbol="square", size=36, opacity=0.0, color="#000"),
                      hovertemplate=hovertemplate)
