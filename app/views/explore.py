"""View 1: translate and explore the attention of every layer and head."""

from __future__ import annotations

import streamlit as st

from app import figures
from app.settings import Settings
from app.ui import chart, csv_button
from model.checkpoint import Checkpoint
from model.pipeline import Explanation

KINDS = {
    "cross": ("Cross-attention (decoder → encoder)", "target", "source"),
    "encoder_self": ("Encoder self-attention", "source", "source"),
    "decoder_self": ("Decoder masked self-attention", "target", "target"),
}
CAPTIONS = {
    "cross": "Each output position (row) mixes the encoder's outputs (columns): Attention(Q, K, V) = "
    "softmax(QKᵀ/√d_k)V with Q from the decoder and K, V from the encoder.",
    "encoder_self": "Each source token (row) builds its new representation from all source tokens (columns).",
    "decoder_self": "Each output position sees only itself and earlier positions: the causal mask sets the "
    "upper triangle to −∞ before the softmax, so those weights are exactly 0.",
}


def tokens_for(ex: Explanation, side: str) -> list[str]:
    return (ex.trace.source_tokens if side == "source" else ex.trace.target_tokens)[0]


def render(ckpt: Checkpoint, ex: Explanation, settings: Settings) -> None:
    kind = st.radio("Attention kind", list(KINDS), format_func=lambda k: KINDS[k][0], horizontal=True, key="kind")
    title, row_side, col_side = KINDS[kind]
    rows, cols = tokens_for(ex, row_side), tokens_for(ex, col_side)
    attn = ex.trace.attention(kind)[:, 0].numpy()  # (L, H, Tq, Tk)
    n_layers, n_heads = attn.shape[:2]
    st.caption(CAPTIONS[kind])

    c1, c2, c3 = st.columns(3)
    layer = c1.selectbox("Layer", range(n_layers), key="layer")
    head = c2.selectbox("Head", range(n_heads), key="head")
    picked = c3.selectbox(
        "Highlight the row of token",
        [None, *range(len(rows))],
        key="query",
        format_func=lambda i: "(none)" if i is None else f"{i}: {rows[i]}",
    )

    left, right = st.columns([3, 2])
    with left:
        chart(
            st,
            figures.attention_grid(
                attn,
                rows,
                cols,
                title=f"{title}: every layer × head",
                highlight_row=picked,
                colorscale=settings.colorscale,
                font_size=settings.font_size,
            ),
            key="grid",
            settings=settings,
        )
    with right:
        chart(
            st,
            figures.attention_heatmap(
                attn[layer, head],
                rows,
                cols,
                title=f"layer {layer}, head {head}",
                row_title=f"{row_side} (query)",
                col_title=f"{col_side} (key)",
                highlight_row=picked,
                colorscale=settings.colorscale,
                font_size=settings.font_size,
            ),
            key="single",
            settings=settings,
        )
        csv_button(st, attn[layer, head], rows, cols, f"{kind}-layer{layer}-head{head}")
    if picked is not None:
        chart(
            st,
            figures.row_across_heads(
                attn, picked, cols, rows[picked], colorscale=settings.colorscale, font_size=settings.font_size
            ),
            key="row",
            settings=settings,
        )

    with st.expander("Head average per layer" + (" and attention rollout" if kind == "encoder_self" else "")):
        mean = attn.mean(axis=1)[None]  # (1, L, Tq, Tk)
        chart(
            st,
            figures.attention_grid(
                mean,
                rows,
                cols,
                title="mean over heads",
                row_names=["mean"],
                col_names=[f"layer {i}" for i in range(n_layers)],
                colorscale=settings.colorscale,
                font_size=settings.font_size,
            ),
            key="mean",
            settings=settings,
        )
        if kind == "encoder_self":
            st.caption(
                "Rollout multiplies the head-averaged attention of each layer, counting the residual "
                "connection as half of each token's input: how much each input token reaches each "
                "position after the whole encoder."
            )
            chart(
                st,
                figures.attention_heatmap(
                    figures.rollout(attn),
                    rows,
                    cols,
                    title="attention rollout through the encoder",
                    colorscale=settings.colorscale,
                    font_size=settings.font_size,
                ),
                key="rollout",
                settings=settings,
            )
