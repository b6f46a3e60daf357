"""Positional encoding: the PE matrix, its sinusoids, position similarity, and what
each position receives (embedding·√d_model + PE)."""

from __future__ import annotations

import streamlit as st

import figures
from app.context import Context
from app.settings import declare, multiselect, slider
from app.ui import chart, csv_button, why
from figures import captions
from i18n import _, num
from model.network import names

PE_DIMS = declare("pe_dims", None, None)             # dimensions plotted (None: the page's choice)
PE_POSITIONS = declare("pe_positions", None, 100, int)
FORMULA = {
    "interleaved": r"PE_{(pos,\,2i)} = \sin\!\left(\frac{pos}{10000^{2i/d_{model}}}\right),\quad "
                   r"PE_{(pos,\,2i+1)} = \cos\!\left(\frac{pos}{10000^{2i/d_{model}}}\right)",
    "halves": r"PE_{(pos,\,i)} = \sin\!\left(\frac{pos}{10000^{2i/d_{model}}}\right),\quad "
              r"PE_{(pos,\,d_{model}/2+i)} = \cos\!\left(\frac{pos}{10000^{2i/d_{model}}}\right),\ "
              r"i < d_{model}/2",
}


def render(ctx: Context) -> None:
    ckpt, ex, settings = ctx.checkpoint, ctx.explanation, ctx.settings
    cfg = ckpt.config
    why(st, _(captions.POSITIONAL_INTRO), settings.projector, "positional", FORMULA[cfg.pe_layout],
        _(captions.HALVES_NOTE) if cfg.pe_layout == "halves" else None)
    tokens = ex.trace.source_tokens[0]
    pe = ex.trace[names.side("source", "positional")].numpy()  # (S, D)
    c1, c2 = st.container(key="pe_pair").columns(2)     # the page's main picture (the presentation view)
    chart(c1, ctx.figure("pe_heatmap", (), lambda: figures.pe_heatmap(pe, tokens)), key="pe_heatmap", settings=settings)
    chart(c2, ctx.figure("pe_similarity", (), lambda: figures.pe_similarity(pe, tokens)), key="pe_similarity",
          settings=settings)
    csv_button(c1, pe, tokens, [str(i) for i in range(pe.shape[1])], "positional-encoding")
    d = cfg.d_model
    dims = multiselect(st, PE_DIMS, _("Dimensions to plot"), range(d),
                       default=captions.default_pe_dims(d, cfg.pe_layout))
    positions = slider(st, PE_POSITIONS, _("Positions"), bounds=(10, cfg.max_positions),
                       default=min(100, cfg.max_positions))
    curves = ctx.figure("pe_curves", (tuple(dims), positions), lambda: figures.pe_curves(
        ckpt.model.positional.pe[:positions].numpy(), dims))
    chart(st, curves, key="pe_curves", settings=settings)
    st.caption(_(captions.CURVES_CAPTION))
    parts = ctx.figure("pe_decomposition", (), lambda: figures.embedding_decomposition(
        ex.trace[names.side("source", "embedding")][0].numpy(), pe, tokens))
    chart(st, parts, key="pe_decomposition", settings=settings)
    st.caption(_("Token embeddings are multiplied by √d_model = {root}, so they are not drowned by the "
                 "positional encoding, whose norm is √(d_model/2) at every position.").format(root=num(d**0.5, ".1f"))
               if cfg.scale_embedding else _("This model does not scale its token embeddings by √d_model."))
