"""What if it had said another word here, and why did it not? (issue 54) The step page: at any step, force another
candidate (one of the top-k, or any word typed) and decoding goes on from that start with the chosen method;
the original and the forced translation side by side, their first difference marked.

The forced start is a setting like any other (app/settings.py FORCED: the target pieces, in the link), so a
following class sees it and the sidebar's options apply to it; every page then shows the forced translation
(the translation box says so), until "Back to the model's own". And on "What the model used": why the model
wrote its token at a position and not another (model/analysis/attribution/contrast.py).
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

import figures
from app import resources, state
from app.context import Context
from app.settings import EDITED, FORCED, MAX_TEXT_CHARS, METHOD_NAMES, forced_pieces, text_input
from app.ui import chart, lazy_expander
from i18n import _, ngettext, num
from model.analysis.attribution.contrast import CAVEATS, LABELS, alternative_id, alternatives
from model.analysis.readings import aligned, first_divergence
from model.inference.decoding import HypothesisRecord
from model.inference.options import DecodeOptions
from model.inference.pipeline import InputError, forced_ids
from model.network.kinds import AttentionKind
from model.storage.checkpoint import Checkpoint

TYPED = "what_if_word"              # the word typed to force (a widget's own key, not a setting)
CANDIDATE = "what_if_candidate"
# the lazy expanders' keys, and the "why not" widgets' (app/try_it.py sets them)
WHY_BOX, WHY_POSITION, WHY_TYPED = "why_not", "why_position", "why_typed"
COMPARE_BOX = "explore_compare"


def _force(pieces: list[str]) -> None:
    state.choose_next_run(FORCED.name, " ".join(pieces))


def _clear() -> None:
    state.choose_next_run(FORCED.name, "")


def clear_button(where: DeltaGenerator, key: str = "what_if_clear") -> None:
    """The way back from a forced start."""
    where.button(_("Back to the model's own"), key=key, on_click=_clear, icon=":material/undo:")


def force_ui(ckpt: Checkpoint, hyp: HypothesisRecord, chosen_token: int | None, t: int) -> None:
    """Under a step's next-token chart: another of its candidates, or a typed word, forced at this step."""
    pieces = ckpt.tgt_tokenizer.pieces
    so_far = pieces(hyp.tokens[1:])                    # the output before this step (forced ones included)
    others = [tok for tok, _p in hyp.top_k if tok != chosen_token]
    box = st.expander(_("What if it had said another word here?"), icon=":material/alt_route:")
    left, right = box.columns(2)
    shown = lambda tok: _("(choose)") if tok is None else figures.label(pieces([tok])[0])  # noqa: E731
    candidate = left.selectbox(_("One of its candidates"), [None, *others], key=f"{CANDIDATE}_{t}", format_func=shown)
    typed = right.text_input(_("or any word"), key=f"{TYPED}_{t}", max_chars=60,
                             placeholder=_("e.g. {word}").format(word="Die"))
    if not box.button(_("Force it and decode on"), key=f"what_if_go_{t}", icon=":material/play_arrow:",
                      disabled=candidate is None and not typed.strip()):
        return
    try:
        added = pieces(forced_ids(ckpt, typed)) if typed.strip() else pieces([candidate])
    except InputError as exc:
        box.warning(str(exc))
        return
    _force(so_far + added)
    st.rerun()


def forced_banner(ckpt: Checkpoint, path: str, text: str, opts: DecodeOptions, precision: str) -> None:
    """When a start is forced: what was forced, the model's own translation beside the forced one with the
    first difference marked, and the way back."""
    pieces = forced_pieces()
    if not pieces:
        return
    box = st.container(border=True, key="what_if_banner")
    if not opts.prefix:
        box.warning(_("The forced start “{start}” has pieces this model does not know; it is not used.").format(
            start=" ".join(pieces)))
        clear_button(box)
        return
    decode = ckpt.tgt_tokenizer.decode
    own = resources.get_explanation(path, text, replace(opts, prefix=()), precision=precision)
    forced = resources.get_explanation(path, text, opts, precision=precision)
    box.markdown(ngettext("**What if:** the translation is forced to start with “{start}” ({n} token), then "
                          "{method} decoding goes on.",
                          "**What if:** the translation is forced to start with “{start}” ({n} tokens), then "
                          "{method} decoding goes on.", len(opts.prefix)).format(
        start=decode(opts.prefix), n=len(opts.prefix), method=_(METHOD_NAMES[opts.method])))
    side_by_side(box, ckpt, ((_("the model's own"), own.result.tokens), (_("forced"), forced.result.tokens)))
    clear_button(box)


def side_by_side(where: DeltaGenerator, ckpt: Checkpoint, outputs: tuple[tuple[str, list[int]], ...]) -> None:
    """Two translations' tokens side by side, the first that differs in red, and where it is."""
    (_n, a), (_m, b) = outputs
    at = first_divergence(a, b)
    columns = where.columns(2)
    for col, (name, tokens) in zip(columns, outputs):
        shown = [f"**:red[{figures.label(p)}]**" if i == at else figures.label(p)
                 for i, p in enumerate(ckpt.tgt_tokenizer.pieces(tokens))]
        col.markdown(f"**{name}:** " + " ".join(shown))
        col.caption(ckpt.tgt_tokenizer.decode(tokens))
    where.caption(_("identical") if at is None else
                  _("first different token at output position {i} (in red)").format(i=at))


def compare_ui(ctx: Context, kind: AttentionKind, layer: int) -> None:
    """Change one word of the sentence and compare: both translations, where they first differ, and how the
    attention of this kind and layer (heads averaged) changed on the tokens both sentences share."""
    box, is_open = lazy_expander(st, _("Change a word and compare"), key=COMPARE_BOX)
    if not is_open:
        return
    ex = ctx.explanation
    edited = text_input(box, EDITED, _("The sentence with a word changed"), default=ex.text, max_chars=MAX_TEXT_CHARS)
    if not edited.strip() or edited.strip() == ex.text.strip():
        box.caption(_("Change a word above (cat for dog, she for he) and press Enter."))
        return
    try:
        other = resources.get_explanation(ctx.path, edited.strip(), ctx.settings.opts, precision=ctx.precision)
    except InputError as exc:
        box.warning(_("The changed sentence: {why}").format(why=exc))
        return
    side_by_side(box, ctx.checkpoint, ((_("original"), ex.result.tokens), (_("changed"), other.result.tokens)))
    sides = [(t.tokens(kind.query_side), t.tokens(kind.key_side)) for t in (ex.trace, other.trace)]
    rows, cols = aligned(sides[0][0], sides[1][0]), aligned(sides[0][1], sides[1][1])
    if not rows or not cols:
        box.caption(_("The two sentences share no tokens on this attention's sides: nothing to compare."))
        return
    maps = [t.attention(kind.name)[layer, 0].mean(0).numpy() for t in (ex.trace, other.trace)]   # (Tq, Tk) each
    diff = (maps[1][np.ix_([j for _i, j in rows], [j for _i, j in cols])]
            - maps[0][np.ix_([i for i, _j in rows], [i for i, _j in cols])])
    fig = ctx.figure("compare", (edited, kind.name, layer), lambda: figures.attention_difference(
        diff, [sides[0][0][i] for i, _j in rows], [sides[0][1][i] for i, _j in cols],
        _("{kind}, layer {layer}, heads averaged: changed − original").format(kind=_(kind.label), layer=layer),
        _("{side} (query)").format(side=_(kind.query_side)), _("{side} (key)").format(side=_(kind.key_side))))
    chart(box, fig, key="compare_chart", settings=ctx.settings)
    box.caption(_("Only the tokens both sentences have are compared (the changed word's are left out); red: the "
                  "changed sentence attends more, blue: less. The explorer's kind and layer choose the map."))


def why_not_ui(ctx: Context) -> None:
    """"What the model used", asked as a contrast: why its token at a position and not another one."""
    box, is_open = lazy_expander(st, _("Why this word and not another?"), key=WHY_BOX)
    if not is_open:
        return
    ckpt, ex = ctx.checkpoint, ctx.explanation
    pieces = ckpt.tgt_tokenizer.pieces
    generated = pieces(ex.result.tokens + [ckpt.config.eos_id])
    c1, c2, c3 = box.columns(3)
    position = c1.selectbox(_("Output position"), range(len(generated)), key=WHY_POSITION,
                            format_func=lambda i: f"{i}: {figures.label(generated[i])}")
    offered = alternatives(ckpt, ex.source_ids, ex.result.tokens, position)
    picked = c2.selectbox(_("and not"), offered, key=f"why_alternative_{position}",
                          format_func=lambda tok: figures.label(pieces([tok])[0]))
    typed = c3.text_input(_("or another word (one token)"), key=WHY_TYPED, max_chars=40)
    try:
        alternative = alternative_id(ckpt, typed) if typed.strip() else picked
        with box, st.spinner(_("Working out why…"), show_time=True):
            c = resources.get_contrast(ckpt, ex, ctx.figure_key, position, alternative)
    except InputError as exc:
        box.warning(str(exc))
        return
    box.markdown(_("log p({chosen}) − log p({other}) = {d}: the model preferred {chosen} by a factor of {factor}. "
                   "Each method splits that difference over the inputs.").format(
        chosen=f"`{c.chosen_token}`", other=f"`{c.alternative_token}`", d=num(c.difference, ".2f"),
        factor=num(math.exp(min(c.difference, 50)), ",.0f")))
    keys = list(c.scores)
    title = _("why {chosen} and not {other}").format(chosen=figures.label(c.chosen_token),
                                                       other=figures.label(c.alternative_token))
    fig = ctx.figure("why_not", (position, alternative), lambda: figures.contrast_heatmap(
        [_(LABELS[k]) for k in keys], np.stack([c.scores[k][0] for k in keys]),
        np.stack([c.scores[k][1] for k in keys]), c.source_tokens, c.prefix_tokens, title=title))
    chart(box, fig, key="why_not_chart", settings=ctx.settings)
    for k in keys:
        note = _(CAVEATS[k])
        if k == "integrated_gradients":
            note += " " + _("Completeness error {error} ({n} points).").format(
                error=num(c.ig_completeness_error, ".1%"), n=c.ig_points)
        box.caption(f"**{_(LABELS[k])}**: {note}")
