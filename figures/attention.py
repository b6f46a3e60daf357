"""Attention figures: one head's matrix, a grid of every layer x head, one query's row in
every head, masks, scores before the softmax, one query's scores step by step.

Rows are queries (y axis, top to bottom), columns are keys (x axis), everywhere.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from figures.common import (
    COLORSCALE,
    DIVERGING,
    MARGIN,
    SEQUENTIAL,
    STATUS_COLORS,
    axis,
    customdata,
    from_spec,
    hover,
    label,
    labels,
    scale,
)
from i18n import N_, _

# The grid's hover after each cell's "layer i, head j": positions, not tokens (the one-head chart names tokens).
GRID_HOVER = N_("<br>query %{y}, key %{x}<br>weight: %{z:.4f}<extra></extra>")


def attention_heatmap(
    matrix: np.ndarray,
    rows: Sequence[str],
    cols: Sequence[str],
    title: str = "",
    row_title: str | None = None,           # "query" (in the interface's language) unless given
    col_title: str | None = None,           # "key"
    highlight_row: int | None = None,
    zmax: float | None = 1.0,
    height: int | None = None,
    colorscale: str | None = None,
) -> go.Figure:
    """One attention matrix (Tq, Tk): rows = queries, columns = keys. Without `colorscale`,
    the display's sequential scale colours it (figures.display)."""
    matrix = np.asarray(matrix, dtype=float)
    row_title = _("query") if row_title is None else row_title
    col_title = _("key") if col_title is None else col_title
    if matrix.shape != (len(rows), len(cols)):
        raise ValueError(f"matrix {matrix.shape} does not match {len(rows)} row and {len(cols)} column tokens")
    trace = dict(type="heatmap", z=matrix, x=list(range(len(cols))), y=list(range(len(rows))),
                 customdata=customdata(rows, cols), hovertemplate=hover(row_title, col_title),
                 zmin=0, zmax=zmax, colorbar=dict(thickness=12),
                 **({"colorscale": scale(colorscale)} if colorscale else {"colorscale": scale(COLORSCALE),
                                                                           "meta": SEQUENTIAL}))
    size = max(len(rows), len(cols))
    layout = dict(title=dict(text=title), xaxis=dict(axis(cols, col_title), tickangle=-60),
                  yaxis=axis(rows, row_title, reverse=True),
                  height=height or min(900, 180 + 26 * size), margin=MARGIN)
    if highlight_row is not None:
        layout["shapes"] = [dict(type="rect", x0=-0.5, x1=len(cols) - 0.5, y0=highlight_row - 0.5,
                                 y1=highlight_row + 0.5, line=dict(color=STATUS_COLORS["chosen"], width=3))]
    # Plain dicts in one figure (from_spec): ~5x cheaper than go.Heatmap + update_layout + add_shape (same figure).
    return from_spec([trace], layout)


def attention_heads(
    attn: np.ndarray,
    rows: Sequence[str],
    cols: Sequence[str],
    layer: int,
    head: int,
    row_title: str | None = None,
    col_title: str | None = None,
    highlight_row: int | None = None,
) -> go.Figure:
    """Every head of one attention kind, attn (L, H, Tq, Tk), as one heatmap each, the (layer, head) one
    shown; a menu in the figure switches heads in the browser, with no round trip to the server.

    Hover names tokens without a per-cell copy of them: the axes are categories "i: token" (unique, and
    in order), shown as the tokens alone, so 24 heads cost 24 z matrices, not 24 label matrices."""
    attn = np.asarray(attn, dtype=float)
    n_l, n_h, tq, tk = attn.shape
    if (tq, tk) != (len(rows), len(cols)):
        raise ValueError(f"matrices ({tq}, {tk}) do not match {len(rows)} row and {len(cols)} column tokens")
    row_title = _("query") if row_title is None else row_title
    col_title = _("key") if col_title is None else col_title
    r, c = labels(rows), labels(cols)
    y, x = [f"{i}: {t}" for i, t in enumerate(r)], [f"{j}: {t}" for j, t in enumerate(c)]
    heads = [(i, j) for i in range(n_l) for j in range(n_h)]
    names = head_names(n_l, n_h)
    hover = heads_hover(row_title, col_title)
    traces = [dict(type="heatmap", z=attn[i, j].astype(np.float32), x=x, y=y, coloraxis="coloraxis",
                   visible=(i, j) == (layer, head), name=names[k], hovertemplate=f"{hover}<extra>{names[k]}</extra>")
              for k, (i, j) in enumerate(heads)]
    chosen = heads.index((layer, head))
    buttons = [dict(label=names[k], method="update",
                    args=[{"visible": [n == k for n in range(len(heads))]}, {"title.text": names[k]}])
               for k in range(len(heads))]
    size = max(tq, tk)
    layout = dict(title=dict(text=names[chosen]), meta=SEQUENTIAL,
                  xaxis=dict(type="category", tickmode="array", tickvals=x, ticktext=c, title=dict(text=col_title),
                             tickangle=-60, showgrid=False),
                  yaxis=dict(type="category", tickmode="array", tickvals=y, ticktext=r, title=dict(text=row_title),
                             autorange="reversed", showgrid=False),
                  coloraxis=dict(colorscale=scale(COLORSCALE), cmin=0, cmax=1, colorbar=dict(thickness=12)),
                  updatemenus=[dict(type="dropdown", active=chosen, buttons=buttons, x=1.0, xanchor="right",
                                    y=1.02, yanchor="bottom", showactive=True, pad=dict(t=0, b=0))],
                  modebar=dict(orientation="v"),       # down the right edge: across the top it would cover the menu
                  height=min(900, 180 + 26 * size), margin=MARGIN)
    if highlight_row is not None:
        layout["shapes"] = [dict(type="rect", x0=-0.5, x1=tk - 0.5, y0=highlight_row - 0.5, y1=highlight_row + 0.5,
                                 line=dict(color=STATUS_COLORS["chosen"], width=3))]
    return from_spec(traces, layout)


def heads_hover(row_title: str, col_title: str) -> str:
    """The one-head chart's hover: its axes' categories ("i: token") and the weight."""
    return f"{row_title}: %{{y}}<br>{col_title}: %{{x}}<br>" + _("weight: %{z:.4f}")


def head_names(n_layers: int, n_heads: int) -> list[str]:
    """"layer i, head j" for every head, layer by layer: the one-head chart's titles and menu entries."""
    return [_("layer {layer}, head {head}").format(layer=i, head=j) for i in range(n_layers) for j in range(n_heads)]


def grid_names(n_layers: int, n_heads: int) -> tuple[list[str], list[str]]:
    """The grid's row titles ("layer i") and column titles ("head j")."""
    return [_("layer {i}").format(i=i) for i in range(n_layers)], [_("head {j}").format(j=j) for j in range(n_heads)]


def attention_grid(
    attn: np.ndarray,
    rows: Sequence[str],
    cols: Sequence[str],
    title: str = "",
    row_names: Sequence[str] | None = None,
    col_names: Sequence[str] | None = None,
    highlight_row: int | None = None,
) -> go.Figure:
    """A grid of small heatmaps, attn (R, C, Tq, Tk): one per (layer, head) by default."""
    attn = np.asarray(attn, dtype=float)
    n_r, n_c, tq, tk = attn.shape
    if (tq, tk) != (len(rows), len(cols)):
        raise ValueError(f"matrices ({tq}, {tk}) do not match {len(rows)} row and {len(cols)} column tokens")
    default_rows, default_cols = grid_names(n_r, n_c)
    row_names, col_names = row_names or default_rows, col_names or default_cols
    # Float32 z and no per-cell hover strings: the grid is an overview, hover names positions
    # (the single-head chart beside it names tokens). Sends ~6x less than a customdata copy per head.
    hover = _(GRID_HOVER)
    cells = [(i, j) for i in range(n_r) for j in range(n_c)]
    traces = [dict(type="heatmap", z=attn[i, j].astype(np.float32), coloraxis="coloraxis",
                   hovertemplate=f"{row_names[i]}, {col_names[j]}" + hover,
                   xaxis=_axis_ref("x", k), yaxis=_axis_ref("y", k))
              for k, (i, j) in enumerate(cells, start=1)]
    layout = grid_layout(n_r, n_c, row_names, col_names)
    if highlight_row is not None:
        layout["shapes"] = [dict(type="rect", x0=-0.5, x1=tk - 0.5, y0=highlight_row - 0.5, y1=highlight_row + 0.5,
                                 line=dict(color=STATUS_COLORS["chosen"], width=1.5),
                                 xref=_axis_ref("x", k), yref=_axis_ref("y", k)) for k in range(1, len(cells) + 1)]
    layout.update(
        title=dict(text=title),
        meta=SEQUENTIAL,
        coloraxis=dict(colorscale=scale(COLORSCALE), cmin=0, cmax=1, colorbar=dict(thickness=12)),
        height=110 + 105 * n_r if n_c > 4 else 110 + 160 * n_r,
        margin=dict(l=10, r=30, t=70, b=10),
    )
    # Plain dicts in one figure (from_spec): make_subplots and update_*axes cost ~6x more for 24 cells.
    return from_spec(traces, layout)


def _axis_ref(letter: str, k: int) -> str:
    """The name cell k (1-based, row-major) refers to its axes by: x, x2, x3, ..."""
    return f"{letter}{k if k > 1 else ''}"


def grid_layout(n_r: int, n_c: int, row_names: Sequence[str], col_names: Sequence[str],
                h_spacing: float = 0.012, v_spacing: float = 0.03) -> dict:
    """The axes and titles of an n_r x n_c grid of heatmaps, as plotly's make_subplots lays
    them out with column and row titles (row titles take the right 2 % of the width), every
    axis without ticks or grid, y reversed (row 0 of a matrix on top)."""
    right = 0.98
    w = (right - h_spacing * (n_c - 1)) / n_c
    h = (1.0 - v_spacing * (n_r - 1)) / n_r
    layout: dict = {}
    for i in range(n_r):
        top = 1.0 - i * (h + v_spacing)
        for j in range(n_c):
            k = i * n_c + j + 1
            x0 = j * (w + h_spacing)
            layout[_axis_ref("xaxis", k)] = dict(anchor=_axis_ref("y", k), domain=[x0, x0 + w], showticklabels=False,
                                                 showgrid=False, zeroline=False)
            layout[_axis_ref("yaxis", k)] = dict(anchor=_axis_ref("x", k), domain=[top - h, top], showticklabels=False,
                                                 showgrid=False, zeroline=False, autorange="reversed")
    title = dict(font=dict(size=16), showarrow=False, xref="paper", yref="paper")
    layout["annotations"] = (
        [dict(title, text=name, x=j * (w + h_spacing) + w / 2, y=1.0, xanchor="center", yanchor="bottom")
         for j, name in enumerate(col_names)]
        + [dict(title, text=name, x=right, y=1.0 - i * (h + v_spacing) - h / 2, xanchor="left", yanchor="middle",
                textangle=90) for i, name in enumerate(row_names)])
    return layout


def row_across_heads(
    attn: np.ndarray,
    query: int,
    cols: Sequence[str],
    query_token: str,
) -> go.Figure:
    """One query's attention row in every layer and head: attn (L, H, Tq, Tk) -> (L*H, Tk) heatmap."""
    attn = np.asarray(attn, dtype=float)
    return heads_by_token(attn[:, :, query, :], cols,
                          _("what {token} looks at, in every head").format(token=label(query_token)), _("key"))


def heads_by_token(values: np.ndarray, cols: Sequence[str], title: str, col_title: str,
                   zmax: float | None = 1.0) -> go.Figure:
    """One number per layer, head and token, values (L, H, T), as a heatmap: a row per head ("L1 H3")."""
    values = np.asarray(values, dtype=float)
    n_l, n_h = values.shape[:2]
    names = [_("L{layer} H{head}").format(layer=i, head=j) for i in range(n_l) for j in range(n_h)]
    return attention_heatmap(values.reshape(n_l * n_h, -1), names, cols, title=title, row_title=_("layer/head"),
                             col_title=col_title, height=160 + 16 * len(names), zmax=zmax)


def attention_difference(diff: np.ndarray, rows: Sequence[str], cols: Sequence[str], title: str,
                         row_title: str, col_title: str) -> go.Figure:
    """The change of an attention map between two sentences, diff (Tq, Tk) = edited - original on the tokens
    both share: red where the edited sentence attends more, blue less, white unchanged; the colours span the
    largest change either way (at least 0.05), so a small change is seen and the colour bar says its size."""
    diff = np.asarray(diff, dtype=float)
    if diff.shape != (len(rows), len(cols)):
        raise ValueError(f"matrix {diff.shape} does not match {len(rows)} row and {len(cols)} column tokens")
    span = max(0.05, float(np.abs(diff).max()) if diff.size else 0.0)
    trace = dict(type="heatmap", z=diff, x=list(range(len(cols))), y=list(range(len(rows))),
                 customdata=customdata(rows, cols), zmin=-span, zmax=span, zmid=0, colorscale=scale(DIVERGING),
                 reversescale=True, colorbar=dict(thickness=12),
                 hovertemplate=f"{row_title}: %{{customdata[0]}}<br>{col_title}: %{{customdata[1]}}<br>"
                               + _("change: %{z:+.3f}<extra></extra>"))
    layout = dict(title=dict(text=title), xaxis=dict(axis(cols, col_title), tickangle=-60),
                  yaxis=axis(rows, row_title, reverse=True),
                  height=min(900, 180 + 26 * max(len(rows), len(cols))), margin=MARGIN)
    return from_spec([trace], layout)


def mask_heatmap(
    mask: np.ndarray, rows: Sequence[str], cols: Sequence[str], title: str
) -> go.Figure:
    """A mask (Tq, Tk): 1 = may attend (dark), 0 = blocked (light)."""
    fig = attention_heatmap(
        np.asarray(mask, dtype=float),
        rows,
        cols,
        title=title,
        colorscale=[[0, "#f2f2f2"], [1, "#2b6cb0"]],
    )
    fig.update_traces(
        hovertemplate=_("query %{customdata[0]}<br>key %{customdata[1]}<br>"
                        "%{z:.0f} (1 = may attend, 0 = blocked)<extra></extra>"),
        showscale=False,
    )
    return fig


def scores_heatmap(
    scores: np.ndarray, rows: Sequence[str], cols: Sequence[str], title: str
) -> go.Figure:
    """Pre-softmax scores (Tq, Tk); blocked entries (-inf) are left blank and marked −∞."""
    scores = np.asarray(scores, dtype=float)
    finite = np.where(np.isfinite(scores), scores, np.nan)
    text = np.where(np.isfinite(scores), "", "−∞")
    fig = attention_heatmap(finite, rows, cols, title=title, zmax=None, colorscale="Viridis")
    fig.update_traces(
        text=text,
        texttemplate="%{text}",
        zmin=None,
        hovertemplate=_("query %{customdata[0]}<br>key %{customdata[1]}<br>score %{z:.3f}<extra></extra>"),
    )
    return fig


def score_pipeline(
    raw: np.ndarray,
    scaled: np.ndarray,
    weights: np.ndarray,
    keys: Sequence[str],
    scaled_name: str = "q·k / √d_k",
) -> go.Figure:
    """One query: the row of q·k, after scaling (and masking), and after the softmax."""
    fig = make_subplots(
        rows=1,
        cols=3,
        subplot_titles=("q·k", _("{scaled} (masked: −∞ → blank)").format(scaled=scaled_name), "softmax"),
        horizontal_spacing=0.06,
    )
    x = list(range(len(keys)))
    stages = ((raw, "#7f7f7f"), (scaled, STATUS_COLORS["kept"]), (weights, STATUS_COLORS["chosen"]))
    for col, (vals, color) in enumerate(stages, start=1):
        vals = np.asarray(vals, dtype=float)
        shown = np.where(np.isfinite(vals), vals, np.nan)
        fig.add_trace(
            go.Bar(
                x=x,
                y=shown,
                marker_color=color,
                showlegend=False,
                text=[f"{v:.2f}" if np.isfinite(v) else "−∞" for v in vals],
                textposition="outside",
                customdata=labels(keys),
                hovertemplate="%{customdata}: %{y:.4f}<extra></extra>",
            ),
            row=1,
            col=col,
        )
        fig.update_xaxes(tickmode="array", tickvals=x, ticktext=labels(keys), tickangle=-60, row=1, col=col)
    fig.update_yaxes(range=[0, 1.1], row=1, col=3)
    fig.update_layout(height=380, margin=MARGIN)
    return fig
