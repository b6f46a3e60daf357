"""Every head across a set: the grid of all heads coloured by one statistic, one head's offset
profile, and one head's queries and keys on a joint map."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from figures.common import DIVERGING, MARGIN, SEQUENTIAL, STATUS_COLORS, axis, cell_targets, labels
from i18n import N_, _

PROFILE = (("left", N_("farther left")), ("previous", N_("previous")), ("same", N_("same / diagonal")),
           ("next", N_("next")), ("right", N_("farther right")))
QUERY_COLOR, KEY_COLOR = "#0072b2", "#e69f00"        # Okabe-Ito blue and orange: safe for colour-blind eyes


def head_grid(values: np.ndarray, roles: Sequence[Sequence[str]], title: str, value_name: str,
              signed: bool = False, selected: tuple[int, int] | None = None) -> go.Figure:
    """values (L, H): one statistic of every head of one kind (nan: not measured), rows = layers.
    Each cell shows the value and its head's role (the role on hover too); signed values (a cost
    that can be negative) get a diverging scale around 0. `selected` (layer, head) is outlined."""
    values = np.asarray(values, dtype=float)
    n_layers, n_heads = values.shape
    text = [[f"<b>{'–' if np.isnan(v) else f'{v:.2f}'}</b><br>{_short(r)}" for v, r in zip(row, rrow)]
            for row, rrow in zip(values, roles)]
    heads = [_("head {j}").format(j=h) for h in range(n_heads)]
    layers = [_("layer {i}").format(i=i) for i in range(n_layers)]
    finite = values[np.isfinite(values)]
    scale = dict(colorscale=DIVERGING, reversescale=True, zmid=0,
                 zmax=float(np.abs(finite).max()) if finite.size else 1.0) if signed else dict(meta=SEQUENTIAL)
    if signed:
        scale["zmin"] = -scale["zmax"]
    hover = [[_("layer {layer}, head {head}").format(layer=i, head=h) + f": {roles[i][h]}<br>{value_name} " +
              ("–" if np.isnan(values[i, h]) else
              f"{values[i, h]:.3f}") for h in range(n_heads)] for i in range(n_layers)]
    fig = go.Figure([go.Heatmap(z=values, x=list(range(n_heads)), y=list(range(n_layers)), text=text,
                                texttemplate="%{text}", hoverinfo="skip", colorbar=dict(thickness=12),
                                textfont=dict(size=12), xgap=2, ygap=2, **scale),
                     cell_targets(n_layers, n_heads, hover, "%{customdata}<extra></extra>")])
    if selected is not None:
        i, h = selected
        fig.add_shape(type="rect", x0=h - 0.5, x1=h + 0.5, y0=i - 0.5, y1=i + 0.5,
                      line=dict(color=STATUS_COLORS["chosen"], width=3))
    fig.update_layout(title=title, height=150 + 58 * n_layers, margin=MARGIN, xaxis=axis(heads),
                      yaxis=axis(layers, reverse=True), clickmode="event+select")
    return fig


def _short(role: str) -> str:
    return role.split(",")[0].split(" /")[0]


def offset_profile(shares: dict[str, float], extra: dict[str, float], title: str) -> go.Figure:
    """Where the head's attention lands, relative to the query (or to the diagonal): the five
    offset shares (summing to 1) as bars, and other shares (`extra`, e.g. the sink and
    punctuation, which overlap the offsets) as bars of another colour."""
    names = [label for _, label in PROFILE] + list(extra)
    y = [shares[key] for key, _ in PROFILE] + list(extra.values())
    colors = [QUERY_COLOR] * len(PROFILE) + [KEY_COLOR] * len(extra)
    fig = go.Figure(go.Bar(x=names, y=y, marker_color=colors, text=[f"{v:.0%}" for v in y], textposition="outside",
                           hovertemplate=_("%{x}: %{y:.1%} of the attention<extra></extra>")))
    fig.update_layout(title=title, height=320, margin=MARGIN, yaxis=dict(range=[0, 1.1], tickformat=".0%",
                      title=_("share of attention")), showlegend=False)
    return fig


def qk_map(queries: np.ndarray, keys: np.ndarray, query_labels: Sequence[str], key_labels: Sequence[str],
           title: str) -> go.Figure:
    """One head's sampled queries and keys on one plane (model/analysis/heads/qkmap.py): circles for queries,
    diamonds for keys (shape and colour both tell them apart), the token and its sentence on hover."""
    fig = go.Figure()
    for name, one, xy, text, color, symbol in ((_("queries"), _("query"), queries, query_labels, QUERY_COLOR, "circle"),
                                               (_("keys"), _("key"), keys, key_labels, KEY_COLOR, "diamond")):
        xy = np.asarray(xy, dtype=float).reshape(-1, 2)
        fig.add_trace(go.Scatter(x=xy[:, 0], y=xy[:, 1], mode="markers", name=name, text=labels(text),
                                   marker=dict(color=color, symbol=symbol, size=7, opacity=0.75),
                                   hovertemplate=f"{one}: %{{text}}<extra></extra>"))
    fig.update_layout(title=title, height=460, margin=MARGIN, legend=dict(orientation="h", y=-0.08),
                      xaxis=dict(zeroline=False, showticklabels=False, title=_("first joint component")),
                      yaxis=dict(zeroline=False, showticklabels=False, title=_("second"), scaleanchor="x"))
    return fig
