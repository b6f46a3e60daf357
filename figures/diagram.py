"""Figure 1 of the paper as a plotly figure, drawn from a model's config and filled with one
sentence's real numbers. Pure: blocks and values in, figure out (no Streamlit).

Each block is a rectangle with its name and, where it has one, a one-row strip of its value
for the chosen token: a d_model vector (embedding, + PE, each Add & Norm, the FFN's update),
an attention row over the keys (the heads' mean), or the top next-token probabilities
(softmax). One invisible marker per block carries the block's id as customdata, so a click
on a block selects it (st.plotly_chart(on_select="rerun", selection_mode="points")).
"""
from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from figures.common import FOLLOWS_FONT, STATUS_COLORS, from_spec, scale
from i18n import N_, _
from model.network import names
from model.network.config import ModelConfig
from model.network.kinds import STACKS
from model.network.trace import Trace

# the paper's colours: embeddings pink, attention orange, Add & Norm yellow, FFN blue, output purple
COLOURS = {"embed": "#f7c6d0", "pe": "#ffffff", "attn": "#f9d9a8", "norm": "#f5f1a6", "ffn": "#c5e3f6",
           "linear": "#d9d2f0", "softmax": "#c9f0c9"}
WIDTH, HEIGHT = 3.8, 0.8            # a block, in diagram units
STRIP = 1.8                         # the width of a value strip inside a block
X = {"encoder": 2.2, "decoder": 7.4}
BLOCK_IDS = ("encoder.embedding", "encoder.positional", "encoder.self_attn", "encoder.self_attn.norm",
             "encoder.feed_forward", "encoder.feed_forward.norm", "decoder.embedding", "decoder.positional",
             "decoder.self_attn", "decoder.self_attn.norm", "decoder.cross_attn", "decoder.cross_attn.norm",
             "decoder.feed_forward", "decoder.feed_forward.norm", "output.linear", "output.softmax")


@dataclass(frozen=True)
class Block:
    id: str                         # e.g. "encoder.ffn"; a detail panel's name
    label: str
    side: str                       # "encoder" | "decoder"
    y: float
    colour: str


def blocks(cfg: ModelConfig) -> list[Block]:
    """The blocks of figure 1 for this model, bottom to top."""
    pe = _("+ positional encoding") if cfg.positional_encoding else _("(no positional encoding)")
    scale = f" × √{cfg.d_model}" if cfg.scale_embedding else ""
    ffn = _("Feed forward ({d}→{d_ff}→{d})").format(d=cfg.d_model, d_ff=cfg.d_ff)
    out = [Block("encoder.embedding", _("Input embedding") + scale, "encoder", 1.0, "embed"),
           Block("encoder.positional", pe, "encoder", 2.1, "pe"),
           Block("encoder.self_attn", _("Multi-head attention ({n} heads)").format(n=cfg.n_heads), "encoder", 3.6,
                 "attn"),
           Block("encoder.self_attn.norm", "Add & Norm", "encoder", 4.6, "norm"),
           Block("encoder.feed_forward", ffn, "encoder", 5.8, "ffn"),
           Block("encoder.feed_forward.norm", "Add & Norm", "encoder", 6.8, "norm"),
           Block("decoder.embedding", _("Output embedding") + scale, "decoder", 1.0, "embed"),
           Block("decoder.positional", pe, "decoder", 2.1, "pe"),
           Block("decoder.self_attn", _("Masked multi-head attention"), "decoder", 3.6, "attn"),
           Block("decoder.self_attn.norm", "Add & Norm", "decoder", 4.6, "norm"),
           Block("decoder.cross_attn", _("Multi-head attention (K, V: encoder)"), "decoder", 5.8, "attn"),
           Block("decoder.cross_attn.norm", "Add & Norm", "decoder", 6.8, "norm"),
           Block("decoder.feed_forward", ffn, "decoder", 8.0, "ffn"),
           Block("decoder.feed_forward.norm", "Add & Norm", "decoder", 9.0, "norm"),
           Block("output.linear", _("Linear (tied to the embedding)") if cfg.tie_embeddings else _("Linear"),
                 "decoder", 10.6, "linear"),
           Block("output.softmax", "Softmax", "decoder", 11.6, "softmax")]
    return out


def picker_names(cfg: ModelConfig) -> dict[str, str]:
    """A distinct name per block, for a list of them (two Add & Norms per encoder layer)."""
    names = {}
    for b in blocks(cfg):
        label = b.label
        if b.id.endswith(".norm"):
            label = _("Add & Norm after {sublayer}").format(sublayer=_(AFTER[b.id.split(".")[1]][b.side]))
        names[b.id] = f"{_(STACKS[b.side])}: {label}" if b.id.startswith(("encoder", "decoder")) else label
    return names


AFTER = {"self_attn": {"encoder": N_("multi-head attention"), "decoder": N_("masked multi-head attention")},
         "cross_attn": {"decoder": N_("multi-head attention")},
         "feed_forward": {"encoder": N_("feed forward"), "decoder": N_("feed forward")}}


def _strip(block: Block, values: np.ndarray, width: float = STRIP) -> dict:
    """A one-row heatmap inside the right part of the block (a plain dict: see model_diagram)."""
    values = np.asarray(values, dtype=np.float32).reshape(1, -1)
    left = X[block.side] + WIDTH / 2 - width - 0.1
    dx = width / values.shape[1]
    limit = float(np.abs(values).max()) or 1.0
    attention = block.colour == "attn"
    return dict(type="heatmap", z=values, x0=left + dx / 2, dx=dx, y0=block.y, dy=HEIGHT * 0.55, showscale=False,
                colorscale=scale("Blues" if attention else "RdBu"), zmid=None if attention else 0,
                zmin=0 if attention else -limit, zmax=limit, hoverinfo="skip")


def _stack_bracket(side: str, bottom: float, top: float, n: int) -> tuple[dict, dict]:
    x0, x1 = X[side] - WIDTH / 2 - 0.25, X[side] + WIDTH / 2 + 0.25
    shape = dict(type="rect", x0=x0, x1=x1, y0=bottom, y1=top, line=dict(color="#888", width=1.5), layer="below")
    label = dict(x=x0 - 0.1 if side == "encoder" else x1 + 0.1, y=(bottom + top) / 2, text=f"{n}×", showarrow=False,
                 xanchor="right" if side == "encoder" else "left", font=dict(size=16))
    return shape, label


def model_diagram(cfg: ModelConfig, values: Mapping[str, np.ndarray], texts: Mapping[str, str],
                  selected: str | None = None, title: str = "", large: bool = False,
                  height: int | None = None) -> go.Figure:
    """Figure 1 for `cfg`. values: block id -> the strip to draw in it (d_model values, or an
    attention row); texts: block id -> a short text shown instead of a strip (e.g. the top
    next tokens). `selected` is outlined in red. Traces, shapes and annotations go in as
    plain dicts in one figure (from_spec) (add_shape per shape was ten times slower; go.Heatmap
    objects three times)."""
    items = blocks(cfg)
    shapes, notes, traces = [], [], []
    for b in items:
        chosen = b.id == selected
        shapes.append(dict(type="rect", x0=X[b.side] - WIDTH / 2, x1=X[b.side] + WIDTH / 2, y0=b.y - HEIGHT / 2,
                           y1=b.y + HEIGHT / 2, fillcolor=COLOURS[b.colour], layer="below",
                           line=dict(color=STATUS_COLORS["chosen"] if chosen else "#555",
                                     width=3 if chosen else 1)))
        name = html.escape(b.label)
        below = large and b.id not in values and b.id in texts      # large letters: a block's text under its name
        text = f"{name}<br>{texts[b.id]}" if below else two_lines(name) if large else name
        notes.append(dict(x=X[b.side] - WIDTH / 2 + 0.1, y=b.y, text=text, showarrow=False, xanchor="left",
                          align="left", font=dict(size=11, color="#222"), name=FOLLOWS_FONT))
        if b.id in values:
            traces.append(_strip(b, values[b.id], STRIP * 0.7 if large else STRIP))
        elif b.id in texts and not below:
            notes.append(dict(x=X[b.side] + WIDTH / 2 - 0.1, y=b.y, text=texts[b.id], showarrow=False,
                              xanchor="right", font=dict(size=10, color="#222"), name=FOLLOWS_FONT))
    for side, top, n in (("encoder", 7.4, cfg.n_encoder_layers), ("decoder", 9.6, cfg.n_decoder_layers)):
        shape, label = _stack_bracket(side, 3.0, top, n)
        shapes.append(shape)
        notes.append(label)
    notes += _arrows(items)
    traces.append(dict(type="scatter", x=[X[b.side] for b in items], y=[b.y for b in items], mode="markers",
                       marker=dict(size=38, symbol="square", opacity=0, color="#000"),   # clickable, not seen
                       customdata=[b.id for b in items],
                       hovertext=[_("{block}: click for details").format(block=b.label) for b in items],
                       hoverinfo="text", showlegend=False))
    height = height or (960 if large else 720)      # a projector's 720-px screen asks for less
    layout = dict(title=dict(text=title), height=height, margin=dict(l=10, r=10, t=40, b=10), plot_bgcolor="white",
                  dragmode=False, clickmode="event+select", showlegend=False,
                  shapes=shapes, annotations=notes,
                  xaxis=dict(visible=False, range=[-0.6, 10.2], fixedrange=True),
                  yaxis=dict(visible=False, range=[0.3, 12.4], fixedrange=True))
    return from_spec(traces, layout)


def two_lines(label: str) -> str:
    """A block's name in large letters, beside its strip: from its bracket on, or its second half, on a line of
    its own ("Multi-head attention<br>(8 heads)", "Masked multi-head<br>attention")."""
    if " (" in label:
        return label.replace(" (", "<br>(", 1)
    if len(label) <= 18 or " " not in label:
        return label
    cut = min((i for i, c in enumerate(label) if c == " "), key=lambda i: (max(i, len(label) - i - 1), -i))
    return f"{label[:cut]}<br>{label[cut + 1:]}"


def _arrows(items: Sequence[Block]) -> list[dict]:
    """Data flow: up each column, and the encoder's output into the decoder's cross-attention."""
    arrow = dict(xref="x", yref="y", axref="x", ayref="y", showarrow=True, arrowhead=2, arrowsize=1, text="")
    out = []
    for side in ("encoder", "decoder"):
        column = [b for b in items if b.side == side]
        out += [dict(arrow, x=X[side], y=b.y - HEIGHT / 2, ax=X[side], ay=a.y + HEIGHT / 2, arrowwidth=1.2,
                     arrowcolor="#555") for a, b in zip(column, column[1:])]
    top = next(b for b in items if b.id == "encoder.feed_forward.norm")
    cross = next(b for b in items if b.id == "decoder.cross_attn")
    out.append(dict(arrow, x=X["decoder"] - WIDTH / 2, y=cross.y, ax=X["encoder"] + WIDTH / 2, ay=top.y + 0.4,
                    arrowwidth=1.5, arrowcolor="#1f77b4"))
    return out


def values_of(trace: Trace, source: int, target: int, layer: int, top: Sequence[tuple[str, float]]) -> tuple[
        dict[str, np.ndarray], dict[str, str]]:
    """The strips and texts of `model_diagram` for source token `source`, decoder position
    `target` and layer `layer` (of each stack), from a trace recorded with the stream;
    `top`: the decoder position's likeliest next tokens and their probabilities."""
    v: dict[str, np.ndarray] = {}
    for stack, i in (("encoder", source), ("decoder", target)):
        side = names.SIDES[stack]
        v[f"{stack}.embedding"] = trace[names.side(side, "embedding")][0, i].numpy()
        v[f"{stack}.positional"] = trace[names.side(side, "input")][0, i].numpy()
        subs = ("self_attn", "feed_forward") if stack == "encoder" else ("self_attn", "cross_attn", "feed_forward")
        for sub in subs:
            name = names.sublayer(stack, min(layer, trace.num_layers(stack) - 1), sub)
            v[f"{stack}.{sub}.norm"] = trace[names.part(name, "out")][0, i].numpy()
            v[f"{stack}.{sub}"] = (trace[names.part(name, "update")][0, i].numpy() if sub == "feed_forward"
                                   else trace[name][0, :, i].mean(0).numpy())      # the heads' mean attention row
    texts = {"output.softmax": "  ".join(f"{html.escape(t)} {p:.2f}" for t, p in top[:3]),
             "output.linear": "→ " + _("{n} logits").format(n=len(trace[names.LOGITS][0, target]))}
    return v, texts
