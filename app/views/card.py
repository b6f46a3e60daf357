"""Model card and training: sizes, parameters per component, curves, BLEU, and how
attention formed over the epochs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import streamlit as st

from app import figures
from app.analysis import parameter_counts
from app.settings import Settings
from app.ui import chart
from model.card import EVAL_RESULTS
from model.checkpoint import Checkpoint


def _read_json_lines(path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line]
    except (OSError, json.JSONDecodeError):
        return []


def render(ckpt: Checkpoint, settings: Settings) -> None:
    cfg, meta, fs = ckpt.config, ckpt.meta, settings.font_size
    st.caption(
        "The model is the paper's encoder-decoder at a classroom size: N identical layers per stack, each "
        "with multi-head attention and a position-wise feed-forward network FFN(x) = max(0, xW₁+b₁)W₂+b₂, "
        "each sub-layer wrapped as LayerNorm(x + Sublayer(x))."
    )
    c1, c2 = st.columns(2)
    c1.dataframe(
        pd.DataFrame(
            {
                "setting": [
                    "d_model",
                    "heads",
                    "d_k = d_model / heads",
                    "encoder layers",
                    "decoder layers",
                    "d_ff",
                    "dropout",
                    "norm",
                    "vocabulary",
                    "max positions",
                ],
                "value": [
                    cfg.d_model,
                    cfg.n_heads,
                    cfg.d_head,
                    cfg.n_encoder_layers,
                    cfg.n_decoder_layers,
                    cfg.d_ff,
                    cfg.dropout,
                    "pre-norm" if cfg.norm_first else "post-norm (paper)",
                    f"{cfg.src_vocab_size} ({'joint' if cfg.tie_embeddings else 'separate'})",
                    cfg.max_positions,
                ],
            }
        ).astype(str),
        hide_index=True,
        width="stretch",
    )
    counts = parameter_counts(ckpt.model)
    total = sum(n for _, n in counts)
    c2.dataframe(
        pd.DataFrame(
            {
                "component": [c for c, _ in counts] + ["total"],
                "parameters": [f"{n:,}" for _, n in counts] + [f"{total:,}"],
            }
        ),
        hide_index=True,
        width="stretch",
    )
    st.markdown(
        f"**Trained on** {meta.get('hardware', '?')} in {meta.get('training_time_min', '?')} minutes, "
        f"{meta.get('epochs', '?')} epochs; shipped weights: {meta.get('selected', '?')}."
    )
    log = _read_json_lines(ckpt.path / "training_log.jsonl") if ckpt.path else []
    if log:
        chart(st, figures.training_curves(log, font_size=fs), key="curves", settings=settings)
    evals_path = ckpt.path / EVAL_RESULTS if ckpt.path else None
    if evals_path and evals_path.is_file():
        ev = json.loads(evals_path.read_text())
        st.markdown(f"**Test BLEU** (`{ev['split']}`, sacrebleu, detokenized, cased)")
        st.dataframe(
            pd.DataFrame([{"decoding": k, "BLEU": v["bleu"], "chrF": v["chrf"]} for k, v in ev["results"].items()]),
            hide_index=True,
        )
        st.caption(next(iter(ev["results"].values()))["bleu_signature"])
    snapshots_ui(ckpt, settings)


def snapshots_ui(ckpt: Checkpoint, settings: Settings) -> None:
    path = ckpt.path / "attention_snapshots.json" if ckpt.path else None
    if not path or not path.is_file():
        return
    snaps = json.loads(path.read_text())
    if not snaps:
        return
    st.subheader("How attention formed during training")
    sentences = [s["source"] for s in snaps[0]["sentences"]]
    c = st.columns(4)
    which = c[0].selectbox("Sentence", range(len(sentences)), format_func=sentences.__getitem__, key="snap_sentence")
    epochs = [s["epoch"] for s in snaps]
    epoch = c[1].select_slider("Epoch", epochs, value=epochs[-1], key="snap_epoch")
    shot = next(s for s in snaps if s["epoch"] == epoch)["sentences"][which]
    cross = np.array(shot["cross"])  # (L, H, T, S)
    layer = c[2].selectbox("Layer", range(cross.shape[0]), index=cross.shape[0] - 1, key="snap_layer")
    head = c[3].selectbox("Head", range(cross.shape[1]), key="snap_head")
    st.markdown(f"Epoch {epoch} output: `{shot['output']}`")
    chart(
        st,
        figures.attention_heatmap(
            cross[layer, head],
            shot["target_tokens"],
            shot["source_tokens"],
            title=f"cross-attention after epoch {epoch}",
            row_title="target",
            col_title="source",
            colorscale=settings.colorscale,
            font_size=settings.font_size,
        ),
        key="snap_heatmap",
        settings=settings,
    )
