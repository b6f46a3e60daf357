"""Positional encoding: the PE matrix, its sinusoids, position similarity, and what
each position receives (embedding·√d_model + PE)."""

from __future__ import annotations

import streamlit as st

from app import figures
from app.context import Context
from app.ui import chart, csv_button

FORMULA = (
    r"PE_{(pos,\,2i)} = \sin\!\left(\frac{pos}{10000^{2i/d_{model}}}\right),\quad "
    r"PE_{(pos,\,2i+1)} = \cos\!\left(\frac{pos}{10000^{2i/d_{model}}}\right)"
)


def render(ctx: Context) -> None:
    ckpt, ex, settings = ctx.checkpoint, ctx.explanation, ctx.settings
    st.caption(
        "Attention itself ignores word order: every token is compared with every other. The model "
        "knows positions only because a fixed pattern of sines and cosines is added to each token's "
        "embedding before the first layer."
    )
    st.latex(FORMULA)
    tokens = ex.trace.source_tokens[0]
    pe = ex.trace["source.positional"].numpy()  # (S, D)
    fs = settings.font_size
    c1, c2 = st.columns(2)
    chart(c1, figures.pe_heatmap(pe, tokens, font_size=fs), key="pe_heatmap", settings=settings)
    chart(c2, figures.pe_similarity(pe, tokens, font_size=fs), key="pe_similarity", settings=settings)
    csv_button(c1, pe, tokens, [str(i) for i in range(pe.shape[1])], "positional-encoding")
    d = ckpt.config.d_model
    dims = st.multiselect("Dimensions to plot", list(range(d)), default=[0, 1, 8, min(64, d - 2), d - 2], key="pe_dims")
    positions = st.slider(
        "Positions", 10, ckpt.config.max_positions, min(100, ckpt.config.max_positions), key="pe_positions"
    )
    table = ckpt.model.positional.pe[:positions].numpy()
    chart(st, figures.pe_curves(table, dims, font_size=fs), key="pe_curves", settings=settings)
    st.caption(
        "Low dimensions turn fast, high ones slowly: together they give each position a unique code, and "
        "PE(pos + k) is a fixed rotation of PE(pos) for any offset k, so relative positions are easy to use."
    )
    chart(
        st,
        figures.embedding_decomposition(ex.trace["source.embedding"][0].numpy(), pe, tokens, font_size=fs),
        key="pe_decomposition",
        settings=settings,
    )
    st.caption(
        f"Token embeddings are multiplied by √d_model = {d**0.5:.1f}, so they are not drowned by the "
        "positional encoding, whose norm is √(d_model/2) at every position."
    )
