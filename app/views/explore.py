"""Translate and explore the attention of every layer and head."""

from __future__ import annotations

import numpy as np
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

import figures
from app import attention_charts, classroom, polls, state, what_if
from app.context import Context
from app.settings import (
    HEAD,
    LAYER,
    declare,
    flag,
    index,
    layer_head,
    layer_head_owned,
    multiselect,
    radio,
    selectbox,
    toggle,
)
from app.ui import chart, csv_button, fragment, lazy_expander, tokens_for, why
from i18n import N_, _
from model.analysis.readings import rollout as attention_rollout
from model.analysis.readings import summed_attention, whole_words
from model.network.kinds import ATTENTION_KINDS, KIND_NAMES, AttentionKind

KIND = declare("kind", "kind", "cross", choices=KIND_NAMES)
QUERY = declare("query", "query", None, index)          # the row highlighted
SEVERAL = declare("several", None, ())                  # tokens whose attention is summed (bertviz #125)
SEVERAL_SIDE = declare("several_side", None, "keys", choices=("keys", "queries"))
WHOLE_WORDS = declare("several_words", None, True, flag)
SEVERAL_BOX = "explore_several"                         # its lazy expander's key

ROLLOUT_CAPTION = N_(
    "Rollout multiplies the head-averaged attention of each layer, counting the residual connection as half of "
    "each token's input: how much each input token reaches each position after the whole encoder."
)


def render(ctx: Context) -> None:
    explorer(ctx)


@fragment
def explorer(ctx: Context) -> None:
    """Everything the explorer's own widgets change. A fragment: a kind change reruns only this, not the sidebar,
    the sentence and its translation; a layer, head or row change (and the chart's head menu) reruns only the
    chosen head's fragment inside it (`_head`: each student of a class clicks through heads, issue 53)."""
    _explore(ctx)
    classroom.end_of_run(ctx.site)   # a fragment's rerun does not reach main(), which writes the link otherwise


def _explore(ctx: Context) -> None:
    ex, settings = ctx.explanation, ctx.settings
    compact = settings.projector           # the front of a room: every picker in one row, the picture first
    row = st.columns([5, 2, 2, 4, 2], vertical_alignment="bottom") if compact else None
    name = kind_picker(row[0] if compact else st, compact)
    kind = ATTENTION_KINDS[name]
    rows, cols = tokens_for(ex.trace, kind.query_side), tokens_for(ex.trace, kind.key_side)
    attn = ex.trace.attention(name)[:, 0].numpy()  # (L, H, Tq, Tk)
    why(row[4] if compact else st, _(kind.caption), compact, "explore")
    state.hold(state.HEAD_INLINE, True)    # the head's fragment runs inside this run, which ends it (end_of_run)
    m = classroom.membership()
    local = attention_charts.browser_chooses(settings, m is not None and (m.teacher or m.following),
                                             bool(state.widget(what_if.COMPARE_BOX)))
    try:
        _head(ctx, row[1:4] if compact else st.columns([2, 1]) if local else st.columns(3), attn, rows, cols, kind,
              local)
    finally:
        state.hold(state.HEAD_INLINE, False)
    layer = state.widget(LAYER.name, 0)
    state.hold(state.BLOCKS_LAYER, layer)
    if not polls.answer_hidden(polls.HEAD_TARGET):
        _averages(ctx, attn, rows, cols, kind)
        _several(ctx, attn, rows, cols, kind)
        what_if.compare_ui(ctx, kind, layer)


@fragment
def _head(ctx: Context, pickers: list[DeltaGenerator], attn: np.ndarray, rows: list[str], cols: list[str],
          kind: AttentionKind, local: bool = False) -> None:
    """The chosen head: the layer, head and row pickers (in `pickers`, the explorer's columns), both charts and the
    head's tools. A fragment inside the explorer's: a layer, head or row change reruns only this, 8-19 % cheaper
    alone than the explorer's run and 21 messages instead of 27 (issue 53; BENCHMARKS.md, session 48). `local`:
    the browser draws the layer and head pickers, in the first of two columns, and chooses by itself
    (app/attention_charts.py)."""
    ex, settings = ctx.explanation, ctx.settings
    alone = not state.held(state.HEAD_INLINE)
    if local:
        (both, c3), n_layers, n_heads = pickers, attn.shape[0], attn.shape[1]
        state.hold(state.PICKERS_INLINE, True)
        try:
            _pickers(ctx, both, n_layers, n_heads)
        finally:
            state.hold(state.PICKERS_INLINE, False)
        layer, head = layer_head_owned(n_layers, n_heads)
    else:
        c1, c2, c3 = pickers
        layer, head = layer_head((c1, c2), attn.shape[0], attn.shape[1])
    if alone and layer != state.held(state.BLOCKS_LAYER) and state.widget(what_if.COMPARE_BOX):
        st.rerun(scope="app")           # "change a word", open below, compares the chosen layer: draw it again
    picked = selectbox(c3, QUERY, _("Highlight the row of token"), [None, *range(len(rows))],
                       format_func=lambda i: _("(none)") if i is None else f"{i}: {rows[i]}", placeholder=_("(none)"))
    if picked is not None:
        polls.offer_head_target_poll(ex.text, kind.label, layer, head, rows[picked], cols,
                                     attn[layer, head, picked].tolist())
    if polls.answer_hidden(polls.HEAD_TARGET):
        st.info(_("The attention maps are hidden while the class answers “Where will this head look?”."),
                icon=":material/visibility_off:")
    else:
        left, right = st.columns([3, 2])
        attention_charts.draw((left, right), attn, rows, cols, (layer, head), {
            "title": _("{kind}: every layer × head").format(kind=_(kind.label)),
            "row_title": _("{side} (query)").format(side=_(kind.query_side)),
            "col_title": _("{side} (key)").format(side=_(kind.key_side))}, settings, picked, _pick,
            _csv(rows, cols, kind, attn.shape[:2]) if local else None)
        _head_tools(ctx, right, attn, rows, cols, kind, (layer, head), csv=not local)
        if picked is not None:
            chart(st, ctx.figure("row", (kind.name, picked),
                                 lambda: figures.row_across_heads(attn, picked, cols, rows[picked])),
                  key="row", settings=settings)
    if alone:                           # this fragment's own run: nothing around it ends it
        classroom.end_of_run(ctx.site)


@fragment
def _pickers(ctx: Context, where: DeltaGenerator, n_layers: int, n_heads: int) -> None:
    """The browser's layer and head pickers (app/attention_charts.py). A fragment of its own: what the browser tells
    of its choice (a pick) reruns only this, which writes the link; the charts, which drew the choice already,
    and whatever else needs the head take it from its owner when they run next."""
    attention_charts.pickers(where, layer_head_owned(n_layers, n_heads), n_layers, n_heads, _pick)
    if not state.held(state.PICKERS_INLINE):
        classroom.end_of_run(ctx.site)


def kind_picker(where: DeltaGenerator, compact: bool) -> str:
    """The attention kind: a row of radio buttons, or in compact mode a list that fits one column."""
    label, shown = _("Attention kind"), lambda k: _(ATTENTION_KINDS[k].label)
    if compact:
        return selectbox(where, KIND, label, KIND_NAMES, format_func=shown)
    return radio(where, KIND, label, format_func=shown, horizontal=True)


def _head_tools(ctx: Context, where: DeltaGenerator, attn: np.ndarray, rows: list[str], cols: list[str],
                kind: AttentionKind, layer_head: tuple[int, int], csv: bool = True) -> None:
    """Under the chosen head's chart: its numbers as CSV (else the browser's chart offers them), and the way to
    what it does over a whole test set."""
    layer, head = layer_head
    if csv:
        csv_button(where, attn[layer, head], rows, cols, _csv_name(kind, layer, head))
    if where.button(_("This head across the corpus"), key="explore_corpus", icon=":material/view_module:",
                    help=_("what this head does over a whole test set: its role, profile and knockout cost")):
        ctx.open("heads")


def _csv_name(kind: AttentionKind, layer: int, head: int) -> str:
    return f"{kind.name}-layer{layer}-head{head}"


def _csv(rows: list[str], cols: list[str], kind: AttentionKind, shape: tuple[int, int]) -> dict:
    """What the browser's CSV button of the chosen head needs (app/attention_charts.py): its words, every head's
    file name, the tokens."""
    return {"label": _("Download {name}.csv"), "rows": rows, "cols": cols,
            "names": [_csv_name(kind, k // shape[1], k % shape[1]) for k in range(shape[0] * shape[1])]}


def _pick(layer: int, head: int) -> None:
    """The head the chart's menu shows becomes the chosen one (before the pickers are drawn)."""
    state.set_widget(LAYER.name, layer)
    state.set_widget(HEAD.name, head)


def _averages(ctx: Context, attn: np.ndarray, rows: list[str], cols: list[str], kind: AttentionKind) -> None:
    settings, rollout = ctx.settings, kind.name == "encoder_self"
    box, is_open = lazy_expander(st, _("Head average per layer and attention rollout") if rollout
                                 else _("Head average per layer"), key="explore_averages")
    if not is_open:
        return
    with box:
        mean = ctx.figure("mean", kind.name, lambda: figures.attention_grid(
            attn.mean(axis=1)[None], rows, cols, title=_("mean over heads"), row_names=[_("mean")],   # (1, L, Tq, Tk)
            col_names=[_("layer {i}").format(i=i) for i in range(attn.shape[0])]))
        chart(st, mean, key="mean", settings=settings)
        if rollout:
            st.caption(_(ROLLOUT_CAPTION))
            fig = ctx.figure("rollout", (), lambda: figures.attention_heatmap(
                attention_rollout(attn), rows, cols, title=_("attention rollout through the encoder")))
            chart(st, fig, key="rollout", settings=settings)


def _several(ctx: Context, attn: np.ndarray, rows: list[str], cols: list[str], kind: AttentionKind) -> None:
    """Several tokens at once (a word of several pieces, a phrase): for every layer and head, the attention
    summed over them."""
    box, is_open = lazy_expander(st, _("Several tokens at once"), key=SEVERAL_BOX)
    if not is_open:
        return
    side = radio(box, SEVERAL_SIDE, _("Sum"), horizontal=True, format_func=lambda s: {
        "keys": _("the attention each token pays to them (keys)"),
        "queries": _("where they look, averaged (queries)")}[s])
    tokens = cols if side == "keys" else rows
    c1, c2 = box.columns([4, 1], vertical_alignment="bottom")
    picked = multiselect(c1, SEVERAL, _("Tokens"), range(len(tokens)), format_func=lambda i: f"{i}: {tokens[i]}")
    whole = toggle(c2, WHOLE_WORDS, _("whole words"), help=_("add the other pieces of each chosen word"))
    if not picked:
        box.caption(_("Choose one or more tokens: a word of several pieces, or a phrase."))
        return
    chosen = whole_words(tokens, picked) if whole else sorted(picked)
    summed = summed_attention(attn, chosen, side)                  # (L, H, T)
    names = " ".join(figures.label(tokens[i]) for i in chosen)
    other = rows if side == "keys" else cols
    fig = ctx.figure("several", (kind.name, side, tuple(chosen)), lambda: figures.heads_by_token(
        summed, other, _("attention to {tokens}, in every head").format(tokens=names) if side == "keys"
        else _("where {tokens} look, in every head").format(tokens=names),
        _("{side} (query)").format(side=_(kind.query_side)) if side == "keys"
        else _("{side} (key)").format(side=_(kind.key_side))))
    chart(box, fig, key="several_chart", settings=ctx.settings)
    box.caption(_("Each row is one head; summed over the chosen keys a row's cells are each query's share of "
                  "attention on them (0 to 1); averaged over the chosen queries they are where those tokens look."))
