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
from app.settings import PRECISION_NAMES, declare, layer_head
from app.ui import chart, why
from i18n import _, language, num
from model.network.config import ModelConfig
from model.storage.card import (
    CORPORA,
    corpora,
    decoding_name,
    read_eval_reports,
    read_training_log,
    report_title,
    shape_rows,
    training_parts,
)
from model.storage.checkpoint import Checkpoint

SNAP_LAYER = declare("snap_layer", None, -1, int)   # -1: the last layer
SNAP_HEAD = declare("snap_head", None, 0, int)
FFN = {"relu": "max(0, xW₁+b₁)W₂+b₂", "gelu": "GELU(xW₁+b₁)W₂+b₂", "swish": "swish(xW₁+b₁)W₂+b₂"}


def intro(cfg: ModelConfig) -> str:
    return _("The model is the paper's encoder-decoder: N identical layers per stack, each with multi-head attention "
             "and a position-wise feed-forward network FFN(x) = {ffn}, each sub-layer wrapped as {wrap}").format(
        ffn=FFN[cfg.activation], wrap="LayerNorm(x + Sublayer(x))." if not cfg.norm_first
        else _("x + Sublayer(LayerNorm(x)) (pre-norm)."))


def provenance(meta: dict) -> str:
    """Where the weights come from: trained here, or imported."""
    if "imported_from" in meta:
        return _("**Imported** from a {origin} model in `{path}` (`python -m model.convert from-hf`); not trained "
                 "here, so no training curves.").format(origin=meta.get("origin", "?"), path=meta["imported_from"])
    parts = training_parts(meta.get("train_args", {}))
    in_parts = _(", in {n} runs (`train.py --init-from` continued the finished weights; the model card README.md "
                 "gives each run's command)").format(n=len(parts) + 1) if parts else ""
    return _("**Trained on** {hardware} in {minutes} minutes, {epochs} epochs{parts}; shipped weights: "
             "{selected}.").format(hardware=meta.get("hardware", "?"), minutes=meta.get("training_time_min", "?"),
                                   epochs=meta.get("epochs", "?"), parts=in_parts, selected=meta.get("selected", "?"))


def render(ctx: Context) -> None:
    ckpt, meta = ctx.checkpoint, ctx.checkpoint.meta
    why(st, intro(ckpt.config), ctx.settings.projector, "card")
    if ctx.settings.projector:          # the front of a room: the training curves first, the tables after
        _training(ctx)
    c1, c2 = st.columns(2)
    rows = shape_rows(ckpt.config)
    c1.dataframe(pd.DataFrame({_("setting"): list(rows), _("value"): list(rows.values())}).astype(str),
                 hide_index=True, width="stretch")
    counts = ckpt.model.parameter_counts()
    total = sum(n for _c, n in counts)
    c2.dataframe(pd.DataFrame({_("component"): [_(c) for c, _n in counts] + [_("total")],
                               _("parameters"): [num(n, ",") for _c, n in counts] + [num(total, ",")]}),
                 hide_index=True, width="stretch")
    st.markdown(provenance(meta))
    if (served := meta.get("precision")) and "identical" in served:   # issue 43: how its sentences are computed
        shown = _("This session shows it.") if ctx.precision == served["scheme"] else \
            _("This session shows plain fp32 (the sidebar's toggle).")
        st.markdown(_("**Served as** {what}: translations identical to plain fp32's on {shares} (`python -m "
                      "model.precision`), one sentence {before} → {after} ms.").format(
            what=_(PRECISION_NAMES.get(served["scheme"], served["scheme"])),
            shares=", ".join(f"{num(v, '.1%')} {k}" for k, v in served["identical"].items()),
            before=num(served["one_sentence_ms"]["fp32"], ".0f"),
            after=num(served["one_sentence_ms"].get(served["scheme"], 0), ".0f")) + " " + shown)
    if hand := meta.get("hand_check"):         # issue 40: what a teacher would see on sentences of normal length
        st.markdown(_("**Judged by hand:** {right} of {of} everyday sentences of {words} words, written by hand and "
                      "in no data set, came back right (`{table}`).").format(**hand))
    if not ctx.settings.projector:
        _training(ctx)
    snapshots_ui(ctx)


def _training(ctx: Context) -> None:
    ckpt = ctx.checkpoint
    try:
        log = read_training_log(ckpt.path) if ckpt.path else []
    except (OSError, ValueError):          # a damaged log: the page shows the rest
        log = []
    if log:
        curves = resources.get_figure("curves", (str(ckpt.path), len(log)), ctx.settings.display, language(),
                                      lambda: figures.training_curves(log))
        chart(st, curves, key="curves", settings=ctx.settings)
    _bleu_table(ckpt, ctx)


def _bleu_table(ckpt: Checkpoint, ctx: Context) -> None:
    reports = read_eval_reports(ckpt.path) if ckpt.path else []
    _by_length(ckpt, reports, ctx)
    for report in reports:
        st.markdown(_("**Test BLEU** ({report}, sacrebleu, detokenized, cased)").format(report=report_title(report)))
        st.dataframe(pd.DataFrame([{_("decoding"): decoding_name(k, v), "BLEU": v["bleu"],
                                    _("BLEU (lowercased)"): v.get("bleu_lowercase"), "chrF": v["chrf"]}
                                   for k, v in report["results"].items()]), hide_index=True)
        st.caption(next(iter(report["results"].values()))["bleu_signature"])
    if reports and "decoding" in ckpt.meta:
        d = ckpt.meta["decoding"]
        st.caption(_("Beam search's length penalty α = {alpha} was chosen on `{split}` (`python -m model.tune`) "
                     "and is this model's default in the sidebar.").format(alpha=num(d['alpha'], "g"),
                                                                         split=d.get("chosen_on", "?")))
    _data(ckpt)


def _by_length(ckpt: Checkpoint, reports: list[dict], ctx: Context) -> None:
    """Each test set's beam-search BLEU by the source's length in words, as one chart."""
    series = [(report_name(r), rows) for r in reports
              for name, result in r["results"].items() if name.startswith("beam") and (rows := result.get("by_length"))]
    if series:
        key = (str(ckpt.path), tuple((name, tuple(row["bleu"] for row in rows)) for name, rows in series))
        fig = resources.get_figure("bleu_by_length", key, ctx.settings.display, language(),
                                   lambda: figures.bleu_by_length(series))
        chart(st, fig, key="bleu_by_length", settings=ctx.settings)


def report_name(report: dict) -> str:
    """A test set's short name for a chart's legend: its data folder and split."""
    return report_title({**report, "references": "line"}).replace("`", "")


def _data(ckpt: Checkpoint) -> None:
    """What the model read: a model knows what it was trained on, and little else."""
    names = corpora(ckpt.meta)
    st.markdown(_("**Trained on**") + "\n\n" + "\n".join(f"- {_(CORPORA[name])}" for name in names))
    if ckpt.calibration:
        st.caption(_("Confidence: a translation is flagged from P(wrong) ≥ {threshold} "
                     "(calibration: `{note}`).").format(
            threshold=num(ckpt.calibration.threshold, ".2f"), note=ckpt.calibration.note))


def snapshots_ui(ctx: Context) -> None:
    path = ctx.checkpoint.path / "attention_snapshots.json" if ctx.checkpoint.path else None
    if not path or not path.is_file():
        return
    snaps = json.loads(path.read_text())
    if not snaps:
        return
    st.subheader(_("How attention formed during training"))
    sentences = [s["source"] for s in snaps[0]["sentences"]]
    c = st.columns(4)
    which = c[0].selectbox(_("Sentence"), range(len(sentences)), format_func=sentences.__getitem__, key="snap_sentence")
    epochs = [s["epoch"] for s in snaps]
    epoch = c[1].select_slider(_("Epoch"), epochs, value=epochs[-1], key="snap_epoch")
    shot = next(s for s in snaps if s["epoch"] == epoch)["sentences"][which]
    cross = np.array(shot["cross"])  # (L, H, T, S)
    layer, head = layer_head(c[2:4], cross.shape[0], cross.shape[1], SNAP_LAYER, SNAP_HEAD,
                             default_layer=cross.shape[0] - 1)
    st.markdown(_("Epoch {epoch} output: `{output}`").format(epoch=epoch, output=shot["output"]))
    fig = resources.get_figure("snapshot", (str(path), which, epoch, layer, head), ctx.settings.display, language(),
                               lambda: figures.attention_heatmap(
        cross[layer, head], shot["target_tokens"], shot["source_tokens"],
        title=_("cross-attention after epoch {epoch}").format(epoch=epoch),
        row_title=_("target"), col_title=_("source")))
    chart(st, fig, key="snap_heatmap", settings=ctx.settings)
