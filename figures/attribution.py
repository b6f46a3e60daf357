"""Attribution figures: what each generated token used (source and output so far), one method per
heatmap on one colour scale; each token's share from the source; how well each head's attention
agrees with an attribution; how faithful each method is; one step's attention beside what it used.

Rows are generated tokens, columns the source tokens, then the decoder inputs of the prefix.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

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
    label,
    labels,
    scale,
)
from i18n import _

PREFIX_MARK = "↳ "        # marks the prefix's columns (the output so far) apart from the source's


def attribution_heatmap(source: np.ndarray, prefix: np.ndarray, source_tokens: Sequence[str],
                        prefix_tokens: Sequence[str], generated_tokens: Sequence[str], title: str = "",
                        highlight_row: int | None = None) -> go.Figure:
    """One method: source (T, S) and prefix (T, T) shares side by side on the scale 0..1 (every
    method's figure the same scale), a line between the two parts."""
    source, prefix = np.asarray(source, dtype=float), np.asarray(prefix, dtype=float)
    t, s = source.shape
    if prefix.shape != (t, len(prefix_tokens)) or (s, t) != (len(source_tokens), len(generated_tokens)):
        raise ValueError(f"source {source.shape} / prefix {prefix.shape} do not match {len(generated_tokens)} "
                         f"generated, {len(source_tokens)} source and {len(prefix_tokens)} prefix tokens")
    cols = list(source_tokens) + [PREFIX_MARK + p for p in prefix_tokens]
    z = np.concatenate([source, prefix], axis=1)
    trace = dict(type="heatmap", z=z, x=list(range(len(cols))), y=list(range(t)),
                 customdata=customdata(generated_tokens, cols),
                 hovertemplate=_("generated: %{customdata[0]}<br>input: %{customdata[1]}<br>share: %{z:.3f}"
                                 "<extra></extra>"),
                 zmin=0, zmax=1, colorscale=scale(COLORSCALE), meta=SEQUENTIAL, colorbar=dict(thickness=12))
    shapes = [dict(type="line", x0=s - 0.5, x1=s - 0.5, y0=-0.5, y1=t - 0.5, line=dict(color="#333", width=2))]
    if highlight_row is not None:
        shapes.append(dict(type="rect", x0=-0.5, x1=len(cols) - 0.5, y0=highlight_row - 0.5, y1=highlight_row + 0.5,
                           line=dict(color=STATUS_COLORS["chosen"], width=3)))
    layout = dict(title=dict(text=title), xaxis=dict(axis(cols, _("source  |  output so far (↳)")), tickangle=-60),
                  yaxis=axis(generated_tokens, _("generated token"), reverse=True), shapes=shapes,
                  height=min(900, 200 + 24 * max(t, 8)), margin=MARGIN)
    return from_spec([trace], layout)


def source_share_bars(generated_tokens: Sequence[str], shares: Mapping[str, np.ndarray], title: str = "") -> go.Figure:
    """For each generated token, the share of its attribution that came from the source (the rest:
    the output so far), one bar per method. Low: the token came from the target side's own habits."""
    fig = go.Figure()
    for i, (name, values) in enumerate(shares.items()):
        fig.add_trace(go.Bar(x=list(range(len(generated_tokens))), y=np.asarray(values, dtype=float), name=name,
                             marker_pattern_shape=["", "/", "."][i % 3],
                             customdata=labels(generated_tokens),
                             hovertemplate=f"{name}<br>" + _("%{customdata}: %{y:.0%} from the source<extra></extra>")))
    fig.update_layout(title=title, barmode="group", height=320, margin=MARGIN, xaxis=axis(generated_tokens),
                      yaxis=dict(range=[0, 1], tickformat=".0%", title=_("share from the source")),
                      legend=dict(orientation="h", y=-0.35))
    return fig


def head_agreement_grid(agreement: np.ndarray, title: str = "") -> go.Figure:
    """agreement (L, H): each cross-attention head's correlation with an attribution (-1..1, blank
    where undefined); the number is written in every cell, not only coloured."""
    agreement = np.asarray(agreement, dtype=float)
    n_layers, n_heads = agreement.shape
    text = [["" if np.isnan(v) else f"{v:.2f}" for v in row] for row in agreement]
    heads = [_("head {j}").format(j=h) for h in range(n_heads)]
    layers = [_("layer {i}").format(i=i) for i in range(n_layers)]
    fig = go.Figure(go.Heatmap(
        z=agreement, x=list(range(n_heads)), y=list(range(n_layers)), zmin=-1, zmax=1, zmid=0, colorscale="RdBu",
        text=text, texttemplate="%{text}", colorbar=dict(thickness=12),
        customdata=[[f"{layer}, {head}" for head in heads] for layer in layers],
        hovertemplate=_("cross-attention %{customdata}<br>correlation %{z:.2f}<extra></extra>")))
    fig.update_layout(title=title, height=140 + 40 * n_layers, margin=MARGIN, xaxis=axis(heads),
                      yaxis=axis(layers, reverse=True))
    return fig


def faithfulness_bars(methods: Sequence[str], drops: np.ndarray, errors: np.ndarray, ks: Sequence[int],
                      title: str = "") -> go.Figure:
    """drops, errors (M, K): mean log-probability drop (and its standard error) when each method's
    top-k source tokens are erased, for each k; most faithful at the top."""
    drops, errors = np.asarray(drops, dtype=float), np.asarray(errors, dtype=float)
    order = np.argsort(-drops[:, 0], kind="stable")
    names = [methods[i] for i in order]
    fig = go.Figure()
    for j, k in enumerate(ks):
        fig.add_trace(go.Bar(y=list(range(len(names))), x=drops[order, j], orientation="h",
                             name=_("top-{k} erased").format(k=k),
                             error_x=dict(type="data", array=errors[order, j]), marker_pattern_shape=["", "/"][j % 2],
                             text=[f"{v:.2f}" for v in drops[order, j]], textposition="outside",
                             customdata=labels(names), hovertemplate="%{customdata}: %{x:.3f}<extra></extra>"))
    fig.update_layout(title=title, barmode="group", height=140 + 44 * len(names), margin=dict(MARGIN, l=10),
                      yaxis=axis(names, reverse=True),
                      xaxis=dict(title=_("mean drop of log p (higher: more faithful)")),
                      legend=dict(orientation="h", y=-0.12))
    return fig


def step_used_vs_looked(source_tokens: Sequence[str], attention: np.ndarray, used: np.ndarray, method: str,
                        title: str = "") -> go.Figure:
    """One generated token: its cross-attention over the source beside a method's attribution, both as
    shares of the source (so the two bars of a token compare)."""
    def share(v: np.ndarray) -> np.ndarray:
        v = np.abs(np.asarray(v, dtype=float))
        return v / v.sum() if v.sum() > 0 else v
    x = list(range(len(source_tokens)))
    fig = go.Figure([
        go.Bar(x=x, y=share(attention), name=_("where it looked (cross-attention, heads averaged)"),
               customdata=labels(source_tokens), hovertemplate="%{customdata}: %{y:.0%}<extra></extra>"),
        go.Bar(x=x, y=share(used), name=_("what it used ({method})").format(method=method), marker_pattern_shape="/",
               customdata=labels(source_tokens), hovertemplate="%{customdata}: %{y:.0%}<extra></extra>"),
    ])
    fig.update_layout(title=title, barmode="group", height=320, margin=MARGIN, xaxis=axis(source_tokens),
                      yaxis=dict(tickformat=".0%", title=_("share of the source")),
                      legend=dict(orientation="h", y=-0.3))
    return fig


def looked_vs_used(looked: np.ndarray, used: np.ndarray, source_tokens: Sequence[str],
                   generated_tokens: Sequence[str], titles: tuple[str, str], title: str = "") -> go.Figure:
    """Two (T, S) matrices of shares side by side on one colour scale: where the model looked and
    what it used, rows the generated tokens, columns the source tokens."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, horizontal_spacing=0.08)
    for j, z in enumerate((looked, used), start=1):
        fig.add_trace(go.Heatmap(z=np.asarray(z, dtype=float), x=list(range(len(source_tokens))),
                                 y=list(range(len(generated_tokens))), coloraxis="coloraxis",
                                 customdata=customdata(generated_tokens, source_tokens),
                                 hovertemplate=_("generated: %{customdata[0]}<br>source: %{customdata[1]}<br>"
                                                 "share: %{z:.3f}<extra></extra>")), row=1, col=j)
        fig.update_xaxes(axis(source_tokens), tickangle=-60, row=1, col=j)
        fig.update_yaxes(axis(generated_tokens, reverse=True), row=1, col=j)
    fig.update_layout(title=title, meta=SEQUENTIAL, coloraxis=dict(colorscale=COLORSCALE, cmin=0, cmax=1,
                                                                  colorbar=dict(thickness=12)),
                      height=min(800, 220 + 22 * max(len(generated_tokens), 8)), margin=dict(MARGIN, t=80))
    return fig


def contrast_heatmap(methods: Sequence[str], source: np.ndarray, prefix: np.ndarray, source_tokens: Sequence[str],
                     prefix_tokens: Sequence[str], title: str = "") -> go.Figure:
    """Why one token and not another: each method's (row) signed part of log p(chosen) - log p(other) for every
    source token and every earlier output token (columns, after the line), source (M, S), prefix (M, P). Each
    row is scaled by its largest size (methods on their own scales, one colour scale): red raised the preference
    for the chosen token, blue lowered it; the hover gives the real value."""
    source, prefix = np.asarray(source, dtype=float), np.asarray(prefix, dtype=float)
    if source.shape != (len(methods), len(source_tokens)) or prefix.shape != (len(methods), len(prefix_tokens)):
        raise ValueError(f"source {source.shape} / prefix {prefix.shape} do not match {len(methods)} methods, "
                         f"{len(source_tokens)} source and {len(prefix_tokens)} prefix tokens")
    z = np.concatenate([source, prefix], axis=1)                                  # (M, S + P)
    size = np.abs(z).max(axis=1, keepdims=True)
    scaled = np.divide(z, size, out=np.zeros_like(z), where=size > 0)
    cols = list(source_tokens) + [PREFIX_MARK + p for p in prefix_tokens]
    names = [f"{i}: {label(m)}" for i, m in enumerate(methods)]
    hover = np.dstack([np.array([[n] * len(cols) for n in names], dtype=str),
                       np.array([[f"{j}: {c}" for j, c in enumerate(labels(cols))]] * len(methods), dtype=str),
                       np.array([[f"{v:+.3f}" for v in row] for row in z], dtype=str)])
    trace = dict(type="heatmap", z=scaled, x=list(range(len(cols))), y=list(range(len(methods))), customdata=hover,
                 zmin=-1, zmax=1, colorscale=scale(DIVERGING), reversescale=True, colorbar=dict(thickness=12),
                 hovertemplate=_("%{customdata[0]}<br>input: %{customdata[1]}<br>part of the difference: "
                                 "%{customdata[2]}<extra></extra>"))
    s = len(source_tokens)
    shapes = [dict(type="line", x0=s - 0.5, x1=s - 0.5, y0=-0.5, y1=len(methods) - 0.5,
                   line=dict(color="#333", width=2))]
    layout = dict(title=dict(text=title), xaxis=dict(axis(cols, _("source  |  output so far (↳)")), tickangle=-60),
                  yaxis=axis(methods, reverse=True), shapes=shapes, height=200 + 40 * len(methods), margin=MARGIN)
    return from_spec([trace], layout)
