"""Inside one head: Q, K, V, one query's scores step by step, the softmax, and the
weighted sum of V that is the head's output."""

from __future__ import annotations

import numpy as np
import streamlit as st

import figures
from app.context import Context
from app.settings import declare, index, layer_head, selectbox, toggle
from app.ui import chart, tokens_for, why
from i18n import N_, _, num
from model.network.kinds import ATTENTION_KINDS, KIND_NAMES
from model.network.trace import Trace

HEAD_KIND = declare("head_kind", "head_kind", "cross", choices=KIND_NAMES)
HEAD_QUERY = declare("head_query", "head_query", 0, index)
NO_SCALE = declare("no_scale", None, False)          # drop 1/sqrt(d_k)
FORMULA = r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right)V"
INTRO = N_(
    "Each head projects the token vectors into queries Q, keys K and values V of d_k dimensions. A query's "
    "scores against all keys are scaled by 1/√d_k, masked, and turned into weights by the softmax; the head's "
    "output is the weighted sum of the values."
)
NO_SCALE_HELP = N_(
    "Without it, dot products of d_k-dimensional vectors grow like √d_k and the softmax saturates: almost all "
    "weight on one key, tiny gradients elsewhere."
)


def one_query(
    q: np.ndarray, k: np.ndarray, mask_row: np.ndarray, scale: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q (d,), k (Tk, d), mask_row (Tk,) bool -> (q·k, scaled and masked scores, softmax weights)."""
    raw = k @ q
    scaled = raw / np.sqrt(q.shape[-1]) if scale else raw.copy()
    scaled = np.where(mask_row, scaled, -np.inf)
    e = np.exp(scaled - scaled[np.isfinite(scaled)].max())
    return raw, scaled, e / e.sum()


def render(ctx: Context) -> None:
    compact = ctx.settings.projector     # the front of a room: the formula and its words behind "Why?"
    if not compact:
        st.latex(FORMULA)
        st.caption(_(INTRO))
    trace = ctx.with_qkv.trace
    c = st.columns([4, 2, 2, 3, 2] if compact else 4, vertical_alignment="bottom")
    if compact:
        why(c[4], _(INTRO), True, "head", FORMULA)
    name = selectbox(c[0], HEAD_KIND, _("Attention"), list(ATTENTION_KINDS),
                     format_func=lambda k: _(ATTENTION_KINDS[k].label))
    kind = ATTENTION_KINDS[name]
    layer, head = layer_head(c[1:3], trace.num_layers(kind.stack), ctx.checkpoint.config.n_heads)
    q_tokens, k_tokens = tokens_for(trace, kind.query_side), tokens_for(trace, kind.key_side)
    query = selectbox(c[3], HEAD_QUERY, _("Query token"), range(len(q_tokens)),
                      format_func=lambda i: f"{i}: {q_tokens[i]}")
    q, k, v = (trace[f"{kind.layer_name(layer)}.{x}"][0, head].numpy() for x in "qkv")  # (Tq|Tk, d)
    for col, (label, mat, toks) in zip(st.columns(3), (("Q", q, q_tokens), ("K", k, k_tokens), ("V", v, k_tokens))):
        fig = ctx.figure(f"head_{label}", (name, layer, head), lambda mat=mat, toks=toks, label=label:
                         figures.vector_heatmap(mat, toks, _("{matrix} (layer {layer}, head {head})").format(
                             matrix=label, layer=layer, head=head)))
        chart(col, fig, key=f"head_{label}", settings=ctx.settings)
    weights, scale = _scores(ctx, trace, name, (layer, head, query), q, k, k_tokens)
    _output(ctx, weights, v, k_tokens, (name, layer, head, query, scale))


def _scores(ctx: Context, trace: Trace, name: str, where: tuple[int, int, int], q: np.ndarray, k: np.ndarray,
            k_tokens: list[str]) -> tuple[np.ndarray, bool]:
    """One query's q·k, scaling, masking and softmax; checked against the model's own weights.
    Returns the weights and whether they were scaled."""
    layer, head, query = where
    scale = not toggle(st, NO_SCALE, _("Drop the 1/√d_k scaling"), help=_(NO_SCALE_HELP))
    raw, scaled, weights = one_query(q[query], k, trace.mask(name)[0, query].numpy(), scale)
    fig = ctx.figure("head_pipeline", (name, layer, head, query, scale), lambda: figures.score_pipeline(
        raw, scaled, weights, k_tokens, scaled_name=f"q·k / √{q.shape[-1]}" if scale else _("q·k (unscaled)")))
    chart(st, fig, key="head_pipeline", settings=ctx.settings)
    model_row = trace.attention(name)[layer, 0, head, query].numpy()
    if scale:
        ok = np.allclose(weights, model_row, atol=1e-4)
        st.caption((_("✓ These weights equal the model's own.") if ok else _("⚠ differs from the model's weights."))
                   + " " + _("Largest weight {w}.").format(w=num(weights.max(), ".3f")))
    else:
        st.caption(_("Unscaled: largest weight {w}, against {m} with the scaling.").format(
            w=num(weights.max(), ".3f"), m=num(model_row.max(), ".3f")))
    return weights, scale


def _output(ctx: Context, weights: np.ndarray, v: np.ndarray, k_tokens: list[str], where: tuple) -> None:
    contrib = weights[:, None] * v  # (Tk, d)
    out = contrib.sum(axis=0, keepdims=True)
    fig = ctx.figure("head_output", where, lambda: figures.vector_heatmap(
        np.concatenate([contrib, out]), [*k_tokens, _("= output")],
        _("weight × V for each key, and their sum: the head's output for this query")))
    chart(st, fig, key="head_output", settings=ctx.settings)
