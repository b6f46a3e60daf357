"""Vectors of the residual stream: d_model-wide heatmaps, update sizes, FFN units, per-token bars."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from figures.common import DIVERGING, MARGIN, STATUS_COLORS, axis, label, labels
from i18n import N_, _

SUBLAYER_NAMES = {"self_attn": N_("self attn"), "cross_attn": N_("cross attn"), "feed_forward": N_("feed forward")}


def vector_heatmap(matrix: np.ndarray, rows: Sequence[str], title: str) -> go.Figure:
    """Q, K or V of one head (T, d_k): rows = tokens, columns = dimensions."""
    matrix = np.asarray(matrix, dtype=float)
    lim = float(np.abs(matrix).max()) or 1.0
    rows_l = [f"{i}: {t}" for i, t in enumerate(rows)]
    fig = go.Figure(
        go.Heatmap(
            z=matrix,
            colorscale=DIVERGING,
            zmin=-lim,
            zmax=lim,
            zmid=0,
            hovertemplate=_("dimension %{x}<br>value %{z:.3f}<extra></extra>"),
            colorbar=dict(thickness=10),
        )
    )
    fig.update_layout(
        title=title,
        xaxis_title=_("dimension"),
        yaxis=axis(rows_l, reverse=True),
        height=min(600, 160 + 20 * len(rows)),
        margin=MARGIN,
    )
    return fig


def update_sizes(ratios: np.ndarray, sublayers: Sequence[str], token: str) -> go.Figure:
    """ratios (L, n_sublayers): ||Sublayer(x)|| / ||x|| of one token, grouped by layer."""
    ratios = np.asarray(ratios, dtype=float)
    layers = [_("layer {i}").format(i=i) for i in range(ratios.shape[0])]
    fig = go.Figure([go.Bar(x=layers, y=ratios[:, j], name=_(SUBLAYER_NAMES.get(name, name)))
                     for j, name in enumerate(sublayers)])
    fig.update_layout(title=_("size of each sublayer's update against the stream, ‖Sublayer(x)‖ / ‖x‖, for "
                              "{token}").format(token=label(token)), barmode="group", height=300, margin=MARGIN,
                      yaxis_title=_("ratio"))
    return fig


def unit_bars(values: np.ndarray, title: str, highlight: Sequence[int] = (), x_title: str | None = None) -> go.Figure:
    """One value per unit (e.g. the FFN's d_ff activations of a token); `highlight` in red."""
    values = np.asarray(values, dtype=float)
    x_title = _("hidden unit") if x_title is None else x_title
    colours = [STATUS_COLORS["chosen"] if i in set(highlight) else STATUS_COLORS["kept"] for i in range(len(values))]
    fig = go.Figure(go.Bar(x=list(range(len(values))), y=values, marker_color=colours,
                           hovertemplate=f"{x_title} %{{x}}: %{{y:.3f}}<extra></extra>"))
    fig.update_layout(title=title, height=260, margin=MARGIN, xaxis_title=x_title,
                      bargap=0)
    return fig


def token_bars(tokens: Sequence[str], values: Sequence[float], title: str, y_title: str = "") -> go.Figure:
    """One bar per token of a sentence (integer positions; repeated tokens stay apart)."""
    fig = go.Figure(go.Bar(x=list(range(len(tokens))), y=list(values), customdata=labels(tokens),
                           hovertemplate="%{customdata}: %{y:.3f}<extra></extra>"))
    fig.update_layout(title=title, height=280, margin=MARGIN, yaxis_title=y_title,
                      xaxis=axis(tokens))
    return fig
