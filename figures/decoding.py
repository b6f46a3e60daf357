"""Decoding figures: the next-token probabilities, the beam search tree, a sampling distribution."""
from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from figures.common import MARGIN, STATUS_COLORS, axis, from_spec, label, labels
from i18n import N_, _, num

STATUS_NAMES = {"live": N_("live"), "kept": N_("kept"), "finished": N_("finished"), "pruned": N_("pruned")}


def top_k_bar(
    tokens: Sequence[str], probs: Sequence[float], chosen: str | None = None, title: str = ""
) -> go.Figure:
    """Next-token probabilities, most likely at the top; the chosen token in red."""
    colors = [STATUS_COLORS["chosen"] if t == chosen else STATUS_COLORS["kept"] for t in tokens]
    bar = dict(type="bar", x=list(probs), y=list(range(len(tokens))), orientation="h", marker=dict(color=colors),
               text=[f"{p:.3f}" for p in probs], textposition="outside", customdata=labels(tokens),
               hovertemplate="%{customdata}: %{x:.4f}<extra></extra>")
    layout = dict(title=dict(text=title), yaxis=axis(tokens, reverse=True),
                  xaxis=dict(range=[0, 1.15], title=dict(text=_("probability"))), height=120 + 28 * len(tokens),
                  margin=MARGIN)
    return from_spec([bar], layout)


def beam_tree(
    nodes: list[dict], edges: list[tuple[int, int]], title: str = "", selected: int | None = None
) -> go.Figure:
    """The search tree. nodes: dicts with x (step), y (slot), token, score, status
    ("live", "kept", "finished", "pruned"); edges: (parent node index, child node index).
    Plain dicts (figures.common.from_spec): a step page's rerun draws it for every follower of a class."""
    ex, ey = [], []
    for a, b in edges:
        ex += [nodes[a]["x"], nodes[b]["x"], None]
        ey += [nodes[a]["y"], nodes[b]["y"], None]
    traces = [dict(type="scatter", x=ex, y=ey, mode="lines", line=dict(color="#cccccc", width=1.5), hoverinfo="skip",
                   showlegend=False)]
    symbols = {"live": "circle", "kept": "circle", "finished": "square", "pruned": "x"}
    for status in ("live", "kept", "finished", "pruned"):
        idx = [i for i, n in enumerate(nodes) if n["status"] == status]
        if idx:
            traces.append(_status_trace(nodes, idx, status, symbols[status], selected))
    layout = dict(title=dict(text=title), xaxis=dict(title=dict(text=_("step")), dtick=1, zeroline=False),
                  yaxis=dict(visible=False, autorange="reversed"),
                  height=260 + 22 * max([n["y"] for n in nodes] + [0]), margin=MARGIN, legend=dict(orientation="h"))
    return from_spec(traces, layout)


def _status_trace(nodes: list[dict], idx: list[int], status: str, symbol: str, selected: int | None) -> dict:
    """The tree's nodes of one status, as one scatter trace (the selected node larger, outlined)."""
    return dict(
        type="scatter", x=[nodes[i]["x"] for i in idx], y=[nodes[i]["y"] for i in idx], mode="markers+text",
        name=_(STATUS_NAMES[status]), text=[label(nodes[i]["token"]) for i in idx], textposition="top center",
        marker=dict(size=[16 if i == selected else 10 for i in idx], color=STATUS_COLORS[status], symbol=symbol,
                    line=dict(width=[3 if i == selected else 0 for i in idx], color=STATUS_COLORS["chosen"])),
        customdata=[[label(nodes[i].get("text", nodes[i]["token"])), nodes[i]["score"]] for i in idx],
        hovertemplate=_("%{customdata[0]}<br>score %{customdata[1]:.3f}") + f"<extra>{_(STATUS_NAMES[status])}</extra>",
        textfont=dict(color="#999999" if status == "pruned" else "#222222"))


def distribution(tokens: Sequence[str], probs: Sequence[float], kept: Sequence[bool], title: str) -> go.Figure:
    """The likeliest next tokens' probabilities; those a top-k / top-p cut removes in grey."""
    colours = [STATUS_COLORS["kept"] if k else STATUS_COLORS["pruned"] for k in kept]
    fig = go.Figure(go.Bar(x=list(range(len(tokens))), y=list(probs), marker_color=colours,
                           customdata=labels(tokens), hovertemplate="%{customdata}: %{y:.4f}<extra></extra>"))
    fig.update_layout(title=title, height=320, margin=MARGIN, yaxis_title=_("probability"),
                      yaxis_range=[0, 1], xaxis=axis(tokens))
    fig.update_xaxes(tickangle=-60)
    return fig


def token_confidence(tokens: Sequence[str], probs: Sequence[float], low: float, current: int | None = None,
                     title: str = "") -> go.Figure:
    """How sure the model was of each output token (EOS last): bars under `low` are unsure,
    drawn hatched and in another colour, and named in the text (never colour alone); the
    token of the current step outlined; a dotted line at `low`."""
    unsure, unsure_word = [p < low for p in probs], _("unsure")
    bar = dict(type="bar", x=list(range(len(tokens))), y=list(probs),
               marker=dict(color=[STATUS_COLORS["chosen"] if u else STATUS_COLORS["kept"] for u in unsure],
                           pattern=dict(shape=["/" if u else "" for u in unsure]),
                           line=dict(width=[3 if i == current else 0 for i in range(len(tokens))], color="black")),
               text=[f"{p:.2f} {unsure_word}" if u else f"{p:.2f}" for p, u in zip(probs, unsure)],
               textposition="outside", customdata=labels(tokens),
               hovertemplate="%{customdata}: P = %{y:.3f}<extra></extra>")
    line = dict(type="line", x0=0, x1=1, xref="x domain", y0=low, y1=low, yref="y", line=dict(dash="dot"))
    heading = (_("{title} (dotted: unsure below {low})").format(title=title, low=num(low, "g")) if title
               else _("unsure below {low}").format(low=num(low, "g")))
    layout = dict(title=dict(text=heading), height=300, margin=MARGIN, shapes=[line],
                  yaxis=dict(range=[0, 1.18], title=dict(text=_("probability"))), xaxis=axis(tokens))
    return from_spec([bar], layout)
