"""Pure figure builders: plain arrays and token lists in, plotly figures out.

No Streamlit here. Conventions for every attention figure: rows are queries (y axis,
top to bottom), columns are keys (x axis); axes use integer positions with the tokens
as tick text (repeated tokens stay separate ticks) and tokens are HTML-escaped.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

COLORSCALE = "Blues"
CONTRAST_COLORSCALE = "Viridis"
MARGIN = dict(l=10, r=10, t=50, b=10)  # every figure: room for its title, tight elsewhere
STATUS_COLORS = {"kept": "#1f77b4", "finished": "#2ca02c", "pruned": "#b0b0b0", "live": "#1f77b4", "chosen": "#d62728"}


def label(token: str) -> str:
    """A token as shown on an axis: escaped, with sentencepiece's word mark kept visible."""
    return html.escape(token, quote=False)


def labels(tokens: Sequence[str]) -> list[str]:
    return [label(t) for t in tokens]


def _axis(tokens: Sequence[str], title: str | None = None, reverse: bool = False, font_size: int = 12) -> dict:
    ax = dict(
        tickmode="array",
        tickvals=list(range(len(tokens))),
        ticktext=labels(tokens),
        tickfont=dict(size=font_size),
        showgrid=False,
        zeroline=False,
    )
    if title:
        ax["title"] = title
    if reverse:
        ax["autorange"] = "reversed"
    return ax


def _hover(row_name: str, col_name: str) -> str:
    return f"{row_name}: %{{customdata[0]}}<br>{col_name}: %{{customdata[1]}}<br>weight: %{{z:.4f}}<extra></extra>"


def _customdata(rows: Sequence[str], cols: Sequence[str]) -> np.ndarray:
    r, c = labels(rows), labels(cols)
    return np.array([[[f"{i}: {r[i]}", f"{j}: {c[j]}"] for j in range(len(c))] for i in range(len(r))], dtype=object)


def attention_heatmap(
    matrix: np.ndarray,
    rows: Sequence[str],
    cols: Sequence[str],
    title: str = "",
    row_title: str = "query",
    col_title: str = "key",
    highlight_row: int | None = None,
    zmax: float | None = 1.0,
    colorscale: str = COLORSCALE,
    font_size: int = 12,
    height: int | None = None,
) -> go.Figure:
    """One attention matrix (Tq, Tk): rows = queries, columns = keys."""
    matrix = np.asarray(matrix, dtype=float)
    if matrix.shape != (len(rows), len(cols)):
        raise ValueError(f"matrix {matrix.shape} does not match {len(rows)} row and {len(cols)} column tokens")
    trace = dict(type="heatmap", z=matrix, x=list(range(len(cols))), y=list(range(len(rows))),
                 customdata=_customdata(rows, cols), hovertemplate=_hover(row_title, col_title),
                 colorscale=colorscale, zmin=0, zmax=zmax, colorbar=dict(thickness=12))
    size = max(len(rows), len(cols))
    layout = dict(title=dict(text=title), xaxis=dict(_axis(cols, col_title, font_size=font_size), tickangle=-60),
                  yaxis=_axis(rows, row_title, reverse=True, font_size=font_size),
                  height=height or min(900, 180 + 26 * size), margin=MARGIN, font=dict(size=font_size))
    if highlight_row is not None:
        layout["shapes"] = [dict(type="rect", x0=-0.5, x1=len(cols) - 0.5, y0=highlight_row - 0.5,
                                 y1=highlight_row + 0.5, line=dict(color=STATUS_COLORS["chosen"], width=3))]
    # One validation of plain dicts: ~5x cheaper than go.Heatmap + update_layout + add_shape (same figure).
    return go.Figure(dict(data=[trace], layout=layout))


def attention_grid(
    attn: np.ndarray,
    rows: Sequence[str],
    cols: Sequence[str],
    title: str = "",
    row_names: Sequence[str] | None = None,
    col_names: Sequence[str] | None = None,
    highlight_row: int | None = None,
    colorscale: str = COLORSCALE,
    font_size: int = 12,
) -> go.Figure:
    """A grid of small heatmaps, attn (R, C, Tq, Tk): one per (layer, head) by default."""
    attn = np.asarray(attn, dtype=float)
    n_r, n_c, tq, tk = attn.shape
    if (tq, tk) != (len(rows), len(cols)):
        raise ValueError(f"matrices ({tq}, {tk}) do not match {len(rows)} row and {len(cols)} column tokens")
    row_names = row_names or [f"layer {i}" for i in range(n_r)]
    col_names = col_names or [f"head {j}" for j in range(n_c)]
    # Float32 z and no per-cell hover strings: the grid is an overview, hover names positions
    # (the single-head chart beside it names tokens). Sends ~6x less than a customdata copy per head.
    hover = "<br>query %{y}, key %{x}<br>weight: %{z:.4f}<extra></extra>"
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
        coloraxis=dict(colorscale=colorscale, cmin=0, cmax=1, colorbar=dict(thickness=12)),
        height=110 + 105 * n_r if n_c > 4 else 110 + 160 * n_r,
        margin=dict(l=10, r=30, t=70, b=10),
        font=dict(size=font_size),
    )
    # One validation of plain dicts: make_subplots and update_*axes cost ~6x more for 24 cells.
    return go.Figure(dict(data=traces, layout=layout))


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


def row_across_heads(
    attn: np.ndarray,
    query: int,
    cols: Sequence[str],
    query_token: str,
    colorscale: str = COLORSCALE,
    font_size: int = 12,
) -> go.Figure:
    """One query's attention row in every layer and head: attn (L, H, Tq, Tk) -> (L*H, Tk) heatmap."""
    attn = np.asarray(attn, dtype=float)
    n_l, n_h = attn.shape[:2]
    rows = attn[:, :, query, :].reshape(n_l * n_h, -1)
    names = [f"L{i} H{j}" for i in range(n_l) for j in range(n_h)]
    return attention_heatmap(
        rows,
        names,
        cols,
        title=f"what {label(query_token)} looks at, in every head",
        row_title="layer/head",
        col_title="key",
        colorscale=colorscale,
        font_size=font_size,
        height=160 + 16 * len(names),
    )


def top_k_bar(
    tokens: Sequence[str], probs: Sequence[float], chosen: str | None = None, title: str = "", font_size: int = 12
) -> go.Figure:
    """Next-token probabilities, most likely at the top; the chosen token in red."""
    colors = [STATUS_COLORS["chosen"] if t == chosen else STATUS_COLORS["kept"] for t in tokens]
    fig = go.Figure(
        go.Bar(
            x=list(probs),
            y=list(range(len(tokens))),
            orientation="h",
            marker_color=colors,
            text=[f"{p:.3f}" for p in probs],
            textposition="outside",
            customdata=labels(tokens),
            hovertemplate="%{customdata}: %{x:.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=title,
        yaxis=_axis(tokens, reverse=True, font_size=font_size),
        xaxis=dict(range=[0, 1.15], title="probability"),
        height=120 + 28 * len(tokens),
        margin=MARGIN,
        font=dict(size=font_size),
    )
    return fig


def beam_tree(
    nodes: list[dict], edges: list[tuple[int, int]], title: str = "", selected: int | None = None, font_size: int = 12
) -> go.Figure:
    """The search tree. nodes: dicts with x (step), y (slot), token, score, status
    ("live", "kept", "finished", "pruned"); edges: (parent node index, child node index)."""
    fig = go.Figure()
    ex, ey = [], []
    for a, b in edges:
        ex += [nodes[a]["x"], nodes[b]["x"], None]
        ey += [nodes[a]["y"], nodes[b]["y"], None]
    fig.add_trace(
        go.Scatter(x=ex, y=ey, mode="lines", line=dict(color="#cccccc", width=1.5), hoverinfo="skip", showlegend=False)
    )
    symbols = {"live": "circle", "kept": "circle", "finished": "square", "pruned": "x"}
    for status in ("live", "kept", "finished", "pruned"):
        idx = [i for i, n in enumerate(nodes) if n["status"] == status]
        if not idx:
            continue
        fig.add_trace(
            go.Scatter(
                x=[nodes[i]["x"] for i in idx],
                y=[nodes[i]["y"] for i in idx],
                mode="markers+text",
                name=status,
                text=[label(nodes[i]["token"]) for i in idx],
                textposition="top center",
                marker=dict(
                    size=[16 if i == selected else 10 for i in idx],
                    color=STATUS_COLORS[status],
                    symbol=symbols[status],
                    line=dict(width=[3 if i == selected else 0 for i in idx], color=STATUS_COLORS["chosen"]),
                ),
                customdata=[[label(nodes[i].get("text", nodes[i]["token"])), nodes[i]["score"]] for i in idx],
                hovertemplate="%{customdata[0]}<br>score %{customdata[1]:.3f}<extra>" + status + "</extra>",
                textfont=dict(size=font_size - 1, color="#999999" if status == "pruned" else "#222222"),
            )
        )
    fig.update_layout(
        title=title,
        xaxis=dict(title="step", dtick=1, zeroline=False),
        yaxis=dict(visible=False, autorange="reversed"),
        height=260 + 22 * max([n["y"] for n in nodes] + [0]),
        margin=MARGIN,
        legend=dict(orientation="h"),
        font=dict(size=font_size),
    )
    return fig


# ---- positional encoding ------------------------------------------------------------------
DIVERGING = "RdBu"


def pe_heatmap(pe: np.ndarray, tokens: Sequence[str], font_size: int = 12) -> go.Figure:
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
            hovertemplate="position %{customdata}<br>dimension %{x}<br>PE %{z:.4f}<extra></extra>",
            colorbar=dict(thickness=12),
        )
    )
    fig.update_layout(
        title="positional encoding of this sentence's positions",
        xaxis=dict(title="dimension i"),
        yaxis=_axis(rows, "position", reverse=True, font_size=font_size),
        height=min(700, 200 + 22 * len(rows)),
        margin=MARGIN,
        font=dict(size=font_size),
    )
    return fig


def pe_curves(table: np.ndarray, dims: Sequence[int], font_size: int = 12) -> go.Figure:
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
                name=f"dim {i} ({kind}, wavelength {2 * np.pi * 10000 ** ((i - i % 2) / table.shape[1]):.0f})",
            )
        )
    fig.update_layout(
        title="each dimension is a sinusoid of its own wavelength",
        xaxis_title="position",
        yaxis=dict(title="PE", range=[-1.1, 1.1]),
        height=360,
        margin=MARGIN,
        font=dict(size=font_size),
    )
    return fig


def pe_similarity(pe: np.ndarray, tokens: Sequence[str], font_size: int = 12) -> go.Figure:
    """PE(i) · PE(j) for the sentence's positions: nearby positions are alike."""
    pe = np.asarray(pe, dtype=float)
    sim = pe @ pe.T
    rows = [f"{i}: {t}" for i, t in enumerate(tokens)]
    fig = attention_heatmap(
        sim,
        rows,
        rows,
        title="PE(i) · PE(j): similarity of positions",
        row_title="position i",
        col_title="position j",
        zmax=None,
        colorscale="Viridis",
        font_size=font_size,
    )
    fig.update_traces(
        hovertemplate="%{customdata[0]} · %{customdata[1]}<br>dot product %{z:.2f}<extra></extra>", zmin=None
    )
    return fig


def embedding_decomposition(
    embedding: np.ndarray, pe: np.ndarray, tokens: Sequence[str], font_size: int = 12
) -> go.Figure:
    """Norms of embedding·√d_model, PE and their sum (what the encoder receives), per token."""
    embedding, pe = np.asarray(embedding, dtype=float), np.asarray(pe, dtype=float)
    x = list(range(len(tokens)))
    fig = go.Figure()
    for name, arr in (("‖embedding · √d_model‖", embedding), ("‖PE‖", pe), ("‖sum‖ (encoder input)", embedding + pe)):
        fig.add_trace(go.Bar(x=x, y=np.linalg.norm(arr, axis=-1), name=name))
    fig.update_layout(
        barmode="group",
        title="what each position receives: token embedding + position",
        xaxis=_axis(tokens, "token", font_size=font_size),
        yaxis_title="L2 norm",
        height=380,
        margin=MARGIN,
        legend=dict(orientation="h"),
        font=dict(size=font_size),
    )
    return fig


# ---- masks and one head ------------------------------------------------------------------
def mask_heatmap(
    mask: np.ndarray, rows: Sequence[str], cols: Sequence[str], title: str, font_size: int = 12
) -> go.Figure:
    """A mask (Tq, Tk): 1 = may attend (dark), 0 = blocked (light)."""
    fig = attention_heatmap(
        np.asarray(mask, dtype=float),
        rows,
        cols,
        title=title,
        colorscale=[[0, "#f2f2f2"], [1, "#2b6cb0"]],
        font_size=font_size,
    )
    fig.update_traces(
        hovertemplate="query %{customdata[0]}<br>key %{customdata[1]}<br>"
        "%{z:.0f} (1 = may attend, 0 = blocked)<extra></extra>",
        showscale=False,
    )
    return fig


def scores_heatmap(
    scores: np.ndarray, rows: Sequence[str], cols: Sequence[str], title: str, font_size: int = 12
) -> go.Figure:
    """Pre-softmax scores (Tq, Tk); blocked entries (-inf) are left blank and marked −∞."""
    scores = np.asarray(scores, dtype=float)
    finite = np.where(np.isfinite(scores), scores, np.nan)
    text = np.where(np.isfinite(scores), "", "−∞")
    fig = attention_heatmap(finite, rows, cols, title=title, zmax=None, colorscale="Viridis", font_size=font_size)
    fig.update_traces(
        text=text,
        texttemplate="%{text}",
        zmin=None,
        hovertemplate="query %{customdata[0]}<br>key %{customdata[1]}<br>score %{z:.3f}<extra></extra>",
    )
    return fig


def vector_heatmap(matrix: np.ndarray, rows: Sequence[str], title: str, font_size: int = 12) -> go.Figure:
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
            hovertemplate="dimension %{x}<br>value %{z:.3f}<extra></extra>",
            colorbar=dict(thickness=10),
        )
    )
    fig.update_layout(
        title=title,
        xaxis_title="dimension",
        yaxis=_axis(rows_l, reverse=True, font_size=font_size),
        height=min(600, 160 + 20 * len(rows)),
        margin=MARGIN,
        font=dict(size=font_size),
    )
    return fig


def score_pipeline(
    raw: np.ndarray,
    scaled: np.ndarray,
    weights: np.ndarray,
    keys: Sequence[str],
    scaled_name: str = "q·k / √d_k",
    font_size: int = 12,
) -> go.Figure:
    """One query: the row of q·k, after scaling (and masking), and after the softmax."""
    from plotly.subplots import make_subplots as _mk

    fig = _mk(
        rows=1,
        cols=3,
        subplot_titles=("q·k", f"{scaled_name} (masked: −∞ → blank)", "softmax"),
        horizontal_spacing=0.06,
    )
    x = list(range(len(keys)))
    for col, (vals, color) in enumerate(((raw, "#7f7f7f"), (scaled, "#1f77b4"), (weights, "#d62728")), start=1):
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
    fig.update_layout(height=380, margin=MARGIN, font=dict(size=font_size))
    return fig


# ---- training ---------------------------------------------------------------------------------
def training_curves(log: Sequence[dict], font_size: int = 12) -> go.Figure:
    """Per-epoch train/val loss (left axis) and val BLEU (right axis) from training_log.jsonl rows."""
    epochs = [r["epoch"] for r in log]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(
        go.Scatter(
            x=epochs, y=[r["train_loss"] for r in log], name="train loss (label-smoothed)", mode="lines+markers"
        ),
        secondary_y=False,
    )
    fig.add_trace(
        go.Scatter(x=epochs, y=[r["val_loss"] for r in log], name="val loss", mode="lines+markers"), secondary_y=False
    )
    fig.add_trace(
        go.Scatter(
            x=epochs,
            y=[r["val_bleu"] for r in log],
            name="val BLEU (greedy)",
            mode="lines+markers",
            line=dict(dash="dot"),
        ),
        secondary_y=True,
    )
    fig.update_xaxes(title="epoch", dtick=1)
    fig.update_yaxes(title="loss", secondary_y=False)
    fig.update_yaxes(title="BLEU", secondary_y=True)
    fig.update_layout(
        title="training curves",
        height=380,
        margin=MARGIN,
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="right", x=1),  # clear of the axis title
        font=dict(size=font_size),
    )
    return fig


def probability_change(tokens: Sequence[str], before: Sequence[float], after: Sequence[float],
                       font_size: int = 12) -> go.Figure:
    """Each output token's probability with all heads, and with the chosen heads off."""
    x = list(range(len(tokens)))
    fig = go.Figure([go.Bar(x=x, y=list(before), name="all heads", customdata=labels(tokens),
                            hovertemplate="%{customdata}: %{y:.4f}<extra>all heads</extra>"),
                     go.Bar(x=x, y=list(after), name="heads knocked out", customdata=labels(tokens),
                            hovertemplate="%{customdata}: %{y:.4f}<extra>knocked out</extra>")])
    fig.update_layout(barmode="group", title="probability of each token of the original translation",
                      xaxis=_axis(tokens, "token", font_size=font_size), yaxis=dict(title="probability", range=[0, 1]),
                      height=380, margin=MARGIN, legend=dict(orientation="h"),
                      font=dict(size=font_size))
    return fig


def lab_curves(steps: Sequence[int], train_loss: Sequence[float], heldout_loss: Sequence[float],
               token_acc: Sequence[float], seq_acc: Sequence[float], font_size: int = 12) -> go.Figure:
    """The training lab's live curves against the step: losses (log scale) on the left,
    held-out accuracies on the right. NaN values (no training loss before step 1) are gaps."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("loss (log scale)", "held-out accuracy, greedy decoding"),
                        horizontal_spacing=0.1)
    lines = ((1, "training loss (label-smoothed)", train_loss, "solid"), (1, "held-out loss", heldout_loss, "dot"),
             (2, "token accuracy", token_acc, "dot"), (2, "whole-sequence accuracy", seq_acc, "solid"))
    fig.add_traces([go.Scatter(x=list(steps), y=[float(v) for v in values], name=name, mode="lines",
                               line=dict(dash=dash)) for _, name, values, dash in lines],
                   rows=[1] * len(lines), cols=[col for col, *_ in lines])
    fig.update_xaxes(title="step")
    fig.update_yaxes(type="log", dtick="D2", row=1, col=1)      # labels at 1, 2, 5 of each decade
    fig.update_yaxes(range=[0, 1.02], tickformat=".0%", row=1, col=2)
    fig.update_layout(height=340, margin=dict(l=10, r=10, t=40, b=10), font=dict(size=font_size),
                      legend=dict(orientation="h", yanchor="top", y=-0.25, xanchor="left", x=0))
    return fig


def update_sizes(ratios: np.ndarray, sublayers: Sequence[str], token: str, font_size: int = 12) -> go.Figure:
    """ratios (L, n_sublayers): ||Sublayer(x)|| / ||x|| of one token, grouped by layer."""
    ratios = np.asarray(ratios, dtype=float)
    layers = [f"layer {i}" for i in range(ratios.shape[0])]
    fig = go.Figure([go.Bar(x=layers, y=ratios[:, j], name=name) for j, name in enumerate(sublayers)])
    fig.update_layout(title=f"size of each sublayer's update against the stream, ‖Sublayer(x)‖ / ‖x‖, for "
                            f"{label(token)}", barmode="group", height=300, margin=MARGIN, font=dict(size=font_size),
                      yaxis_title="ratio")
    return fig


def unit_bars(values: np.ndarray, title: str, highlight: Sequence[int] = (), x_title: str = "hidden unit",
              font_size: int = 12) -> go.Figure:
    """One value per unit (e.g. the FFN's d_ff activations of a token); `highlight` in red."""
    values = np.asarray(values, dtype=float)
    colours = [STATUS_COLORS["chosen"] if i in set(highlight) else STATUS_COLORS["kept"] for i in range(len(values))]
    fig = go.Figure(go.Bar(x=list(range(len(values))), y=values, marker_color=colours,
                           hovertemplate=f"{x_title} %{{x}}: %{{y:.3f}}<extra></extra>"))
    fig.update_layout(title=title, height=260, margin=MARGIN, font=dict(size=font_size), xaxis_title=x_title,
                      bargap=0)
    return fig


def token_bars(tokens: Sequence[str], values: Sequence[float], title: str, y_title: str = "",
               font_size: int = 12) -> go.Figure:
    """One bar per token of a sentence (integer positions; repeated tokens stay apart)."""
    fig = go.Figure(go.Bar(x=list(range(len(tokens))), y=list(values), customdata=labels(tokens),
                           hovertemplate="%{customdata}: %{y:.3f}<extra></extra>"))
    fig.update_layout(title=title, height=280, margin=MARGIN, font=dict(size=font_size), yaxis_title=y_title,
                      xaxis=_axis(tokens, font_size=font_size))
    return fig


def distribution(tokens: Sequence[str], probs: Sequence[float], kept: Sequence[bool], title: str,
                 font_size: int = 12) -> go.Figure:
    """The likeliest next tokens' probabilities; those a top-k / top-p cut removes in grey."""
    colours = [STATUS_COLORS["kept"] if k else STATUS_COLORS["pruned"] for k in kept]
    fig = go.Figure(go.Bar(x=list(range(len(tokens))), y=list(probs), marker_color=colours,
                           customdata=labels(tokens), hovertemplate="%{customdata}: %{y:.4f}<extra></extra>"))
    fig.update_layout(title=title, height=320, margin=MARGIN, font=dict(size=font_size), yaxis_title="probability",
                      yaxis_range=[0, 1], xaxis=_axis(tokens, font_size=font_size))
    fig.update_xaxes(tickangle=-60)
    return fig


def knockout_grid(effects: np.ndarray, modules: Sequence[str], title: str = "", font_size: int = 12) -> go.Figure:
    """effects (M, H + 1): the drop in log-probability of the translation when one head
    (columns 0..H-1) or the whole module (last column) is switched off, per attention
    module (rows). Red: the translation got less likely without it."""
    effects = np.asarray(effects, dtype=float)
    n_heads = effects.shape[1] - 1
    cols = [f"head {h}" for h in range(n_heads)] + ["whole layer"]
    limit = float(np.abs(effects).max()) or 1.0
    fig = go.Figure(go.Heatmap(
        z=effects, x=list(range(n_heads + 1)), y=list(range(len(modules))), colorscale="RdBu", reversescale=True,
        zmid=0, zmin=-limit, zmax=limit, text=np.round(effects, 2), texttemplate="%{text}",
        customdata=[[f"{m}, {c}" for c in cols] for m in modules],
        hovertemplate="%{customdata}<br>log-probability drop %{z:.3f}<extra></extra>", colorbar=dict(thickness=12)))
    fig.update_layout(title=title, height=140 + 34 * len(modules), margin=MARGIN, font=dict(size=font_size),
                      xaxis=_axis(cols, font_size=font_size), yaxis=_axis(modules, reverse=True, font_size=font_size),
                      clickmode="event+select")
    fig.add_vline(x=n_heads - 0.5, line=dict(color="#555", width=2))
    return fig
