"""Inside one head: Q, K, V, one query's scores step by step, the softmax, and the
weighted sum of V that is the head's output."""

from __future__ import annotations

import numpy as np
import streamlit as st

from app import figures, state
from app.settings import Settings
from app.ui import chart
from model.checkpoint import Checkpoint
from model.pipeline import Explanation

KINDS = {
    "encoder_self": ("encoder", "self_attn", "source", "source"),
    "decoder_self": ("decoder", "self_attn", "target", "target"),
    "cross": ("decoder", "cross_attn", "target", "source"),
}


def one_query(
    q: np.ndarray, k: np.ndarray, mask_row: np.ndarray, scale: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q (d,), k (Tk, d), mask_row (Tk,) bool -> (q·k, scaled and masked scores, softmax weights)."""
    raw = k @ q
    scaled = raw / np.sqrt(q.shape[-1]) if scale else raw.copy()
    scaled = np.where(mask_row, scaled, -np.inf)
    e = np.exp(scaled - scaled[np.isfinite(scaled)].max())
    return raw, scaled, e / e.sum()


def render(ckpt: Checkpoint, ex: Explanation, settings: Settings) -> None:
    fs = settings.font_size
    st.latex(r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right)V")
    st.caption(
        "Each head projects the token vectors into queries Q, keys K and values V of d_k dimensions. A "
        "query's scores against all keys are scaled by 1/√d_k, masked, and turned into weights by the "
        "softmax; the head's output is the weighted sum of the values."
    )
    full = state.get_explanation(str(settings.checkpoint), ex.text, settings.opts, qkv=True)
    trace = full.trace
    c = st.columns(4)
    kind = c[0].selectbox("Attention", list(KINDS), index=2, key="head_kind")
    stack, module, q_side, k_side = KINDS[kind]
    n_layers = trace.num_layers(stack)
    layer = c[1].selectbox("Layer", range(n_layers), key="head_layer")
    head = c[2].selectbox("Head", range(ckpt.config.n_heads), key="head_head")
    q_tokens = trace.source_tokens[0] if q_side == "source" else trace.target_tokens[0]
    k_tokens = trace.source_tokens[0] if k_side == "source" else trace.target_tokens[0]
    query = c[3].selectbox(
        "Query token", range(len(q_tokens)), format_func=lambda i: f"{i}: {q_tokens[i]}", key="head_query"
    )
    name = f"{stack}.{layer}.{module}"
    q, k, v = (trace[f"{name}.{x}"][0, head].numpy() for x in "qkv")  # (Tq, d), (Tk, d), (Tk, d)
    cols = st.columns(3)
    for col, (label, mat, toks) in zip(cols, (("Q", q, q_tokens), ("K", k, k_tokens), ("V", v, k_tokens))):
        chart(
            col,
            figures.vector_heatmap(mat, toks, f"{label} (layer {layer}, head {head})", font_size=fs),
            key=f"head_{label}",
            settings=settings,
        )

    scale = not st.toggle(
        "Drop the 1/√d_k scaling",
        key="no_scale",
        help="Without it, dot products of d_k-dimensional vectors grow like √d_k and the softmax "
        "saturates: almost all weight on one key, tiny gradients elsewhere.",
    )
    mask_row = trace.mask(kind)[0, query].numpy()
    raw, scaled, weights = one_query(q[query], k, mask_row, scale)
    d_k = q.shape[-1]
    chart(
        st,
        figures.score_pipeline(
            raw, scaled, weights, k_tokens, scaled_name=f"q·k / √{d_k}" if scale else "q·k (unscaled)", font_size=fs
        ),
        key="head_pipeline",
        settings=settings,
    )
    model_row = trace.attention(kind)[layer, 0, head, query].numpy()
    if scale:
        ok = np.allclose(weights, model_row, atol=1e-4)
        st.caption(
            ("✓ These weights equal the model's own." if ok else "⚠ differs from the model's weights.")
            + f" Largest weight {weights.max():.3f}."
        )
    else:
        st.caption(f"Unscaled: largest weight {weights.max():.3f}, against {model_row.max():.3f} with the scaling.")
    contrib = weights[:, None] * v  # (Tk, d)
    out = contrib.sum(axis=0, keepdims=True)
    chart(
        st,
        figures.vector_heatmap(
            np.concatenate([contrib, out]),
            [*k_tokens, "= output"],
            "weight × V for each key, and their sum: the head's output for this query",
            font_size=fs,
        ),
        key="head_output",
        settings=settings,
    )
