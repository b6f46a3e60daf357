"""Masks as they were applied: padding (a batch of two sentences), causal, cross; and
the scores before the softmax (blocked = −∞) next to the weights after it (= 0)."""

from __future__ import annotations

import streamlit as st

from app import figures, state
from app.settings import Settings
from app.ui import chart, csv_button
from model.checkpoint import Checkpoint
from model.pipeline import Explanation, InputError

SHORT = {"en": "A dog.", "de": "Ein Hund.", "fr": "Un chien."}
KIND_SIDES = {"encoder_self": ("source", "source"), "decoder_self": ("target", "target"), "cross": ("target", "source")}


def render(ckpt: Checkpoint, ex: Explanation, settings: Settings) -> None:
    fs = settings.font_size
    st.caption(
        "A mask says which keys each query may look at (1) and which are blocked (0). Blocked scores are "
        "set to −∞ before the softmax, so their weights come out exactly 0."
    )
    st.subheader("Padding mask: a batch of two sentences")
    other = SHORT.get(ckpt.src_lang, "A dog.")
    try:
        batch = state.get_encoder_batch(str(settings.checkpoint), (ex.text, other))
    except InputError as exc:
        st.info(str(exc))
        return
    cols = st.columns(2)
    layer0 = batch.attention("encoder_self")[0]  # (B, H, S, S)
    for b, col in enumerate(cols):
        toks = batch.source_tokens[b]
        chart(
            col,
            figures.mask_heatmap(
                batch.mask("encoder_self")[b].int().numpy(),
                toks,
                toks,
                title=f"sentence {b + 1}: encoder padding mask",
                font_size=fs,
            ),
            key=f"pad_mask_{b}",
            settings=settings,
        )
        chart(
            col,
            figures.attention_heatmap(
                layer0[b, 0].numpy(),
                toks,
                toks,
                title=f"sentence {b + 1}: layer 0, head 0 weights",
                colorscale=settings.colorscale,
                font_size=fs,
            ),
            key=f"pad_attn_{b}",
            settings=settings,
        )
    st.caption(
        "The shorter sentence is padded with <pad> to the batch length; its padded columns are blocked, so "
        "no real token attends to padding. (Padded rows are computed but never used.)"
    )

    st.subheader("Causal and cross-attention masks of this translation")
    src, tgt = ex.trace.source_tokens[0], ex.trace.target_tokens[0]
    c1, c2 = st.columns(2)
    chart(
        c1,
        figures.mask_heatmap(
            ex.trace.mask("decoder_self")[0].int().numpy(),
            tgt,
            tgt,
            title="decoder self-attention: causal mask",
            font_size=fs,
        ),
        key="causal_mask",
        settings=settings,
    )
    chart(
        c2,
        figures.mask_heatmap(
            ex.trace.mask("cross")[0].int().numpy(), tgt, src, title="cross-attention: every source token", font_size=fs
        ),
        key="cross_mask",
        settings=settings,
    )

    st.subheader("Before and after the softmax")
    kind = st.radio("Attention", list(KIND_SIDES), index=1, horizontal=True, key="mask_kind")
    n_layers = ex.trace.num_layers("encoder" if kind == "encoder_self" else "decoder")
    n_heads = ckpt.config.n_heads
    a, b = st.columns(2)
    layer = a.selectbox("Layer", range(n_layers), key="mask_layer")
    head = b.selectbox("Head", range(n_heads), key="mask_head")
    rows, keys = (src if s == "source" else tgt for s in KIND_SIDES[kind])
    scores = ex.trace.attention(kind, "scores")[layer, 0, head].numpy()
    weights = ex.trace.attention(kind)[layer, 0, head].numpy()
    c1, c2 = st.columns(2)
    chart(
        c1,
        figures.scores_heatmap(scores, rows, keys, "scores q·k/√d_k, blocked = −∞", font_size=fs),
        key="scores",
        settings=settings,
    )
    chart(
        c2,
        figures.attention_heatmap(
            weights,
            rows,
            keys,
            title="weights after softmax (blocked = 0)",
            colorscale=settings.colorscale,
            font_size=fs,
        ),
        key="weights",
        settings=settings,
    )
    a, b = st.columns(2)
    csv_button(a, scores, rows, keys, f"scores-{kind}-layer{layer}-head{head}")
    csv_button(b, weights, rows, keys, f"weights-{kind}-layer{layer}-head{head}")
