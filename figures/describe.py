"""A figure in words, for whoever cannot see it: one sentence (what a screen reader reads out in place
of the chart) and its numbers as a table. Pure functions of a built plotly figure, in the interface's
language (i18n/)."""
from __future__ import annotations

import html
import re

import numpy as np
import plotly.graph_objects as go

from i18n import _, ngettext

Table = tuple[list[str], list[list]]          # column names, rows
MAX_ROWS = 400


def _text(value) -> str:
    """Plain text of a title or label: markup and entities out."""
    if isinstance(value, dict):
        value = value.get("text", "")
    return html.unescape(re.sub(r"<[^>]+>", " ", str(value or ""))).strip()


def _title(fig: go.Figure) -> str:
    return _text(fig.layout.title.text) or _("a chart")


def _ticks(fig: go.Figure, ref: str | None, letter: str, n: int) -> list[str] | None:
    """The labels along one axis of a trace as the chart writes them (HTML): the axis's tick texts, else None."""
    axis = fig.layout[f"{letter}axis{(ref or letter)[1:]}"]
    if axis.ticktext is not None and len(axis.ticktext) == n:
        return list(axis.ticktext)
    return None


def _number(v: float) -> str:
    return f"{v:.3g}"


def _shown(trace) -> bool:
    """Drawn now (a chart that holds several heads hides all but one)."""
    return trace.visible in (None, True)


def _heatmaps(fig: go.Figure) -> list:
    return [t for t in fig.data if t.type == "heatmap" and t.z is not None and _shown(t)]


def _bars(fig: go.Figure) -> list:
    return [t for t in fig.data if t.type in ("bar", "scatter") and t.y is not None and t.x is not None
            and (t.marker is None or t.marker.opacity != 0) and _shown(t)]          # not the invisible click targets


def summary(fig: go.Figure) -> str:
    """One sentence: what the chart is, and where its largest value is."""
    title, maps, bars = _title(fig), _heatmaps(fig), _bars(fig)
    if maps:
        z = np.asarray(maps[0].z, dtype=float)
        return heatmaps_sentence(fig.layout.title.text or "", z, len(maps), _ticks(fig, maps[0].yaxis, "y", z.shape[0]),
                                 _ticks(fig, maps[0].xaxis, "x", z.shape[1]))
    if bars:
        y = _values(bars[0])
        labels = _labels(fig, bars[0], len(y))
        series = ngettext("{n} series", "{n} series", len(bars)).format(n=len(bars))
        if len(y) and np.isfinite(y).any():
            i = int(np.nanargmax(np.where(np.isfinite(y), y, np.nan)))
            axis = fig.layout["yaxis" if getattr(bars[0], "orientation", None) == "h" else "xaxis"]
            at = f"{_text(axis.title.text)} {labels[i]}" if axis.title.text and labels[i].isdigit() else labels[i]
            return _("Chart “{title}”: {series} of {n} values; the largest, {v}, at {label}.").format(
                title=title, series=series, n=len(y), v=_number(y[i]), label=at)
        return _("Chart “{title}”: {series}, no values.").format(title=title, series=series)
    return _("Chart “{title}”.").format(title=title)


def heatmaps_sentence(title: str, z: np.ndarray, count: int, rows: list[str] | None = None,
                      cols: list[str] | None = None) -> str:
    """The sentence of a chart of `count` heatmaps shaped like z (Tq, Tk), z the first: where its largest value
    is, by row and column label (as the chart writes them, HTML; read as text), or position without labels."""
    z = np.asarray(z, dtype=float)
    title = _text(title) or _("a chart")
    if np.isfinite(z).any():           # only the two labels said are read as text (a change redraws this each time)
        r, c = np.unravel_index(np.nanargmax(np.where(np.isfinite(z), z, np.nan)), z.shape)
        where = _("largest value {v} at row {row}, column {col}").format(
            v=_number(z[r, c]), row=_label(rows, r), col=_label(cols, c))
    else:
        where = _("no values")
    shape = _("{rows} rows × {cols} columns").format(rows=z.shape[0], cols=z.shape[1])
    if count == 1:
        return _("Chart “{title}”: a heatmap of {shape}, {where}.").format(title=title, shape=shape, where=where)
    return _("Chart “{title}”: {n} heatmaps of {shape}; the first: {where}.").format(
        title=title, n=count, shape=shape, where=where)


def heads_sentences(titles: list[str], z: np.ndarray, rows: list[str] | None = None,
                    cols: list[str] | None = None) -> list[str]:
    """heatmaps_sentence(titles[k], z[k], 1, rows, cols) for every k of z (K, Tq, Tk), found at once: one search
    for every heatmap's largest value, each label read as text once (the explorer says all 32-48 heads of a
    sentence for the browser to read out; one by one they were ~1.5 ms of a first page, issue 53)."""
    z = np.asarray(z, dtype=float)
    if z.size == 0:
        return [heatmaps_sentence(t, m, 1, rows, cols) for t, m in zip(titles, z)]
    finite = np.isfinite(z).reshape(len(z), -1)                        # (K, Tq * Tk)
    flat = np.where(finite, z.reshape(len(z), -1), -np.inf).argmax(1)  # the first largest, as nanargmax finds it
    shape = _("{rows} rows × {cols} columns").format(rows=z.shape[1], cols=z.shape[2])
    said, none = _("largest value {v} at row {row}, column {col}"), _("no values")
    sentence, untitled = _("Chart “{title}”: a heatmap of {shape}, {where}."), _("a chart")
    at_row, at_col = np.divmod(flat, z.shape[2])
    row_text = {r: _label(rows, r) for r in set(at_row.tolist())}            # each label read as text once
    col_text = {c: _label(cols, c) for c in set(at_col.tolist())}
    out = []
    for k, (title, r, c, any_value) in enumerate(zip(titles, at_row.tolist(), at_col.tolist(),
                                                     finite.any(1).tolist())):
        where = said.format(v=_number(z[k, r, c]), row=row_text[r], col=col_text[c]) if any_value else none
        out.append(sentence.format(title=_text(title) or untitled, shape=shape, where=where))
    return out


def _label(labels: list[str] | None, i: int) -> str:
    """Position i's label as text (labels as the chart writes them, HTML), or the position without labels."""
    return _text(labels[i]) if labels is not None else str(i)


def matrix_table(z: np.ndarray, rows: list[str] | None = None, cols: list[str] | None = None) -> Table:
    """A heatmap's numbers, z (Tq, Tk), as rows × columns (at most MAX_ROWS rows), each named "i: label"
    (a token may recur; labels as the chart writes them, HTML, read as text), positions without labels."""
    z = np.asarray(z, dtype=float)
    rows = [_text(r) for r in rows] if rows is not None else [str(i) for i in range(z.shape[0])]
    cols = [_text(c) for c in cols] if cols is not None else [str(j) for j in range(z.shape[1])]
    return ["", *(f"{j}: {c}" for j, c in enumerate(cols))], [
        [f"{i}: {r}", *(None if not np.isfinite(v) else round(float(v), 4) for v in row)]
        for i, (r, row) in enumerate(zip(rows[:MAX_ROWS], z[:MAX_ROWS]))]


def _values(trace) -> np.ndarray:
    """A bar or line trace's values: y, or x for horizontal bars."""
    return np.asarray(trace.x if getattr(trace, "orientation", None) == "h" else trace.y, dtype=float)


def _labels(fig: go.Figure, trace, n: int) -> list[str]:
    """What each point of a bar or line trace stands for: its hover label, else its position's tick."""
    if trace.customdata is not None and len(trace.customdata) == n and np.ndim(trace.customdata) == 1:
        return [_text(c) for c in trace.customdata]
    horizontal = getattr(trace, "orientation", None) == "h"
    letter = "y" if horizontal else "x"
    x = list(trace.y if horizontal else trace.x)[:n]
    axis = fig.layout[f"{letter}axis{((trace.yaxis if horizontal else trace.xaxis) or letter)[1:]}"]
    if axis.ticktext is not None and axis.tickvals is not None:
        by_value = dict(zip(axis.tickvals, axis.ticktext))
        return [_text(by_value.get(v, v)) for v in x]
    return [_text(v) for v in x] + [str(i) for i in range(len(x), n)]


def table(fig: go.Figure) -> Table | None:
    """The chart's numbers: the first heatmap as rows × columns, or every bar / line series by its
    points (at most MAX_ROWS rows). None when the chart has neither."""
    maps, bars = _heatmaps(fig), _bars(fig)
    if maps:
        z = np.asarray(maps[0].z, dtype=float)
        return matrix_table(z, _ticks(fig, maps[0].yaxis, "y", z.shape[0]), _ticks(fig, maps[0].xaxis, "x", z.shape[1]))
    if bars:
        n = len(_values(bars[0]))
        labels = _labels(fig, bars[0], n)
        names, unnamed = [], _("value")
        for t in bars:                                    # column names must differ
            name = _text(t.name) or unnamed
            while name in names:
                name += "′"
            names.append(name)
        columns = [[None if not np.isfinite(v) else round(float(v), 4) for v in _values(t)] for t in bars
                   if len(_values(t)) == n]
        return ["", *names[:len(columns)]], [[f"{i}: {labels[i]}", *(c[i] for c in columns)]
                                             for i in range(min(n, MAX_ROWS))]
    return None
