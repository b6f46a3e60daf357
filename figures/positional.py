"""Positional-encoding figures: the PE matrix, its sinusoids, PE(i)·PE(j), embedding vs PE norms."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from figures.attention import attention_heatmap
from figures.common import DIVERGING, MARGIN, axis, labels
from i18n import _, num


def pe_heatmap(pe: np.ndarray, tokens: Sequence[str]) -> go.Figure:
    """PE (T, D) of the sentence's positions: rows = positions (with their tokens), columns = dimensions."""
    pe = np.asarray(pe, dtype=float)
    rows = [f"{i}: {t}" for i, t in enumerate(tokens)]
    fig = go.Figure(
        go.Heatmap(
            z=pe,
            colorscale=DIVERGING,
            zmin=-1,
            zmax=1,
            zmid=0,
            customdata=np.array([[r] * pe.shape[1] for r in labels(rows)], dtype=object),
            hovertemplate=_("position %{customdata}<br>dimension %{x}<br>PE %{z:.4f}<extra></extra>"),
            colorbar=dict(thickness=12),
        )
    )
    fig.update_layout(
        title=_("positional encoding of this sentence's positions"),
        xaxis=dict(title=_("dimension i")),
        yaxis=axis(rows, "position", reverse=True),
        height=min(700, 200 + 22 * len(rows)),
        margin=MARGIN,
    )
    return fig


def pe_curves(table: np.ndarray, dims: Sequence[int]) -> go.Figure:
    """PE(pos, i) against pos for chosen dimensions i: table (P, D)."""
    table = np.asarray(table, dtype=float)
    fig = go.Figure()
    for i in dims:
        kind = "sin" if i % 2 == 0 else "cos"
        fig.add_trace(
            go.Scatter(
                x=list(range(table.shape[0])),
                y=table[:, i],
                mode="lines",
                name=_("dim {i} ({kind}, wavelength {w})").format(
                    i=i, kind=kind, w=num(2 * np.pi * 10000 ** ((i - i % 2) / table.shape[1]), ".0f")),
            )
        )
    fig.update_layout(
        title=_("each dimension is a sinusoid of its own wavelength"),
        xaxis_title=_("position"),
        yaxis=dict(title="PE", range=[-1.1, 1.1]),
        height=360,
        margin=MARGIN,
    )
    return fig


def pe_similarity(pe: np.ndarray, tokens: Sequence[str]) -> go.Figure:
    """PE(i) · PE(j) for the sentence's positions: nearby positions are alike."""
    pe = np.asarray(pe, dtype=float)
    sim = pe @ pe.T
    rows = [f"{i}: {t}" for i, t in enumerate(tokens)]
    fig = attention_heatmap(
        sim,
        rows,
        rows,
        title=_("PE(i) · PE(j): similarity of positions"),
        row_title=_("position i"),
        col_title=_("position j"),
        zmax=None,
        colorscale="Viridis",
    )
    fig.update_traces(
        hovertemplate=_("%{customdata[0]} · %{customdata[1]}<br>dot product %{z:.2f}<extra></extra>"), zmin=None
    )
    return fig


def embedding_decomposition(
    embedding: np.ndarray, pe: np.ndarray, tokens: Sequence[str]
) -> go.Figure:
    """Norms of embedding·√d_model, PE and their sum (what the encoder receives), per token."""
    embedding, pe = np.asarray(embedding, dtype=float), np.asarray(pe, dtype=float)
    x = list(range(len(tokens)))
    fig = go.Figure()
    for name, arr in ((_("‖embedding · √d_model‖"), embedding), ("‖PE‖", pe),
                      (_("‖sum‖ (encoder input)"), embedding + pe)):
        fig.add_trace(go.Bar(x=x, y=np.linalg.norm(arr, axis=-1), name=name))
    fig.update_layout(
        barmode="group",
        title=_("what each position receives: token embedding + position"),
        xaxis=axis(tokens, "token"),
        yaxis_title=_("L2 norm"),
        height=380,
        margin=MARGIN,
        legend=dict(orientation="h"),
    )
    return fig
