"""A class's polls, in the app: "What comes next?" on the step page (the shared part is
serving/class_store.py; who leads and who follows is app/classroom.py).

The teacher opens a poll from a page that has the question's material (the step page: the model's top
candidates for the next token). Every member of the class sees it at the top of the main area:
students answer once (an option, or a word of their own), the teacher watches answers arrive and
reveals them, as the class's shares beside the model's probabilities, to everyone. While the poll is
open no page shows its answer. The teacher downloads every poll's answers as CSV from the sidebar.
"""
from __future__ import annotations

import secrets

import streamlit as st

import figures
from app.classroom import Membership, follower_tick, membership, store
from app.ui import described, fragment, plain
from i18n import N_, _, ngettext
from serving import class_store
from serving.class_store import ClassGone, NotTeacher, Poll, StoreDown

NEXT_TOKEN, HEAD_TARGET = "next-token", "head-target"
YOUR_ANSWER = N_("Your answer")
PICK_LABEL = {NEXT_TOKEN: N_("The next token"), HEAD_TARGET: N_("The source token it looks at most")}


def answer_hidden(kind: str) -> bool:
    """While the class answers a poll of `kind`, no page shows its answer (for "what comes next?":
    the translation, the next-token chart, the search tree; for "where will this head look?": the
    attention maps): not on the students' screens, not on the projected teacher's."""
    poll = None if membership() is None else membership().poll    # read once per run, in poll_area
    return poll is not None and poll.kind == kind and not poll.revealed


def _teacher_poll_now(m: Membership) -> Poll | None:
    try:
        m.poll = store().view(m.code).poll
    except (ClassGone, StoreDown):
        pass
    return m.poll


def _offer(kind: str, label: str, question: dict) -> None:
    """For the teacher, with no poll open: a button that opens this one."""
    m = membership()
    if m is None or not m.teacher or m.poll is not None:
        return
    if st.button(label, icon=":material/how_to_vote:", key=f"class-ask-{kind}"):
        if _teacher_acts(m, lambda: store().open_poll(m.code, m.secret, kind, question)):
            st.rerun(scope="app")


def _teacher_acts(m: Membership, act) -> bool:
    """Do what the teacher asked of the class; False (said) when the class cannot be reached."""
    try:
        act()
        return True
    except (ClassGone, NotTeacher, StoreDown):
        st.error(_("The class cannot be reached right now; try again in a moment."), icon=":material/cloud_off:")
        return False


def offer_next_token_poll(sentence: str, prefix: str, candidates: list[tuple[str, float]], step: int) -> None:
    """The step page: which token comes next? The model's top candidates, shuffled, without their
    probabilities; students may also type a word of their own."""
    options = [token for token, _p in candidates]
    _offer(NEXT_TOKEN, _("Ask the class: what comes next?"), {
        "prompt": [N_("**What comes next?** “{sentence}” → `{prefix}` …"),
                   {"sentence": sentence, "prefix": prefix or None}], "step": step,
        "options": secrets.SystemRandom().sample(options, len(options)), "free_text": True,
        "model": {token: round(p, 4) for token, p in candidates}})


def offer_head_target_poll(sentence: str, kind_label: str, layer: int, head: int, query: str,
                           keys: list[str], weights: list[float]) -> None:
    """The explorer, a row highlighted: which source token will this head look at most from it?
    Students click one of the keys (in sentence order, numbered: a word may come twice)."""
    options = [f"{i}: {k}" for i, k in enumerate(keys)]
    _offer(HEAD_TARGET, _("Ask the class: where will this head look?"), {
        "prompt": [N_("**Where will head {head} of layer {layer} look most** ({kind}) from “{query}”, "
                      "in “{sentence}”?"),
                   {"head": head, "layer": layer, "kind": kind_label, "query": figures.label(query),
                    "sentence": sentence}], "options": options, "free_text": False,
        "model": {o: round(float(w), 4) for o, w in zip(options, weights)}})


def poll_area() -> None:
    """At the top of the main area, before the page: the open poll (students answer it; the teacher
    watches answers arrive, reveals, closes), and a follower's check of the class. The teacher's poll
    is read here, once per run; the page below asks `membership().poll`."""
    m = membership()
    if m is None or store() is None:
        return
    if not m.teacher:
        follower_tick(m)
    poll = _teacher_poll_now(m) if m.teacher else m.poll
    if poll is None:
        return
    with st.container(border=True, key="class-poll"):
        st.markdown(_prompt(poll.question["prompt"]))
        if poll.revealed:
            _results(m, poll)
        elif m.teacher:
            _teacher_controls(m, poll)
        else:
            _answer(m, poll)


def _prompt(prompt: str | list) -> str:
    """A poll's question in this student's language: the template and its words, as the teacher's
    app wrote them (a kind of attention by its marked name; an empty prefix as "(the start)")."""
    if isinstance(prompt, str):
        return prompt
    template, args = prompt
    words = {k: _(v) if k == "kind" else v for k, v in args.items()}
    if "prefix" in words and not words["prefix"]:
        words["prefix"] = _("(the start)")
    return _(template).format(**words)


def _answer(m: Membership, poll: Poll) -> None:
    if poll.id not in m.answered:          # first sight of this poll in this session: answered before a reload?
        m.answered[poll.id] = _answer_given(m, poll) or ""
    given = m.answered[poll.id]
    if given:
        st.success(_("Your answer is in: **{answer}**. The teacher will show the class's answers.").format(
            answer=plain(given)))
        if st.button(_("Change my answer"), key=f"poll-change-{poll.id}", icon=":material/edit:",
                     help=_("until the teacher shows the answers; your new answer replaces this one")):
            m.answered[poll.id] = ""           # the choices again; the class keeps this one until a new one
            st.rerun()
        return
    options = poll.question["options"]
    pick = st.pills(_(PICK_LABEL.get(poll.kind, YOUR_ANSWER)), options, key=f"poll-pick-{poll.id}")
    own = st.text_input(_("or type your own word"), key=f"poll-own-{poll.id}", max_chars=40) \
        if poll.question.get("free_text") else ""
    if st.button(_("Send my answer"), key=f"poll-send-{poll.id}", type="primary"):
        choice = own.strip() or pick
        if not choice:
            st.warning(_("Pick one first, or type a word.") if poll.question.get("free_text") else _("Pick one first."))
            return
        try:
            accepted = store().answer(m.code, poll.id, m.student, choice)
        except (ClassGone, StoreDown):
            accepted = False
        if not accepted:
            mine = _answer_given(m, poll)
            if mine is None:
                st.warning(_("This poll no longer takes answers."))
                return
            choice = mine
        m.answered[poll.id] = choice
        st.rerun()


def _answer_given(m: Membership, poll: Poll) -> str | None:
    """This student's answer to the poll as the class keeps it (given before a reload), or None."""
    try:
        return next((a.choice for a in store().answers(m.code, poll.id) if a.student == m.student), None)
    except (ClassGone, StoreDown):
        return None


def _teacher_controls(m: Membership, poll: Poll) -> None:
    _answers_so_far(m, poll)
    left, right = st.columns(2)
    if left.button(_("Reveal the answers"), icon=":material/bar_chart:", key="class-reveal", type="primary"):
        if _teacher_acts(m, lambda: store().reveal(m.code, m.secret)):
            st.rerun()
    if right.button(_("Close the poll"), key="class-close-poll"):
        if _teacher_acts(m, lambda: store().close_poll(m.code, m.secret)):
            st.rerun()


@fragment(run_every=1.0)
def _answers_so_far(m: Membership, poll: Poll) -> None:
    try:
        n = len(store().answers(m.code, poll.id))
    except (ClassGone, StoreDown):
        return
    st.caption(":material/how_to_vote: " + ngettext("{n} answer so far", "{n} answers so far", n).format(n=n))


def _results(m: Membership, poll: Poll) -> None:
    try:
        answers = [a.choice for a in store().answers(m.code, poll.id)]
    except (ClassGone, StoreDown):
        st.caption(_("The answers cannot be read right now."))
        return
    model = poll.question.get("model")
    fig = figures.poll_results(poll.question["options"], answers, model,
                               title=_("the class and the model") if model else _("the class"))
    st.plotly_chart(fig, key=f"poll-results-{poll.id}", width="stretch", config={"displaylogo": False})
    described(st, fig, None)
    if m.teacher and st.button(_("Close the poll"), key="class-close-poll"):
        if _teacher_acts(m, lambda: store().close_poll(m.code, m.secret)):
            st.rerun()


def answers_download() -> None:
    """The teacher's CSV of every poll's answers (kept until the class ends)."""
    m = membership()
    if m is None or not m.teacher:
        return
    try:
        polls = store().polls(m.code)
        text = class_store.answers_csv([(p, store().answers(m.code, p.id)) for p in polls])
    except (ClassGone, StoreDown):
        return
    if polls:
        st.sidebar.download_button(_("Download the answers (CSV)"), text, file_name=f"class-{m.code}-answers.csv",
                                   mime="text/csv", key="class-answers-csv", icon=":material/download:")
