"""The guided lesson: the paper in order on the current sentence, one screen per step,
previous / next by keyboard (← →). The step is in the link (`?lesson=5`), so a teacher
prepares a lesson as a list of links."""
from __future__ import annotations

import streamlit as st

from app import state
from app.context import Context
from app.settings import selectbox, setting
from app.ui import chart
from figures.lesson import STEPS, LessonData
from i18n import _

LESSON_STEP = setting("lesson_step", "lesson", 1, int, bounds=(1, len(STEPS)))   # 1-based


def _move(by: int) -> None:
    state.set_widget(LESSON_STEP.name, min(max(state.get(LESSON_STEP.name, 1) + by, 1), len(STEPS)))


def controls() -> int:
    """Previous / next (keyboard ← →) and a list of the steps; returns the current step (1-based)."""
    c = st.columns([1, 1, 5])
    current = state.get(LESSON_STEP.name, LESSON_STEP.default)
    c[0].button(_("Previous"), key="lesson_prev", icon=":material/chevron_left:", disabled=current <= 1,
                shortcut="Left", help=_("keyboard: ←"), on_click=_move, args=(-1,))
    c[1].button(_("Next"), key="lesson_next", icon=":material/chevron_right:", disabled=current >= len(STEPS),
                shortcut="Right", help=_("keyboard: →"), on_click=_move, args=(1,))
    return selectbox(c[2], LESSON_STEP, _("Step"), range(1, len(STEPS) + 1),
                     format_func=lambda k: _(STEPS[k - 1].title),
                     label_visibility="collapsed")


def render(ctx: Context) -> None:
    if ctx.checkpoint.config.norm_first:
        st.info(_("This lesson follows the paper's post-norm layers; this model is pre-norm."))
        return
    k = controls()
    step = STEPS[k - 1]
    st.progress(k / len(STEPS), text=_("step {k} of {n}").format(k=k, n=len(STEPS)))
    st.header(_(step.title))
    st.markdown(_(step.text))
    st.latex(step.formula)
    fig = ctx.figure("lesson", k, lambda: step.figure(LessonData(ctx.checkpoint, ctx.with_stream)))
    chart(st, fig, key="lesson_figure", settings=ctx.settings)
    st.info(_("**Try this:** {task}").format(task=_(step.try_this)), icon=":material/science:")
