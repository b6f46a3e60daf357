"""Head knockout: switch off chosen heads (or whole layers), translate again, compare."""
from __future__ import annotations

import streamlit as st

from app import figures
from app.context import Context
from app.settings import KO_HEADS, KO_LAYERS, multiselect
from app.ui import chart
from model.checkpoint import Checkpoint
from model.pipeline import head_names, token_probabilities


def _label(name: str) -> str:
    stack, layer, module, head = name.split(".")
    kind = {"self_attn": "self", "cross_attn": "cross"}[module]
    return f"{stack} {kind} L{layer} H{head}"


def selection_ui(ckpt: Checkpoint) -> frozenset[str]:
    heads = head_names(ckpt)
    layers = list(dict.fromkeys(n.rsplit(".", 1)[0] for n in heads))      # in model order
    c1, c2 = st.columns(2)
    whole = multiselect(c1, KO_LAYERS, "Switch off whole layers (all their heads)", layers,
                        format_func=lambda n: _label(n + ".0").rsplit(" H", 1)[0])
    single = multiselect(c2, KO_HEADS, "Switch off single heads", heads, format_func=_label)
    return frozenset(single) | frozenset(n for n in heads if n.rsplit(".", 1)[0] in whole)


def render(ctx: Context) -> None:
    ckpt, ex, settings = ctx.checkpoint, ctx.explanation, ctx.settings
    st.caption("Multi-head attention concatenates h heads: MultiHead(Q, K, V) = Concat(head₁, …, head_h) Wᴼ. "
               "Zero some heads' outputs before Wᴼ and see what the translation loses.")
    off = selection_ui(ckpt)
    if not off:
        st.info("Choose heads or layers to switch off.")
        return
    knocked = ctx.knocked_out(off)
    c1, c2 = st.columns(2)
    c1.markdown(f"**All heads:** {ex.output or '(empty)'}")
    c2.markdown(f"**Without {len(off)} head(s):** {knocked.output or '(empty)'}")
    st.caption("identical translation" if knocked.result.tokens == ex.result.tokens else "the translation changed")
    before = token_probabilities(ckpt, ex.source_ids, ex.result.tokens)
    after = token_probabilities(ckpt, ex.source_ids, ex.result.tokens, off)
    tokens = ckpt.tgt_tokenizer.pieces(before.tokens)
    chart(st, figures.probability_change(tokens, before.probs, after.probs, font_size=settings.font_size),
          key="ko_probs", settings=settings)
