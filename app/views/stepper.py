"""Step through greedy / beam / sampled decoding, token by token."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Protocol

import numpy as np
import plotly.graph_objects as go
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

import figures
from app import classroom, polls, state, what_if
from app.context import Context
from app.links import Site
from app.settings import SidebarChoices, declare, flag, toggle
from app.state import StepCursor
from app.ui import chart, fragment, lazy_expander, why
from figures import captions
from i18n import _, num
from model.analysis.attribution import Attribution, Cost
from model.analysis.readings import chosen_token, tree_until
from model.inference.confidence import LOW_TOKEN_PROB
from model.inference.decoding import StepRecord
from model.inference.pipeline import Explanation
from model.storage.checkpoint import Checkpoint


class Stepping(Protocol):
    """What the step-through needs of its caller: a page's `Context`, or the training lab's model
    (app/views/lab.py's `LabStepping`), which is in no checkpoint directory."""
    checkpoint: Checkpoint
    settings: SidebarChoices
    site: Site | None

    @property
    def path(self) -> str: ...

    @property
    def explanation(self) -> Explanation: ...

    @property
    def greedy(self) -> Explanation: ...

    @property
    def cursor(self) -> StepCursor: ...

    def figure(self, name: str, key: Hashable, build: Callable[[], go.Figure], cache: bool = True) -> go.Figure: ...

    def attribution(self, upto: Cost, on_progress: Callable[[int, int], None] | None = None) -> Attribution: ...


ALL_PRUNED = declare("all_pruned", None, False)     # the pruned candidates of every step
STEP_USED_CHART = declare("step_used_chart", "used_chart", False, flag)   # the step's attribution as a chart too
PLAY_DELAY_S = 0.7


def _slid(cursor: StepCursor) -> None:
    cursor.slide(state.widget(cursor.slider_key))


def controls(cursor: StepCursor, n_steps: int, why_text: str | None = None) -> int:
    """Reset / previous / next / play and a slider over steps 0..n_steps-1, in one row whose buttons are
    as wide as their names (and, in compact mode, the page's "Why?"). The buttons act on the cursor in
    callbacks, before the page is drawn, so their disabled states are current."""
    step = cursor.step
    row = st.container(horizontal=True, vertical_alignment="bottom", key="step_controls")
    row.button(_("Reset"), key="reset", icon=":material/first_page:", on_click=cursor.reset)
    row.button(_("Prev"), key="prev", icon=":material/chevron_left:", disabled=step == 0, shortcut="Left",
               help=_("keyboard: ←"), on_click=cursor.move, args=(-1, n_steps))
    row.button(_("Next"), key="next", icon=":material/chevron_right:", disabled=step >= n_steps - 1,
               shortcut="Right", help=_("keyboard: →"), on_click=cursor.move, args=(1, n_steps))
    row.button(_("Pause") if cursor.playing else _("Play"), key="play",
               icon=":material/pause:" if cursor.playing else ":material/play_arrow:", on_click=cursor.toggle_play)
    if n_steps > 1:
        row.slider(_("Step"), 0, n_steps - 1, value=step, key=cursor.slider_key, on_change=_slid, args=(cursor,))
    if why_text is not None:
        why(row, why_text, True, "step")
    return step


def _caption(ctx: Stepping) -> str:
    return _(captions.DECODING[ctx.settings.opts.method]) + " " + _("Keyboard: ← and → step.")


def render(ctx: Context) -> None:
    if not ctx.settings.projector:
        st.caption(_caption(ctx))
    stepping(ctx)
    _token_confidence(ctx)       # outside the fragment: Next does not send it again


@fragment
def stepping(ctx: Stepping) -> None:
    """Everything a step changes. A fragment: Prev / Next / Play / the slider rerun only this,
    not the sidebar, the sentence and its translation (a class on one link steps together)."""
    if ctx.site is not None:         # a page's (not the lab's): a follower's next step is heard and applied here
        classroom.follow_here()
    ex, settings = ctx.explanation, ctx.settings
    steps = ex.result.steps
    cursor = ctx.cursor
    cursor.follow(f"{ctx.path}|{ex.text}|{settings.opts}", len(steps))
    t = controls(cursor, len(steps), _caption(ctx) if settings.projector else None)
    if isinstance(ctx, Context):         # a page's model (the lab's is in no checkpoint directory)
        what_if.forced_banner(ctx.checkpoint, ctx.path, ex.text, settings.opts, ctx.precision)
    # compact (the front of a room): the step, the hypothesis and the tree's switch in one row
    row = st.columns([3, 3, 4], vertical_alignment="center") if settings.projector else (st, st, st)
    record = steps[t]
    chosen = _pick_hypothesis(record, ctx, t, row[1])
    hyp = record.hypotheses[chosen]
    decode = ctx.checkpoint.tgt_tokenizer.decode
    row[0].markdown(_("**Step {t}** of {n}. Output so far: `{output}`").format(
        t=t, n=len(steps) - 1, output=decode(hyp.tokens) or _("(nothing yet)")))
    pieces = ctx.checkpoint.tgt_tokenizer.pieces
    polls.offer_next_token_poll(ex.text, decode(hyp.tokens), [(pieces([tok])[0], p) for tok, p in hyp.top_k[:4]],
                                    t)
    if polls.answer_hidden(polls.NEXT_TOKEN):
        st.info(_("The next token, the search tree and the translation are hidden while the class answers "
                  "“What comes next?”."), icon=":material/visibility_off:")
    else:
        if settings.opts.method == "beam":
            _beam_tree(ctx, steps, t, chosen, row[2])
        _next_token(ctx, record, chosen)
    if settings.opts.method == "beam":
        _side_by_side(ctx)
    classroom.end_of_run(ctx.site)   # a fragment's rerun does not reach main(), which writes the link otherwise
    if cursor.playing:
        _play(cursor, len(steps))


def _pick_hypothesis(record: StepRecord, ctx: Stepping, t: int, where: DeltaGenerator) -> int:
    if len(record.hypotheses) == 1:
        return 0
    decode = ctx.checkpoint.tgt_tokenizer.decode
    names = [_("{i}: {tokens}  [score {score}]").format(i=h.index, tokens=decode(h.tokens) or _("(start)"),
                                                         score=num(h.score, ".2f")) for h in record.hypotheses]
    return where.selectbox(_("Hypothesis to inspect"), range(len(names)), format_func=names.__getitem__,
                           key=f"hyp_{t}")


def _beam_tree(ctx: Stepping, steps: list[StepRecord], t: int, chosen: int, where: DeltaGenerator) -> None:
    every_step = toggle(where, ALL_PRUNED, _("Show the pruned candidates of every step"),
                        help=_("Off: only the current step's pruned candidates, so a wide beam stays readable."))

    def build():
        nodes, edges, index = tree_until(steps, t, ctx.checkpoint.tgt_tokenizer.pieces,
                                         pruned_only_last=not every_step)
        return figures.beam_tree(nodes, edges, title=_("beam search tree (● live/kept, ■ finished, × pruned)"),
                                 selected=index.get((t, chosen)))
    fig = ctx.figure("beam_tree", (t, chosen, every_step), build)
    chart(st, fig, key="tree", settings=ctx.settings)


def _next_token(ctx: Stepping, record: StepRecord, chosen: int) -> None:
    """The next-token probabilities of the chosen hypothesis, and the attention of its new position."""
    settings, pieces = ctx.settings, ctx.checkpoint.tgt_tokenizer.pieces
    hyp = record.hypotheses[chosen]
    so_far = pieces(hyp.tokens)
    token = chosen_token(record, chosen)
    left, right = st.columns([2, 3])
    where = (record.step, chosen)          # every figure below is this step's, shared by all
    topk = ctx.figure("topk", where, lambda: figures.top_k_bar(
        [pieces([tok])[0] for tok, _ in hyp.top_k], [p for _, p in hyp.top_k],
        chosen=pieces([token])[0] if token is not None else None,
        title=_("next token after {n} input tokens").format(n=len(so_far))))
    chart(left, topk, key="topk", settings=settings)
    if isinstance(ctx, Context):
        what_if.force_ui(ctx.checkpoint, hyp, token, record.step)
    if hyp.cross_attn is not None:
        cross = ctx.figure("cross_row", where, lambda: _row(
            hyp.cross_attn, ctx.explanation.trace.source_tokens[0], so_far[-1]).update_layout(
            title=_("cross-attention of the new position ({token})").format(token=figures.label(so_far[-1]))))
        chart(right, cross, key="cross_row", settings=settings)
        _used(ctx, record, chosen)
    if hyp.self_attn is not None:
        box, is_open = lazy_expander(st, _("Decoder self-attention of the new position"), key="step_self_row")
        if is_open:
            own = ctx.figure("self_row", where, lambda: _row(hyp.self_attn, so_far, so_far[-1]))
            chart(box, own, key="self_row", settings=settings)


def _used(ctx: Stepping, record: StepRecord, chosen: int) -> None:
    """What the token of this step used (ALTI+) beside where it looked, for a hypothesis that is the
    start of the final translation (the attribution is the final translation's, one per sentence):
    a line of text, and on request a chart (each chart on this page costs every student in a class
    its sending: BENCHMARKS.md, session 13)."""
    hyp, final = record.hypotheses[chosen], ctx.explanation.result.tokens
    t = len(hyp.tokens) - 1                                  # its tokens: the start symbol, then t outputs
    if hyp.tokens[1:] != final[:t] or t > len(final):
        st.caption(_("What the model used is computed for the final translation; this hypothesis is not its start."))
        return
    att = ctx.attribution(Cost.TRACE)         # one traced pass: the first page stays quick
    key = "alti" if "alti" in att.scores else "value_norm"
    label, looked, used = att.methods[key].shown(), hyp.cross_attn.mean(dim=(0, 1)).numpy(), att.scores[key].source[t]
    share = att.scores[key].source_share()
    token = figures.label(att.generated_tokens[t])
    st.markdown(_("**What {token} used** ({method}): {top}").format(token=token, method=label,
                                                                    top=_top(att.source_tokens, used))
                + ("" if share is None else _("; {share} of it came from the source, the rest from the output "
                                              "so far").format(share=num(share[t], ".0%")))
                + _(". **Where it looked** (cross-attention, heads averaged): {top}.").format(
                    top=_top(att.source_tokens, looked)))
    if toggle(st, STEP_USED_CHART, _("Chart: where it looked beside what it used"),
              help=_("Every method, side by side: the page What the model used.")):
        fig = ctx.figure("step_used", (record.step, chosen, key), lambda: figures.step_used_vs_looked(
            att.source_tokens, looked, used, label,
            title=_("step {t}: where it looked and what it used for {token}").format(t=record.step, token=token)))
        chart(st, fig, key="step_used", settings=ctx.settings)


def _top(tokens: list[str], values: np.ndarray, k: int = 3) -> str:
    """The k source tokens with the largest shares, e.g. "▁red 56 %, ▁apple 15 %"."""
    v = np.abs(np.asarray(values, dtype=float))
    v = v / v.sum() if v.sum() > 0 else v
    return ", ".join(f"{figures.label(tokens[i])} {v[i]:.0%}" for i in np.argsort(-v, kind="stable")[:k])


def _token_confidence(ctx: Stepping) -> None:
    """How sure the model was of each token of the finished translation: one figure per sentence,
    the same at every step (a class pressing Next together rebuilds nothing)."""
    ex = ctx.explanation
    tokens = ex.output_pieces(ctx.checkpoint)
    fig = ctx.figure("token_confidence", None, lambda: figures.token_confidence(
        tokens, ex.output_probs, LOW_TOKEN_PROB, title=_("how sure the model was of each token of the translation")))
    chart(st, fig, key="token_confidence", settings=ctx.settings)
    st.caption(_("Each token's probability given the source and the tokens before it. Below {low} "
                 "the model was guessing: check that word first.").format(low=num(LOW_TOKEN_PROB, "g")))


def _row(attn, keys: list[str], query: str):
    """One position's attention (L, H, keys) in every layer and head."""
    return figures.row_across_heads(attn[:, :, None, :].numpy(), 0, keys, query)


def _side_by_side(ctx: Stepping) -> None:
    st.subheader(_("Greedy and beam side by side"))
    what_if.side_by_side(st, ctx.checkpoint, ((_("greedy"), ctx.greedy.result.tokens),
                                              (_("beam"), ctx.explanation.result.tokens)))


def _play(cursor: StepCursor, n_steps: int) -> None:
    """Playing: wait, advance the cursor, run again (or stop at the last step)."""
    if cursor.step < n_steps - 1:
        time.sleep(PLAY_DELAY_S)
    cursor.tick(n_steps)
    st.rerun(scope="fragment")

