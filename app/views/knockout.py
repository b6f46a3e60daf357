"""Head knockout: switch off chosen heads (or whole layers), translate again, compare."""
from __future__ import annotations

import numpy as np
import streamlit as st

import figures
from app import resources, state
from app.context import Context
from app.settings import declare, multiselect
from app.ui import chart, described, why
from i18n import N_, _, ngettext, num
from model.inference.pipeline import head_names
from model.network.kinds import STACKS
from model.storage.checkpoint import Checkpoint

KO_LAYERS = declare("ko_layers", None, ())          # whole layers switched off
KO_HEADS = declare("ko_heads", None, ())            # single heads switched off
KO_CELL = declare("ko_cell", None, None)            # the (module, head) cell clicked in the grid


MODULES = {"self_attn": N_("self"), "cross_attn": N_("cross")}


def _label(name: str) -> str:
    """"decoder.1.cross_attn.3" -> "decoder cross L1 H3"; a layer's name (no head) -> "decoder cross L1"."""
    stack, layer, module, *head = name.split(".")
    where = _("{stack} {kind} L{layer}").format(stack=_(STACKS[stack]), kind=_(MODULES[module]), layer=layer)
    return _("{layer} H{head}").format(layer=where, head=head[0]) if head else where


def selection_ui(ckpt: Checkpoint) -> frozenset[str]:
    heads = head_names(ckpt)
    layers = list(dict.fromkeys(n.rsplit(".", 1)[0] for n in heads))      # in model order
    c1, c2 = st.columns(2)
    whole = multiselect(c1, KO_LAYERS, _("Switch off whole layers (all their heads)"), layers, format_func=_label)
    single = multiselect(c2, KO_HEADS, _("Switch off single heads"), heads, format_func=_label)
    return frozenset(single) | frozenset(n for n in heads if n.rsplit(".", 1)[0] in whole)


def effects_grid(ctx: Context) -> None:
    """Every head alone, and every whole layer, switched off: how much less likely the translation
    becomes (computed once per sentence); a click on a cell shows that knockout's translation."""
    ckpt = ctx.checkpoint
    effects = resources.get_knockout_effects(ctx.path, ctx.explanation.text, ctx.settings.opts, ctx.precision)
    modules = list(dict.fromkeys(n.rsplit(".", 1)[0] for n in head_names(ckpt)))
    n_heads = ckpt.config.n_heads
    grid = np.array([[effects[f"{m}.{h}"] for h in range(n_heads)] + [effects[m]] for m in modules])
    fig = ctx.figure("ko_grid", (), lambda: figures.knockout_grid(
        grid, [_label(m) for m in modules], title=_("how much less likely the translation becomes "
        "(drop in log-probability) with one head, or one whole layer, switched off")))
    st.plotly_chart(fig, key="ko_grid", on_select="rerun", selection_mode="points", width="stretch",
                    config={"displaylogo": False})
    described(st, fig, ctx.settings)
    cell = _clicked_cell(state.widget("ko_grid"), len(modules), n_heads)
    if cell is not None:
        state.put(KO_CELL.name, cell)
    cell = state.get(KO_CELL.name)
    if cell is None or cell[0] >= len(modules) or cell[1] > n_heads:
        st.caption(_("Click a cell to see that knockout's translation."))
        return
    module, column = modules[cell[0]], cell[1]
    off = frozenset({f"{module}.{column}"}) if column < n_heads else frozenset(
        f"{module}.{h}" for h in range(n_heads))
    what = (_("{layer} head {head}").format(layer=_label(module), head=column) if column < n_heads
            else _("all of {layer}").format(layer=_label(module)))
    st.markdown(_("**Without {what}** (log-probability drop {drop}): {output}").format(
        what=what, drop=num(grid[cell[0], column], ".2f"), output=ctx.knocked_out(off).output or _("(empty)")))


def _clicked_cell(event, n_rows: int, n_cols: int) -> tuple[int, int] | None:
    try:
        point = event["selection"]["points"][0]
        return int(point["y"]), int(point["x"])
    except (KeyError, TypeError, IndexError, ValueError):
        return None


def render(ctx: Context) -> None:
    ckpt, ex, settings = ctx.checkpoint, ctx.explanation, ctx.settings
    why(st, _("Multi-head attention concatenates h heads: MultiHead(Q, K, V) = Concat(head₁, …, head_h) Wᴼ. "
              "Zero some heads' outputs before Wᴼ and see what the translation loses."), settings.projector, "knockout")
    effects_grid(ctx)
    st.subheader(_("Switch off heads of your choice"))
    off = selection_ui(ckpt)
    if not off:
        st.info(_("Choose heads or layers to switch off."))
        return
    knocked = ctx.knocked_out(off)
    c1, c2 = st.columns(2)
    c1.markdown(_("**All heads:** {output}").format(output=ex.output or _("(empty)")))
    c2.markdown(ngettext("**Without {n} head:** {output}", "**Without {n} heads:** {output}", len(off)).format(
        n=len(off), output=knocked.output or _("(empty)")))
    st.caption(_("identical translation") if knocked.result.tokens == ex.result.tokens
               else _("the translation changed"))
    before, after = ctx.token_probabilities(), ctx.token_probabilities(off)
    tokens = ckpt.tgt_tokenizer.pieces(before.tokens)
    fig = ctx.figure("ko_probs", off, lambda: figures.probability_change(tokens, before.probs, after.probs))
    chart(st, fig, key="ko_probs", settings=settings)
