"""Pure figure builders: plain arrays and token lists in, plotly figures out.

No Streamlit here. Conventions for every attention figure: rows are queries (y axis,
top to bottom), columns are keys (x axis); axes use integer positions with the tokens
as tick text (repeated tokens stay separate ticks) and tokens are HTML-escaped.
"""
from __future__ import annotations

import html
from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

COLORSCALE = "Blues"
CONTRAST_COLORSCALE = "Viridis"
STATUS_COLORS = {"kept": "#1f77b4", "finished": "#2ca02c", "pruned": "#b0b0b0", "live": "#1f77b4",
                 "chosen": "#d62728"}


def label(token: str) -> str:
    """A token as shown on an axis: escaped, with sentencepiece's word mark kept visible."""
    return html.escape(token, quote=False)


def labels(tokens: Sequence[str]) -> list[str]:
    return [label(t) for t in tokens]


def _axis(tokens: Sequence[str], title: str | None = None, reverse: bool = False, font_size: int = 12) -> dict:
    ax = dict(tickmode="array", tickvals=list(range(len(tokens))), ticktext=labels(tokens),
              tickfont=dict(size=font_size), showgrid=False, zeroline=False)
    if title:
        ax["title"] = title
    if reverse:
        ax["autorange"] = "reversed"
    return ax


def _hover(row_name: str, col_name: str) -> str:
    return (f"{row_name}: %{{customdata[0]}}<br>{col_name}: %{{customdata[1]}}<br>"
            "weight: %{z:.4f}<extra></extra>")


def _customdata(rows: Sequence[str], cols: Sequence[str]) -> np.ndarray:
    r, c = labels(rows), labels(cols)
    return np.array([[[f"{i}: {r[i]}", f"{j}: {c[j]}"] for j in range(len(c))] for i in range(len(r))],
                    dtype=object)


def attention_heatmap(matrix: np.ndarray, rows: Sequence[str], cols: Sequence[str], title: str = "",
                      row_title: str = "query", col_title: str = "key", highlight_row: int | None = None,
                      zmax: float | None = 1.0, colorscale: str = COLORSCALE, font_size: int = 12,
                      height: int | None = None) -> go.Figure:
    """One attention matrix (Tq, Tk): rows = queries, columns = keys."""
    matrix = np.asarray(matrix, dtype=float)
    if matrix.shape != (len(rows), len(cols)):
        raise ValueError(f"matrix {matrix.shape} does not match {len(rows)} row and {len(cols)} column tokens")
    fig = go.Figure(go.Heatmap(z=matrix, x=list(range(len(cols))), y=list(range(len(rows))),
                               customdata=_customdata(rows, cols), hovertemplate=_hover(row_title, col_title),
                               colorscale=colorscale, zmin=0, zmax=zmax, colorbar=dict(thickness=12)))
    if highlight_row is not None:
        fig.add_shape(type="rect", x0=-0.5, x1=len(cols) - 0.5, y0=highlight_row - 0.5, y1=highlight_row + 0.5,
                      line=dict(color=STATUS_COLORS["chosen"], width=3))
    size = max(len(rows), len(cols))
    fig.update_layout(title=title, xaxis=_axis(cols, col_title, font_size=font_size),
                      yaxis=_axis(rows, row_title, reverse=True, font_size=font_size),
                      height=height or min(900, 180 + 26 * size), margin=dict(l=10, r=10, t=50, b=10),
                      font=dict(size=font_size))
    fig.update_xaxes(tickangle=-60)
    return fig


def attention_grid(attn: np.ndarray, rows: Sequence[str], cols: Sequence[str], title: str = "",
                   row_names: Sequence[str] | None = None, col_names: Sequence[str] | None = None,
                   highlight_row: int | None = None, colorscale: str = COLORSCALE,
                   font_size: int = 12) -> go.Figure:
    """A grid of small heatmaps, attn (R, C, Tq, Tk): one per (layer, head) by default."""
    attn = np.asarray(attn, dtype=float)
    n_r, n_c, tq, tk = attn.shape
    if (tq, tk) != (len(rows), len(cols)):
        raise ValueError(f"matrices ({tq}, {tk}) do not match {len(rows)} row and {len(cols)} column tokens")
    row_names = row_names or [f"layer {i}" for i in range(n_r)]
    col_names = col_names or [f"head {j}" for j in range(n_c)]
    fig = make_subplots(rows=n_r, cols=n_c, column_titles=list(col_names), row_titles=list(row_names),
                        horizontal_spacing=0.012, vertical_spacing=0.03)
    custom = _customdata(rows, cols)
    for i in range(n_r):
        for j in range(n_c):
            fig.add_trace(go.Heatmap(z=attn[i, j], customdata=custom, coloraxis="coloraxis",
                                     hovertemplate=f"{row_names[i]}, {col_names[j]}<br>" + _hover("query", "key")),
                          row=i + 1, col=j + 1)
            if highlight_row is not None:
                fig.add_shape(type="rect", x0=-0.5, x1=tk - 0.5, y0=highlight_row - 0.5, y1=highlight_row + 0.5,
                              line=dict(color=STATUS_COLORS["chosen"], width=1.5), row=i + 1, col=j + 1)
    fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False)
    fig.update_yaxes(showticklabels=False, showgrid=False, zeroline=False, autorange="reversed")
    fig.update_layout(title=title, coloraxis=dict(colorscale=colorscale, cmin=0, cmax=1, colorbar=dict(thickness=12)),
                      height=110 + 105 * n_r if n_c > 4 else 110 + 160 * n_r, margin=dict(l=10, r=30, t=70, b=10),
                      font=dict(size=font_size))
    return fig


def rollout(attn: np.ndarray) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema, 2020) through a stack of self-attention layers.

    attn (L, H, T, T) -> (T, T): heads averaged, the residual added as 0.5 A + 0.5 I,
    rows renormalised, and the layers multiplied from the first to the last.
    """
    attn = np.asarray(attn, dtype=float)
    result = np.eye(attn.shape[-1])
    for layer in attn:
        a = 0.5 * layer.mean(axis=0) + 0.5 * np.eye(attn.shape[-1])
        a = a / a.sum(axis=-1, keepdims=True)
        result = a @ result
    return result


def row_across_heads(attn: np.ndarray, query: int, cols: Sequence[str], query_token: str,
                     colorscale: str = COLORSCALE, font_size: int = 12) -> go.Figure:
    """One query's attention row in every layer and head: attn (L, H, Tq, Tk) -> (L*H, Tk) heatmap."""
    attn = np.asarray(attn, dtype=float)
    n_l, n_h = attn.shape[:2]
    rows = attn[:, :, query, :].reshape(n_l * n_h, -1)
    names = [f"L{i} H{j}" for i in range(n_l) for j in range(n_h)]
    return attention_heatmap(rows, names, cols, title=f"what {label(query_token)} looks at, in every head",
                             row_title="layer/head", col_title="key", colorscale=colorscale,
                             font_size=font_size, height=160 + 16 * len(names))


def top_k_bar(tokens: Sequence[str], probs: Sequence[float], chosen: str | None = None, title: str = "",
              font_size: int = 12) -> go.Figure:
    """Next-token probabilities, most likely at the top; the chosen token in red."""
    colors = [STATUS_COLORS["chosen"] if t == chosen else STATUS_COLORS["kept"] for t in tokens]
    fig = go.Figure(go.Bar(x=list(probs), y=list(range(len(tokens))), orientation="h", marker_color=colors,
                           text=[f"{p:.3f}" for p in probs], textposition="outside",
                           customdata=labels(tokens), hovertemplate="%{customdata}: %{x:.4f}<extra></extra>"))
    fig.update_layout(title=title, yaxis=_axis(tokens, reverse=True, font_size=font_size),
                      xaxis=dict(range=[0, 1.15], title="probability"), height=120 + 28 * len(tokens),
                      margin=dict(l=10, r=10, t=50, b=10), font=dict(size=font_size))
    return fig


def beam_tree(nodes: list[dict], edges: list[tuple[int, int]], title: str = "", selected: int | None = None,
              font_size: int = 12) -> go.Figure:
    """The search tree. nodes: dicts with x (step), y (slot), token, score, status
    ("live", "kept", "finished", "pruned"); edges: (parent node index, child node index)."""
    fig = go.Figure()
    ex, ey = [], []
    for a, b in edges:
        ex += [nodes[a]["x"], nodes[b]["x"], None]
        ey += [nodes[a]["y"], nodes[b]["y"], None]
    fig.add_trace(go.Scatter(x=ex, y=ey, mode="lines", line=dict(color="#cccccc", width=1.5),
                             hoverinfo="skip", showlegend=False))
    symbols = {"live": "circle", "kept": "circle", "finished": "square", "pruned": "x"}
    for status in ("live", "kept", "finished", "pruned"):
        idx = [i for i, n in enumerate(nodes) if n["status"] == status]
        if not idx:
            continue
        fig.add_trace(go.Scatter(
            x=[nodes[i]["x"] for i in idx], y=[nodes[i]["y"] for i in idx], mode="markers+text",
            name=status, text=[label(nodes[i]["token"]) for i in idx], textposition="top center",
            marker=dict(size=[16 if i == selected else 10 for i in idx], color=STATUS_COLORS[status],
                        symbol=symbols[status], line=dict(width=[3 if i == selected else 0 for i in idx],
                                                          color=STATUS_COLORS["chosen"])),
            customdata=[[label(nodes[i].get("text", nodes[i]["token"])), nodes[i]["score"]] for i in idx],
            hovertemplate="%{customdata[0]}<br>score %{customdata[1]:.3f}<extra>" + status + "</extra>",
            textfont=dict(size=font_size - 1, color="#999999" if status == "pruned" else "#222222")))
    fig.update_layout(title=title, xaxis=dict(title="step", dtick=1, zeroline=False),
                      yaxis=dict(visible=False, autorange="reversed"), height=260 + 22 * max(
                          [n["y"] for n in nodes] + [0]), margin=dict(l=10, r=10, t=50, b=10),
                      legend=dict(orientation="h"), font=dict(size=font_size))
    return fig
