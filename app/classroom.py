"""A class that follows its teacher, in the app (the shared part is serving/class_store.py).

The teacher presses "Start a class" in the sidebar: a code, a join link (`?class=CODE`) and its QR
code to project, and a teacher link (with the secret) to keep. At the end of every teacher run the
page and its link parameters (exactly what app/links.py writes into the address bar) are published.
A student who opens the join link, or types the code, follows: a small fragment checks the class when the class
bell rings (app/bell.py) and every FOLLOW_SECONDS anyway; a newer view is applied at the start of the next run (every
linked setting, the decoding step, the page) and the whole page reruns. On the step page the bell rings in the
step-through's fragment instead (follow_here), which applies a new step by itself, once its run ends.
A student who changes anything themselves has left (said, with "Follow the teacher again").

Roles: only a session that holds the secret publishes; a student's session never sees it. Faults:
the class gone (ended, expired) -> said, and the session goes on alone; the store out of reach
(Redis down) -> said, sessions go on alone and follow again once it is back.
"""
from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass, field

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from app import bell, lab_models, limits, links, resources, state
from app.class_code import join_url, qr_png
from app.links import Site
from app.ui import fragment
from i18n import N_, _, ngettext
from serving import class_store
from serving.class_store import ClassGone, NotTeacher, Poll, StoreDown, View

CLASS, TEACHER, SEAT = links.CLASS, links.TEACHER, links.SEAT   # link parameters: the join code; the teacher's
SEAT_ID = re.compile(r"[0-9a-f]{12}")                           # secret; a student's anonymous id (its seat)
FOLLOW_SECONDS = 2.0                         # how often a follower's page checks its class unasked (the bell
                                             # rings at once; this says the student is there, and is its fallback)
TEACHER_SECONDS = 2.0                        # how often the teacher's sidebar counts followers
CHECK_IN_SECONDS = 3.0                       # how often a follower says it is there


@dataclass
class Membership:
    """This session's class: the owner app/state.py keeps under CLASS."""
    code: str
    secret: str | None = None                # the teacher's; None for a student
    student: str = field(default_factory=lambda: secrets.token_hex(6))
    following: bool = True
    applied: int = 0                         # the class view's version applied last
    drawing: int | None = None               # a version a fragment's run applies: applied once that run ends
    seen: int = 0                            # the class view's version the last check saw
    bell: str = ""                           # the class's bell token (app/bell.py), a student's
    pending: View | None = None              # to apply at the start of the next run
    fresh: View | None = None                # read or applied in this whole run: its later checks use it (_view)
    baseline: tuple | None = None            # (page, params) of the view applied last
    checked_in: float = 0.0
    trouble: str | None = None               # the store out of reach, said
    poll: Poll | None = None                 # the class's open poll, as last seen
    show_code: bool = False                  # the teacher shows the join code big, above the page
    answered: dict[str, str] = field(default_factory=dict)   # poll id -> this student's answer ("" none yet)

    @property
    def teacher(self) -> bool:
        return self.secret is not None


def store() -> class_store.ClassStore | None:
    return resources.class_store()


def membership() -> Membership | None:
    return state.held(state.CLASS)


def _leave_class(message: str) -> None:
    state.hold(state.CLASS, None)
    st.toast(message, icon=":material/info:")


# ---- joining -----------------------------------------------------------------------------------
def join(code_text: str, secret: str | None = None, seat: str | None = None) -> str | None:
    """Join (or, with the secret, lead) the class; returns what went wrong, or None. A student's `seat`
    (from their own address bar: a reload, another app process) keeps their anonymous id, and with it
    their answers: one per poll."""
    s = store()
    code = class_store.normalize_code(code_text)
    if s is None:
        return _("Classes are switched off on this server.")
    if limits.over("join", resources.config().joins_per_minute, limits.MINUTE):
        return _("Too many attempts to join a class from your address in the last minute: wait a minute, "
                 "then try again.")
    if code is None:
        return _("“{code}” is not a class code (8 letters and digits, like ABCD-EFGH).").format(code=code_text)
    try:
        if secret is not None and not s.is_teacher(code, secret):
            return _("This teacher link is not valid (the class has ended, or the link is incomplete).")
        view = s.view(code)
    except ClassGone:
        return _("There is no class {code}: the code is wrong, or the class has ended.").format(
            code=class_store.pretty(code))
    except StoreDown:
        return _("The class server cannot be reached right now; try again in a minute.")
    m = Membership(code, secret)
    try:
        m.bell = s.bell_token(code)
    except (ClassGone, StoreDown):             # just read: the bell stays silent, the check still runs
        pass
    if not m.teacher and seat is not None and SEAT_ID.fullmatch(seat):
        m.student = seat
    if not m.teacher:
        m.pending = view
    state.hold(state.CLASS, m)
    return None


def join_from_link() -> None:
    """Once per session: `?class=CODE` (and `&teacher=SECRET`) joins; a wrong code is said."""
    if state.held(state.CLASS_LINK_READ):
        return
    state.hold(state.CLASS_LINK_READ, True)
    code = st.query_params.get(CLASS)
    if code:
        problem = join(code, st.query_params.get(TEACHER), st.query_params.get(SEAT))
        if problem:
            st.warning(problem + " " + _("You are using the app on your own."), icon=":material/group_off:")


# ---- following: applying the teacher's view ------------------------------------------------------
def apply_pending(site: Site) -> str | None:
    """At the start of a run, before any widget: the teacher's view into this session's owners.
    Returns the page to open."""
    m = membership()
    if m is None or m.teacher:
        return None
    view = m.fresh = m.pending               # read by the run just before (which reran the page for it)
    m.pending = None
    if view is None or not m.following:      # (queued by a check just before the student left)
        return None
    values = links.parse(view.params, [c.name for c in lab_models.checkpoints()], site.linked)
    for spec in site.linked.values():                      # as a fresh session reading the link: the
        if spec.name in values:                         # teacher's values, every other setting its
            state.set_widget(spec.name, values[spec.name])   # default (the model's own alpha, ...)
        else:
            state.forget(spec.name)
    _step_to(m, view)
    m.following, m.poll = True, view.poll
    return view.page


def _step_to(m: Membership, view: View, now: bool = True) -> None:
    """The view's step for the step-through's cursor, and the view applied: now, or as this run ends (end_of_run)."""
    cursor = state.cursor()
    cursor.pending, cursor.playing = links.linked_step(view.params) or 0, False
    m.applied, m.drawing = (view.version, None) if now else (m.applied, view.version)
    m.baseline = (view.page, dict(view.params))


def watch(m: Membership) -> None:
    """A follower's check (the bell rang, or FOLLOW_SECONDS passed): a newer view reruns the whole page."""
    s = store()
    try:
        now = time.monotonic()
        if now - m.checked_in > CHECK_IN_SECONDS:
            s.check_in(m.code, m.student)
            m.checked_in = now
        view = _view(m)
    except ClassGone:
        _leave_class(_("Class {code} has ended.").format(code=class_store.pretty(m.code)))
        st.rerun(scope="app")
    except StoreDown:
        if m.trouble is None:
            m.trouble = N_("The class cannot be reached right now: you are on your own until it is back.")
            st.rerun(scope="app")
        return
    m.seen = view.version
    if m.trouble is not None:                # back: the notice goes, following resumes below
        m.trouble = None
        st.rerun(scope="app")
    if m.following and view.version != m.applied:
        m.pending, m.poll = view, view.poll
        st.rerun(scope="app")
    if view.poll != m.poll:                  # a poll opened, revealed or closed: shown to every student
        m.poll = view.poll
        st.rerun(scope="app")


def _view(m: Membership) -> View:
    """The class's view: from the store, but in a whole run once only (the page's check, then the step page's own
    fragment; the view the run applied counts): a change meanwhile rings the bell, whose fragment run reads anew."""
    ctx = get_script_run_ctx(suppress_warning=True)
    whole = ctx is not None and not ctx.fragment_ids_this_run      # (outside a run, as a test calls it: read)
    if whole and m.fresh is not None:
        return m.fresh
    view = store().view(m.code)
    m.fresh = view if whole else None
    return view


def after_run(page: str | None, params: dict[str, str]) -> None:
    """At the end of every run: a teacher's view is published; a follower who changed something
    themselves has left."""
    m = membership()
    if m is None or page is None:
        return
    if m.teacher:
        try:
            store().publish(m.code, m.secret, page, params)
        except (ClassGone, NotTeacher):
            state.hold(state.CLASS, None)
            return
        except StoreDown:
            if m.trouble is None:            # said in the sidebar, drawn again
                m.trouble = N_("The class cannot be reached right now: your students keep the last page they saw.")
                st.rerun(scope="app")
            return
        if m.trouble is not None:
            m.trouble = None
            st.rerun(scope="app")
        return
    if m.following and (page, params) != m.baseline:      # the teacher's view, drawn here, gives the
        m.following = False                                # same link: any difference is the student's
        st.rerun(scope="app")               # the sidebar says so (a fragment's run does not redraw it)


def end_of_run(site: Site, completed: bool = True) -> None:
    """What every run ends with, main's and a fragment's that changes linked state (a step, a block):
    the address bar written, and the class told (a teacher's view published; a follower's own change
    noticed). A run cut short (st.rerun, st.switch_page) only writes the address bar."""
    params = links.publish(site, link_params())
    if completed and (m := membership()) is not None and m.drawing is not None:   # follow_here's view is drawn
        m.applied, m.drawing = m.drawing, None
    if completed and params is not None:
        after_run(state.held(state.PAGE), params)


def link_params() -> dict[str, str]:
    """A student's address bar keeps the class and their seat (a reload, or another app process, joins
    again as the same anonymous student)."""
    m = membership()
    return {CLASS: m.code, SEAT: m.student} if m is not None and not m.teacher else {}


# ---- the sidebar -----------------------------------------------------------------------------------
def sidebar(site: Site) -> None:
    """The class's place in the sidebar: start or join one; a teacher's code, link, QR and count; a
    student's "following" and "follow again"."""
    if store() is None:
        return
    st.sidebar.subheader(_("Class"))
    m = membership()
    if m is None:
        _start_or_join(site)
    elif m.teacher:
        _teacher_panel(m)
    else:
        _student_panel(m)


def _start_or_join(site: Site) -> None:
    if st.sidebar.button(_("Start a class"), icon=":material/co_present:", key="class-start",
                         help=_("your students' screens follow yours: page, sentence, settings, step")):
        most = resources.config().classes_per_hour
        if limits.over("start", most, limits.HOUR):
            st.sidebar.error(_("{n} classes were started from your address in the last hour, the most this "
                               "server allows: end one and wait, or ask whoever runs the server.").format(n=most))
            return
        try:
            started = store().start(state.held(state.PAGE) or site.landing, {})
        except StoreDown:
            st.sidebar.error(_("The class server cannot be reached right now; try again in a minute."))
            return
        state.hold(state.CLASS, Membership(started.code, started.secret))
        st.rerun()
    with st.sidebar.popover(_("Join a class"), icon=":material/group_add:"):
        code = st.text_input(_("Class code"), key="class-code", placeholder="ABCD-EFGH")
        if st.button(_("Join"), key="class-join") and code:
            problem = join(code)
            if problem:
                st.error(problem)
            else:
                st.rerun()


def _teacher_panel(m: Membership) -> None:
    url = join_url(m.code)
    st.sidebar.markdown(_("**Class {code}**: students open [{url}]({url}) or type the code.").format(
        code=class_store.pretty(m.code), url=url))
    m.show_code = st.sidebar.toggle(_("Show the code big, for the projector"), value=m.show_code,
                                    key="class-show-code")
    with st.sidebar.expander(_("QR code and teacher link")):
        st.image(qr_png(url), caption=_("class {code}").format(code=class_store.pretty(m.code)), width=220)
        st.markdown(_("Keep this **teacher link** to lead the class again from another tab (do not project it):"))
        st.code(join_url(m.code, m.secret), language=None)
    with st.sidebar:
        _teacher_count(m)
        lab_models.class_models()
    if m.trouble:
        st.sidebar.warning(_(m.trouble), icon=":material/cloud_off:")
    if st.sidebar.button(_("End the class"), icon=":material/stop_circle:", key="class-end"):
        try:
            store().end(m.code, m.secret)
        except (ClassGone, NotTeacher, StoreDown):
            pass
        _leave_class(_("The class has ended."))
        st.rerun()


@fragment(run_every=TEACHER_SECONDS)
def _teacher_count(m: Membership) -> None:
    try:
        n = store().followers(m.code)
        st.caption(":material/groups: " + ngettext("{n} student following", "{n} students following", n).format(n=n))
    except (ClassGone, StoreDown):
        st.caption(_("(students not counted right now)"))


def _student_panel(m: Membership) -> None:
    if m.trouble:
        st.sidebar.warning(_(m.trouble), icon=":material/cloud_off:")
    code = class_store.pretty(m.code)
    if m.following:
        st.sidebar.success(_("Following the teacher (class {code})").format(code=code), icon=":material/sync:")
        if st.sidebar.button(_("Explore on my own"), key="class-leave"):
            m.following = False
            st.rerun()
    else:
        st.sidebar.info(_("Exploring on your own (class {code})").format(code=code), icon=":material/explore:")
        if st.sidebar.button(_("Follow the teacher again"), icon=":material/sync:", key="class-follow"):
            m.following, m.applied = True, 0
            st.rerun()
    if st.sidebar.button(_("Leave the class"), key="class-quit"):
        _leave_class(_("You left class {code}.").format(code=code))
        st.rerun()


@fragment(run_every=FOLLOW_SECONDS)
def follower_tick(m: Membership) -> None:
    """Drawn once per run (in the main area, app/polls.py): a follower's check of the class, and the bell
    that runs it again as soon as the class changes (unless the page's own fragment hears it: follow_here)."""
    watch(m)
    if m.bell and not _page_hears(m):
        bell.listen(m.code, m.bell, m.seen)


# ---- a change followed by the page's own fragment ------------------------------------------------
# The pages whose fragment follows these link parameters itself (it calls follow_here): the step page's
# Next, the change a class sees most, reruns the step-through alone (app/views/stepper.py), not the whole page.
FOLLOWED_IN_PAGE: dict[str, tuple[str, ...]] = {"step": (links.STEP,)}


def _page_hears(m: Membership) -> bool:
    """Whether a following student's page hears the bell in its own fragment (it follows a FOLLOWED_IN_PAGE page)."""
    return (not m.teacher and m.following and bool(m.bell) and m.baseline is not None
            and m.baseline[0] in FOLLOWED_IN_PAGE)


def follow_here() -> None:
    """In the fragment of a FOLLOWED_IN_PAGE page (a following student's; nothing otherwise): the class bell is
    drawn here, and when it rings this fragment reruns and reads the class. A change of the page's own parameters
    alone (the step) is applied here, before the fragment draws; any other reruns the whole page (follower_tick)."""
    m = membership()
    if m is None or not _page_hears(m) or state.held(state.PAGE) != m.baseline[0]:
        return
    try:
        view = _view(m)
    except ClassGone:                            # said by the whole page's check (follower_tick, in watch)
        st.rerun(scope="app")
    except StoreDown:          # said by that check too; a rerun would meet it again and again: the page stays
        return bell.listen(m.code, m.bell, m.seen)
    m.seen = view.version
    if view.version != m.applied:
        if not followed_in_page(m.baseline, m.poll, view):
            m.pending = view
            st.rerun(scope="app")
        _step_to(m, view, now=False)      # a run that fails before its end: follower_tick reruns the page
    bell.listen(m.code, m.bell, m.seen)


def followed_in_page(baseline: tuple[str, dict[str, str]], poll: Poll | None, view: View) -> bool:
    """Whether the page `baseline` shows (its page and link parameters, with `poll` open) becomes `view` by
    changing only what the page's own fragment follows (FOLLOWED_IN_PAGE): the same page, the same poll, every
    other parameter the same."""
    page, params = baseline
    owned = FOLLOWED_IN_PAGE.get(page)
    if owned is None or view.page != page or view.poll != poll:
        return False
    return ({k: v for k, v in view.params.items() if k not in owned}
            == {k: v for k, v in params.items() if k not in owned})


def shown_code() -> str | None:
    """The class code a teacher shows big above the page (`show_code`), else None (app/class_code.join_banner)."""
    m = membership()
    return m.code if m is not None and m.teacher and m.show_code else None
