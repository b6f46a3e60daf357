"""What the model used, not only where it looked: the attribution methods of model/analysis/attribution side
by side on the current sentence, each generated token's share from the source, which cross-attention
heads agree with what the model used, and how faithful each method is on this model (measured)."""
from __future__ import annotations

import json

import numpy as np
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

import figures
from app import sentence, what_if
from app.context import Context
from app.settings import declare, flag, layer_head, multiselect, selectbox, toggle
from app.ui import chart, csv_button, lazy_expander, why_box
from figures import captions
from figures.attribution import PREFIX_MARK
from i18n import _, num
from model.analysis.attribution import NOT_ASKED, REGISTRY, Attribution, Cost, Method, methods
from model.analysis.attribution.attention import method_key, raw_attention, value_norm
from model.analysis.attribution.faithfulness import KS, RANDOM

METHODS = declare("attr_methods", None, ())                 # the heatmaps shown (default: below)
INTEGRATED = declare("attr_ig", "ig", True, flag)            # compute integrated gradients
JOINT = tuple(sorted((s.key for s in REGISTRY if s.joint), key=lambda k: k != "alti"))   # ALTI+ first
REFERENCE = declare("attr_reference", "reference", "alti", choices=JOINT)   # what the heads are compared with
LONG = 40                       # generated tokens above which integrated gradients wait for a click
IG_SECONDS_PER_CELL = 0.003     # about: s per generated token x (source + generated) tokens, 2 cores (BENCHMARKS)

def default_methods(n_layers: int) -> list[str]:
    return [method_key("attention", n_layers - 1), "alti", "integrated_gradients"]


def render(ctx: Context) -> None:
    n_layers = ctx.checkpoint.config.n_decoder_layers
    if ctx.settings.projector:          # the front of a room: one row of choices, the words behind "Why?"
        toggles, chooser, words = st.columns([3, 6, 1], vertical_alignment="bottom")
        with why_box(words, "attribution"):
            st.markdown(_(captions.ATTRIBUTION_INTRO))
            _faithfulness(ctx)
    else:
        toggles = chooser = st
        st.caption(_(captions.ATTRIBUTION_INTRO))
        _faithfulness(ctx)
    what_if.why_not_ui(ctx)         # one line while closed; above the heatmaps, where a "Try it" finds it
    att = _attribution(ctx, toggles)
    shown = _methods_ui(att, n_layers, chooser)
    _heatmaps(ctx, att, shown)
    _source_share(ctx, att)
    _heads(ctx, att)
    _one_head(ctx, att)
    _downloads(ctx, att)


def _attribution(ctx: Context, where: DeltaGenerator) -> Attribution:
    label = (_("Integrated gradients (slow)") if ctx.settings.projector   # compact: a label that fits its column
             else _("Integrated gradients (the slowest method: a few seconds)"))
    with_ig = toggle(where, INTEGRATED, label,
                     help=_("Adds up the gradient along a path from all-zero embeddings to the sentence's own; "
                            "computed once per sentence for everyone on this server."))
    ex = ctx.explanation
    generated, source = len(ex.result.tokens) + 1, len(ex.source_ids)
    if with_ig and generated > LONG and not ctx.attribution_ready(Cost.INTEGRATED):
        seconds = IG_SECONDS_PER_CELL * generated * (source + generated)
        with_ig = st.button(_("Compute integrated gradients for this long sentence (about {s} s)").format(
                                s=num(seconds, ".0f")),
                            key="attr_ig_go", icon=":material/play_arrow:")
    bar = st.empty()

    def progress(done: int, total: int) -> None:
        bar.progress(done / total, text=_("integrated gradients: token {done} of {total}").format(done=done,
                                                                                                   total=total))
    with st.spinner(_("Working out what the model used…"), show_time=True):     # others wait for one computation
        att = ctx.attribution(Cost.INTEGRATED if with_ig else Cost.GRADIENT, progress)
    bar.empty()
    for key, why in att.unavailable.items():
        if key in att.methods and why not in NOT_ASKED.values():        # not asked for: the toggle says so
            st.info(f"{att.methods[key].shown()}: {_(why)}.", icon=":material/info:")
    return att


def _methods_ui(att: Attribution, n_layers: int, where: DeltaGenerator) -> list[str]:
    options = list(att.scores)
    chosen = multiselect(where, METHODS, _("Methods side by side"), options, default=[
        m for m in default_methods(n_layers) if m in options], format_func=lambda k: att.methods[k].shown())
    return chosen or options[:1]


def _heatmaps(ctx: Context, att: Attribution, shown: list[str]) -> None:
    columns = st.container(key="attr_heatmaps").columns(2)     # the page's main picture
    for i, key in enumerate(shown):
        where, method = columns[i % 2], att.methods[key]
        src, pre = att.scores[key].normalised()
        fig = ctx.figure("attribution", key, lambda src=src, pre=pre, method=method: figures.attribution_heatmap(
            src, pre, att.source_tokens, att.prefix_tokens, att.generated_tokens, title=method.shown()))
        chart(where, fig, key=f"attr_{key}", settings=ctx.settings)
        where.caption(_caveat(att, key, method))
        csv_button(where, np.concatenate([att.scores[key].source, att.scores[key].prefix], axis=1),
                   att.generated_tokens, att.source_tokens + [PREFIX_MARK + p for p in att.prefix_tokens],
                   f"attribution-{key}")


def _caveat(att: Attribution, key: str, method: Method) -> str:
    parts = [_(method.caveat)]
    if not att.scores[key].joint:
        parts.append(_("Source and output-so-far come from different sublayers: each part is a share of its own."))
    if att.scores[key].signed:
        parts.append(_("Signed scores, shown as their size; the CSV keeps the sign (negative: made the token less "
                       "likely)."))
    if key == "integrated_gradients" and att.ig is not None:
        parts.append(_("Completeness: each row sums to the change of log p from the baseline within {error} (at most "
                       "{n} points per token).").format(error=num(att.ig.completeness_error.max(), ".1%"),
                                                        n=int(att.ig.steps.max())))
    return " ".join(parts)


def _source_share(ctx: Context, att: Attribution) -> None:
    shares = {att.methods[k].shown(): att.scores[k].source_share() for k in JOINT if k in att.scores}
    if not shares:
        return
    st.subheader(_("How much of each token came from the source"))
    fig = ctx.figure("source_share", tuple(shares), lambda: figures.source_share_bars(
        att.generated_tokens, shares, title=_("share of each generated token's attribution that came from the source")))
    chart(st, fig, key="source_share", settings=ctx.settings)
    alti = att.scores.get("alti")
    low = "" if alti is None else ", ".join(
        f"{t} ({v:.0%})" for t, v in zip(att.generated_tokens, alti.source_share()) if v < 0.35)
    st.caption(_("The rest came from the output so far. A token that owes little to the source was written from the "
                 "target language's own habits: fine for an article or a full stop, a warning sign for a content "
                 "word (ALTI+'s low source share is a known sign of a hallucination).")
               + (" " + _("Under 35 % by ALTI+: {tokens}.").format(tokens=low) if low else ""))


def _heads(ctx: Context, att: Attribution) -> None:
    st.subheader(_("Which heads' pictures show what the model used?"))
    options = [k for k in JOINT if k in att.scores]
    reference = selectbox(st, REFERENCE, _("Compare each cross-attention head with"), options,
                          format_func=lambda k: att.methods[k].shown())
    agreement = att.head_agreement(reference)
    if agreement is None:
        st.info(_("Nothing to compare with for this model."))
        return
    fig = ctx.figure("head_agreement", reference, lambda: figures.head_agreement_grid(
        agreement, title=_("correlation of each head's attention with {method}, mean over generated tokens").format(
            method=att.methods[reference].shown())))
    chart(st, fig, key="head_agreement", settings=ctx.settings)
    best = np.unravel_index(np.nanargmax(agreement), agreement.shape) if np.isfinite(agreement).any() else None
    st.caption(_("Near 1: the head's heatmap ranks the source tokens as the attribution does; near 0 or below: its "
                 "picture tells little about what the token used.") + (
                   " " + _("Closest here: layer {layer}, head {head} ({r}).").format(
                       layer=best[0], head=best[1], r=num(agreement[best], ".2f")) if best else ""))


def _one_head(ctx: Context, att: Attribution) -> None:
    """One head's raw weights beside its weights times value size (Kobayashi et al.), same scale."""
    box, is_open = lazy_expander(st, _("One head: its weights, and its weights × the size of what each token sends"),
                                 key="attr_one_head")
    if not is_open:
        return
    with box:
        cfg = ctx.checkpoint.config
        layer, head = layer_head(st.columns(2), cfg.n_decoder_layers, cfg.n_heads)
        columns = st.columns(2)
        pictures = ((raw_attention(att.trace, layer, head),
                     _("Attention, layer {layer}, head {head}").format(layer=layer, head=head)),
                    (value_norm(att.trace, ctx.checkpoint.model, layer, head),
                     _("Attention × value size, layer {layer}, head {head}").format(layer=layer, head=head)))
        for where, (scores, title) in zip(columns, pictures):
            src, pre = scores.normalised()
            fig = ctx.figure("attribution_head", scores.method, lambda src=src, pre=pre, title=title:
                             figures.attribution_heatmap(src, pre, att.source_tokens, att.prefix_tokens,
                                                         att.generated_tokens, title=title))
            chart(where, fig, key=f"attr_{scores.method}", settings=ctx.settings)
        st.caption(_("Left: where the head looked (cross-attention for the source, masked self-attention for the "
                     "output so far). Right: each look scaled by ‖αf(x)‖, the size of what the token sent through the "
                     "head: a strong look at a token that sends little moves nothing."))


def _faithfulness(ctx: Context) -> None:
    measured = ctx.checkpoint.meta.get("faithfulness")
    if not measured:
        st.info(_("How faithful each method is has not been measured for this model: `{command}` measures it.").format(
            command=f"python -m model.attribution.faithfulness --checkpoint {ctx.path} --write"),
            icon=":material/info:")
        return
    drop = measured["drop"]
    labels = {k: m.shown() for k, m in methods(ctx.checkpoint.config.n_decoder_layers).items()}
    labels[RANDOM] = _("random source tokens (control)")
    st.success(headline(measured, labels, method_key("attention", ctx.checkpoint.config.n_decoder_layers - 1)),
               icon=":material/verified:")
    with st.expander(_("Every method's faithfulness on this model")):
        keys = list(drop)
        fig = ctx.figure("faithfulness", None, lambda: figures.faithfulness_bars(
            [labels.get(m, m) for m in keys], np.array([[drop[m][str(k)] for k in KS] for m in keys]),
            np.array([[measured["stderr"][m][str(k)] for k in KS] for m in keys]), KS,
            title=_("drop of log p when a method's top source tokens are hidden (ERASER comprehensiveness)")))
        chart(st, fig, key="faithfulness", settings=ctx.settings)
        st.caption(_("Measured: the mean drop of the teacher-forced log-probability of each generated token of the "
                     "model's own translation when a method's top source tokens are hidden. Mean over {tokens} "
                     "generated tokens in {sentences} sentences, ± one standard error. "
                     "`python -m model.attribution.faithfulness` (BENCHMARKS.md).").format(
            tokens=measured["tokens"], sentences=measured["sentences"]))


def headline(measured: dict, labels: dict[str, str], last_layer: str) -> str:
    """One paragraph for students: what hiding the top token of a few methods costs, and who finds the most."""
    drop = measured["drop"]
    short = {last_layer: _("last-layer attention"), "alti": "ALTI+", "integrated_gradients": _("integrated gradients"),
             RANDOM: _("a random token")}
    shown = [m for m in short if m in drop]
    best = {k: max((m for m in drop if m != RANDOM), key=lambda m: drop[m][k]) for k in ("1", "3")}
    one = "; ".join(_("{drop} for {method}").format(drop=num(drop[m]['1'], ".2f"), method=short[m]) for m in shown)
    return _("**Measured on this model** ({sentences} sentences of {split}): hiding the one source token a method "
             "ranks "
             "first lowers the next token's log-probability by {one}. Most faithful for one token: {best1} ({drop1}); "
             "for three: {best3} ({drop3}). The bigger the drop, the more the method found what the prediction "
             "depended on; differences under about 0.1 are noise.").format(
        sentences=measured["sentences"], split=measured["split"], one=one, best1=labels.get(best["1"], best["1"]),
        drop1=num(drop[best['1']]['1'], ".2f"), best3=labels.get(best["3"], best["3"]),
        drop3=num(drop[best['3']]['3'], ".2f"))


def _downloads(ctx: Context, att: Attribution) -> None:
    st.download_button(_("Download the trace with this attribution (JSON)"), key="dl_attribution", on_click="ignore",
                       data=lambda: json.dumps(sentence.trace_json(ctx.checkpoint, ctx.explanation, ctx.settings,
                                                                   att.ig is not None), ensure_ascii=False),
                       file_name="trace-attribution.json", mime="application/json",
                       help=_("the trace format with its `attribution` part: docs/trace-format.md"))
