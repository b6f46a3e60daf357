"""Model card and training: sizes, parameters per component, curves, BLEU, and how
attention formed over the epochs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import streamlit as st

import figures
from app import resources
from app.context import Context
from app.settings import layer_head, setting
from app.ui import chart
from model.card import (
    CORPORA,
    corpora,
    decoding_name,
    read_eval_reports,
    read_training_log,
    report_title,
    shape_rows,
    training_parts,
)
from model.checkpoint import Checkpoint
from model.config import ModelConfig

SNAP_LAYER = setting("snap_layer", None, -1, int)   # -1: the last layer
SNAP_HEAD = setting("snap_head", None, 0, int)
FFN = {"relu": "max(0, xW₁+b₁)W₂+b₂", "gelu": "GELU(xW₁+b₁)W₂+b₂", "swish": "swish(xW₁+b₁)W₂+b₂"}


def intro(cfg: ModelConfig) -> str:
    return (f"The model is the paper's encoder-decoder: N identical layers per stack, each with multi-head attention "
            f"and a position-wise feed-forward network FFN(x) = {FFN[cfg.activation]}, each sub-layer wrapped as "
            + ("LayerNorm(x + Sublayer(x))." if not cfg.norm_first else "x + Sublayer(LayerNorm(x)) (pre-norm)."))


def provenance(meta: dict) -> str:
    """Where the weights come from: trained here, or imported."""
    if "imported_from" in meta:
        return (f"**Imported** from a {meta.get('origin', 'foreign')} model in `{meta['imported_from']}` "
                "(`python -m model.convert from-hf`); not trained here, so no training curves.")
    parts = training_parts(meta.get("train_args", {}))
    in_parts = (f", in {len(parts) + 1} runs (`train.py --init-from` continued the finished weights; "
                "the model card README.md gives each run's command)" if parts else "")
    return (f"**Trained on** {meta.get('hardware', '?')} in {meta.get('training_time_min', '?')} minutes, "
            f"{meta.get('epochs', '?')} epochs{in_parts}; shipped weights: {meta.get('selected', '?')}.")


def render(ctx: Context) -> None:
    ckpt, meta = ctx.checkpoint, ctx.checkpoint.meta
    st.caption(intro(ckpt.config))
    c1, c2 = st.columns(2)
    rows = shape_rows(ckpt.config)
    c1.dataframe(pd.DataFrame({"setting": list(rows), "value": list(rows.values())}).astype(str),
                 hide_index=True, width="stretch")
    counts = ckpt.model.parameter_counts()
    total = sum(n for _, n in counts)
    c2.dataframe(pd.DataFrame({"component": [c for c, _ in counts] + ["total"],
                               "parameters": [f"{n:,}" for _, n in counts] + [f"{total:,}"]}),
                 hide_index=True, width="stretch")
    st.markdown(provenance(meta))
    _training(ctx)
    snapshots_ui(ctx)


def _training(ctx: Context) -> None:
    ckpt = ctx.checkpoint
    try:
        log = read_training_log(ckpt.path) if ckpt.path else []
    except (OSError, ValueError):          # a damaged log: the page shows the rest
        log = []
    if log:
        curves = resources.get_figure("curves", (str(ckpt.path), len(log)), ctx.settings.display,
                                      lambda: figures.training_curves(log))
        chart(st, curves, key="curves", settings=ctx.settings)
    _bleu_table(ckpt)


def _bleu_table(ckpt: Checkpoint) -> None:
    reports = read_eval_reports(ckpt.path) if ckpt.path else []
    for report in reports:
        st.markdown(f"**Test BLEU** ({report_title(report)}, sacrebleu, detokenized, cased)")
        st.dataframe(pd.DataFrame([{"decoding": decoding_name(k, v), "BLEU": v["bleu"],
                                    "BLEU (lowercased)": v.get("bleu_lowercase"), "chrF": v["chrf"]}
                                   for k, v in report["results"].items()]), hide_index=True)
        st.caption(next(iter(report["results"].values()))["bleu_signature"])
    if reports and "decoding" in ckpt.meta:
        d = ckpt.meta["decoding"]
        st.caption(f"Beam search's length penalty α = {d['alpha']:g} was chosen on `{d.get('chosen_on', '?')}` "
                   "(`python -m model.tune`) and is this model's default in the sidebar.")
    _data(ckpt)


def _data(ckpt: Checkpoint) -> None:
    """What the model read: a model knows what it was trained on, and little else."""
    names = corpora(ckpt.meta)
    st.markdown("**Trained on**\n\n" + "\n".join(f"- {CORPORA[name]}" for name in names))
    if ckpt.calibration:
        st.caption(f"Confidence: {ckpt.calibration.note}; a translation is flagged from P(wrong) ≥ "
                   f"{ckpt.calibration.threshold:.2f}.")


def snapshots_ui(ctx: Context) -> None:
    path = ctx.checkpoint.path / "attention_snapshots.json" if ctx.checkpoint.path else None
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
    layer, head = layer_head(c[2:4], cross.shape[0], cross.shape[1], SNAP_LAYER, SNAP_HEAD,
                             default_layer=cross.shape[0] - 1)
    st.markdown(f"Epoch {epoch} output: `{shot['output']}`")
    fig = resources.get_figure("snapshot", (str(path), which, epoch, layer, head), ctx.settings.display,
                               lambda: figures.attention_heatmap(
        cross[layer, head], shot["target_tokens"], shot["source_tokens"], title=f"cross-attention after epoch {epoch}",
        row_title="target", col_title="source"))
    chart(st, fig, key="snap_heatmap", settings=ctx.settings)
