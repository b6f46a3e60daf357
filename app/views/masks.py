"""Masks as they were applied: padding (a batch of two sentences), causal, cross; and
the scores before the softmax (blocked = −∞) next to the weights after it (= 0)."""

from __future__ import annotations

import streamlit as st

import figures
from app.context import Context
from app.settings import declare, layer_head, radio
from app.ui import chart, csv_button, tokens_for, why
from figures import captions
from i18n import _
from model.inference.pipeline import SCORES, InputError
from model.network.kinds import ATTENTION_KINDS, KIND_NAMES

MASK_KIND = declare("mask_kind", "mask_kind", "decoder_self", choices=KIND_NAMES)


def render(ctx: Context) -> None:
    why(st, _(captions.MASKS_INTRO), ctx.settings.projector, "masks")
    _padding(ctx)
    _causal_and_cross(ctx)
    _before_and_after(ctx)


def _padding(ctx: Context) -> None:
    st.subheader(_("Padding mask: a batch of two sentences"))
    try:
        batch = ctx.encoder_batch((ctx.explanation.text, captions.short_sentence(ctx.checkpoint.src_lang)))
    except InputError as exc:
        st.info(str(exc))
        return
    layer0 = batch.attention("encoder_self")[0]  # (B, H, S, S)
    for b, col in enumerate(st.container(key="pad_pair").columns(2)):     # the page's main picture
        toks = batch.source_tokens[b]
        mask = ctx.figure(f"pad_mask_{b}", (), lambda b=b, toks=toks: figures.mask_heatmap(
            batch.mask("encoder_self")[b].int().numpy(), toks, toks,
            title=_("sentence {n}: encoder padding mask").format(n=b + 1)))
        chart(col, mask, key=f"pad_mask_{b}", settings=ctx.settings)
        weights = ctx.figure(f"pad_attn_{b}", (), lambda b=b, toks=toks: figures.attention_heatmap(
            layer0[b, 0].numpy(), toks, toks, title=_("sentence {n}: layer 0, head 0 weights").format(n=b + 1)))
        chart(col, weights, key=f"pad_attn_{b}", settings=ctx.settings)
    st.caption(_(captions.PADDING_CAPTION))


def _causal_and_cross(ctx: Context) -> None:
    st.subheader(_("Causal and cross-attention masks of this translation"))
    trace = ctx.explanation.trace
    src, tgt = trace.source_tokens[0], trace.target_tokens[0]
    c1, c2 = st.columns(2)
    causal = ctx.figure("causal_mask", (), lambda: figures.mask_heatmap(
        trace.mask("decoder_self")[0].int().numpy(), tgt, tgt, title=_("decoder self-attention: causal mask")))
    chart(c1, causal, key="causal_mask", settings=ctx.settings)
    cross = ctx.figure("cross_mask", (), lambda: figures.mask_heatmap(
        trace.mask("cross")[0].int().numpy(), tgt, src, title=_("cross-attention: every source token")))
    chart(c2, cross, key="cross_mask", settings=ctx.settings)


def _before_and_after(ctx: Context) -> None:
    st.subheader(_("Before and after the softmax"))
    trace = ctx.recorded(SCORES).trace
    name = radio(st, MASK_KIND, _("Attention"), list(ATTENTION_KINDS), horizontal=True,
                 format_func=lambda k: _(ATTENTION_KINDS[k].label))
    kind = ATTENTION_KINDS[name]
    a, b = st.columns(2)
    layer, head = layer_head((a, b), trace.num_layers(kind.stack), ctx.checkpoint.config.n_heads)
    rows, keys = tokens_for(trace, kind.query_side), tokens_for(trace, kind.key_side)
    scores = trace.attention(name, "scores")[layer, 0, head].numpy()
    weights = trace.attention(name)[layer, 0, head].numpy()
    c1, c2 = st.columns(2)
    where = (name, layer, head)
    chart(c1, ctx.figure("scores", where, lambda: figures.scores_heatmap(
        scores, rows, keys, _("scores q·k/√d_k, blocked = −∞"))), key="scores", settings=ctx.settings)
    chart(c2, ctx.figure("weights", where, lambda: figures.attention_heatmap(
        weights, rows, keys, title=_("weights after softmax (blocked = 0)"))), key="weights", settings=ctx.settings)
    a, b = st.columns(2)
    csv_button(a, scores, rows, keys, f"scores-{name}-layer{layer}-head{head}")
    csv_button(b, weights, rows, keys, f"weights-{name}-layer{layer}-head{head}")
