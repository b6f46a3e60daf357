"""Model card and training: sizes, parameters per component, curves, BLEU, and how
attention formed over the epochs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import streamlit as st

from app import figures
from app.analysis import parameter_counts
from app.context import Context
from app.settings import SNAP_HEAD, SNAP_LAYER, layer_head
from app.ui import chart
from model.card import EVAL_RESULTS, decoding_name, training_parts
from model.checkpoint import Checkpoint
from model.config import ModelConfig

FFN = {"relu": "max(0, xW₁+b₁)W₂+b₂", "gelu": "GELU(xW₁+b₁)W₂+b₂", "swish": "swish(xW₁+b₁)W₂+b₂"}


def intro(cfg: ModelConfig) -> str:
    return (f"The model is the paper's encoder-decoder: N identical layers per stack, each with multi-head attention "
            f"and a position-wise feed-forward network FFN(x) = {FFN[cfg.activation]}, each sub-layer wrapped as "
            + ("LayerNorm(x + Sublayer(x))." if not cfg.norm_first else "x + Sublayer(LayerNorm(x)) (pre-norm)."))


def _read_json_lines(path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line]
    except (OSError, json.JSONDecodeError):
        return []


def config_rows(cfg: ModelConfig) -> dict[str, object]:
    """The model's shape, as a student reads it."""
    return {
        "d_model": cfg.d_model, "heads": cfg.n_heads, "d_k = d_model / heads": cfg.d_head,
        "encoder layers": cfg.n_encoder_layers, "decoder layers": cfg.n_decoder_layers, "d_ff": cfg.d_ff,
        "dropout": cfg.dropout, "norm": "pre-norm" if cfg.norm_first else "post-norm (paper)",
        "vocabulary": f"{cfg.src_vocab_size} ({'joint' if cfg.tie_embeddings else 'separate'})",
        "max positions": cfg.max_positions,
        "FFN activation": cfg.activation + (" (paper)" if cfg.activation == "relu" else ""),
        "positional encoding": "sin/cos interleaved (paper)" if cfg.pe_layout == "interleaved"
        else "all sines, then all cosines (Marian)",
        "embeddings × √d_model": "yes (paper)" if cfg.scale_embedding else "no",
        "output bias": "yes (Marian's final_logits_bias)" if cfg.logits_bias else "no (paper)",
        "decoder start symbol": "<pad> (Marian)" if cfg.bos_id == cfg.pad_id else "<s>",
    }


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
    rows = config_rows(ckpt.config)
    c1.dataframe(pd.DataFrame({"setting": list(rows), "value": list(rows.values())}).astype(str),
                 hide_index=True, width="stretch")
    counts = parameter_counts(ckpt.model)
    total = sum(n for _, n in counts)
    c2.dataframe(pd.DataFrame({"component": [c for c, _ in counts] + ["total"],
                               "parameters": [f"{n:,}" for _, n in counts] + [f"{total:,}"]}),
                 hide_index=True, width="stretch")
    st.markdown(provenance(meta))
    _training(ctx)
    snapshots_ui(ctx)


def _training(ctx: Context) -> None:
    ckpt = ctx.checkpoint
    log = _read_json_lines(ckpt.path / "training_log.jsonl") if ckpt.path else []
    if log:
        chart(st, figures.training_curves(log, font_size=ctx.settings.font_size), key="curves",
              settings=ctx.settings)
    _bleu_table(ckpt)


def _bleu_table(ckpt: Checkpoint) -> None:
    path = ckpt.path / EVAL_RESULTS if ckpt.path else None
    if not path or not path.is_file():
        return
    ev = json.loads(path.read_text())
    st.markdown(f"**Test BLEU** (`{ev['split']}`, sacrebleu, detokenized, cased)")
    st.dataframe(pd.DataFrame([{"decoding": decoding_name(k, v), "BLEU": v["bleu"], "chrF": v["chrf"]}
                               for k, v in ev["results"].items()]), hide_index=True)
    caption = next(iter(ev["results"].values()))["bleu_signature"]
    if "decoding" in ckpt.meta:
        d = ckpt.meta["decoding"]
        caption += (f". Beam search's length penalty α = {d['alpha']:g} was chosen on `{d.get('chosen_on', '?')}` "
                    "(`python -m model.tune`) and is this model's default in the sidebar.")
    st.caption(caption)


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
    fig = figures.attention_heatmap(cross[layer, head], shot["target_tokens"], shot["source_tokens"],
                                    title=f"cross-attention after epoch {epoch}", row_title="target",
                                    col_title="source", colorscale=ctx.settings.colorscale,
                                    font_size=ctx.settings.font_size)
    chart(st, fig, key="snap_heatmap", settings=ctx.settings)
