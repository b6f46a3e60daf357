"""The app's pages: one registry line each.

To add a page: write a module in app/views/ with `render(ctx: Context) -> None`, and
add a `Page(...)` line below. Its slug is its URL path (`/slug`; the first page is
also at `/`) and its name in old-style links (`?view=slug`). Pages that take a
sentence get the sentence box and the translation drawn above them, and a context
whose `explanation` is ready; the others get a context without a sentence.
"""
from __future__ import annotations

import html
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import streamlit as st
from streamlit.delta_generator import DeltaGenerator
from streamlit.runtime.scriptrunner import get_script_run_ctx

from app import limits, resources, sentence, state
from app import settings as settings_module
from app.context import Context
from app.links import Site
from app.settings import PRESENT, Setting, SidebarChoices, declared, linked
from app.ui import HIDDEN, compact_style
from app.views import (
    attribution,
    card,
    corpus_heads,
    explore,
    knockout,
    lab,
    lesson,
    masks,
    one_head,
    overview,
    positional,
    stepper,
)
from i18n import N_, _
from model.storage.checkpoint import CheckpointError
from serving.admission import Gate, Waiting


@dataclass(frozen=True)
class Page:
    slug: str
    title: str                  # marked with N_: translated where it is shown
    icon: str
    render: Callable[[Context], None]
    takes_sentence: bool = True
    main: tuple[str, ...] = ()  # the keys of its main chart, the first drawn wins (the presentation view)
    # what it computes from a sentence for every session alike besides the decoding (Context.compute_ahead's names):
    # done in every app process as a teacher's run starts on a new sentence (serving/class_ahead.py)
    ahead: tuple[str, ...] = ()

    @property
    def settings(self) -> tuple[Setting, ...]:
        """What the page lets a student choose: the settings its module declares (`declare(...)` at its
        top), found there so that a new setting cannot be left off."""
        return declared(sys.modules[self.render.__module__])


PAGES: tuple[Page, ...] = (
    Page("overview", N_("The whole model"), ":material/account_tree:", overview.render, main=("overview_figure",)),
    Page("explore", N_("Translate & explore attention"), ":material/grid_view:", explore.render, main=("grid",)),
    Page("lesson", N_("Guided lesson"), ":material/school:", lesson.render, main=("lesson_figure",)),
    Page("step", N_("Step through decoding"), ":material/skip_next:", stepper.render, main=("tree", "topk"),
         ahead=("greedy", "attribution")),
    Page("positional", N_("Positional encoding"), ":material/waves:", positional.render, main=("pe_pair",)),
    Page("masks", N_("Masks"), ":material/visibility_off:", masks.render, main=("pad_pair",)),
    Page("head", N_("Inside one head"), ":material/center_focus_strong:", one_head.render, main=("head_pipeline",)),
    Page("knockout", N_("Head knockout"), ":material/block:", knockout.render, main=("ko_grid",)),
    Page("attribution", N_("What the model used"), ":material/insights:", attribution.render,
         main=("attr_heatmaps",)),
    Page("heads", N_("Heads across the corpus"), ":material/view_module:", corpus_heads.render,
         takes_sentence=False, main=("heads_grid",)),
    Page("lab", N_("Training lab"), ":material/model_training:", lab.render, takes_sentence=False),
    Page("card", N_("Model card & training"), ":material/description:", card.render, takes_sentence=False,
         main=("curves",)),
)
BY_SLUG = {p.slug: p for p in PAGES}
# handed to links and the class: every page's path, and every setting a link carries (the shared ones
# of app/settings.py and each page's own)
SITE = Site(tuple(p.slug for p in PAGES),
            linked((*declared(settings_module), *(s for p in PAGES for s in p.settings))))


def show(page: Page, settings: SidebarChoices, st_pages: dict | None = None) -> None:
    """Draw one page: the title, the sentence and its translation (if the page takes
    one), then the page itself with its context. A run that may compute (another page,
    sentence, model or options than this session's last) first passes the admission gate;
    its sentence is decoded before that, together with other sessions' new sentences."""
    try:
        ckpt = resources.get_checkpoint(str(settings.checkpoint))
    except CheckpointError as exc:
        st.error(_("This checkpoint cannot be loaded: {problem}").format(problem=exc))
        return
    title = _("Transformer, explained: {src} → {tgt}").format(src=ckpt.src_lang, tgt=ckpt.tgt_lang)
    ctx = Context(ckpt, settings, pages=st_pages or {}, site=SITE)
    source, output = header(title, settings.projector, page.takes_sentence, bool(page.main))
    text = ""
    if page.takes_sentence:
        text = sentence.compact_input_ui(ckpt.src_lang, source) if settings.projector else sentence.input_ui(
            ckpt.src_lang)
    work = (page.slug, str(settings.checkpoint), text, settings.opts)
    if page.takes_sentence and state.held(state.ADMITTED) != work:
        sentence.decode_early(ckpt, text, settings, page.ahead)  # batched with the sentences of the same moment
    with admitted(work) as ok:
        if not ok:
            return
        if page.takes_sentence:
            ex = sentence.translation(ckpt, text, settings, output)
            if ex is None:
                return
            ctx = Context(ckpt, settings, text, ex, pages=st_pages or {}, site=SITE)
        state.hold(state.PAGE, page.slug)              # links.publish writes what this page needs
        if settings.present and page.main:
            presentation(page)
        with st.container(key=f"page-{page.slug}"):   # names the page for tests (CSS class st-key-page-<slug>)
            page.render(ctx)


def _close_presentation() -> None:
    state.set_widget(PRESENT.name, False)


def presentation(page: Page) -> None:
    """The presentation view: the page's main chart alone on the whole window (the rest stays beneath it,
    so ← and → still step the decoding or the lesson), a Close button that Esc presses."""
    st.html(presentation_style(page))
    st.button(_("Close"), key="present_close", icon=":material/close_fullscreen:", shortcut="Escape",
              help=_("back to the whole page (Esc)"), on_click=_close_presentation)


def presentation_style(page: Page) -> str:
    """CSS that lifts the first of the page's main chart keys that is drawn onto the whole window."""
    scope = f".st-key-page-{page.slug}"
    rules = []
    for i, key in enumerate(page.main):
        earlier = "".join(f":not(:has(.st-key-{k}))" for k in page.main[:i])
        rules.append(f"{scope}{earlier} .st-key-{key}")
    # the rest of the page is hidden, not removed: its buttons keep their keys (← → step, Esc closes)
    return ("<style>[data-testid='stSidebar'], [data-testid='stHeader'], [data-testid='stSidebarCollapsedControl'] "
            "{display: none !important} [data-testid='stMain'] {visibility: hidden} "
            f"{', '.join(rules)} {{visibility: visible; position: fixed !important; inset: 0; z-index: 999990; "
            "background: white; padding: 3.5rem 2rem 1rem 2rem; overflow: auto; width: auto !important} "
            ".st-key-present_close {visibility: visible; position: fixed !important; top: 0.75rem; right: 1rem; "
            "z-index: 999991; width: auto !important}</style>")


def header(title: str, compact: bool, sentence: bool, presentable: bool) -> tuple[DeltaGenerator | None,
                                                                                   DeltaGenerator | None]:
    """The page's title, and where the sentence and its translation go. Compact (projector mode, the front
    of a room): one slim line, the sentence (a button that opens the text box) beside its translation and
    a button to present the page's main chart, the title read out by screen readers only, so that the
    page's picture comes first."""
    if not compact:
        st.title(title)
        return None, None           # the sentence and its translation below the title, one after the other
    compact_style()
    st.markdown(f'<h1 style="{HIDDEN}">{html.escape(title)}</h1>', unsafe_allow_html=True)
    if not sentence:
        if presentable:
            _present_button(st.container(horizontal=True, horizontal_alignment="right"))
        return None, None
    source, arrow, output, present = st.container(key="header").columns([8, 1, 10, 3], vertical_alignment="center")
    arrow.markdown(":material/arrow_forward:")
    if presentable:
        _present_button(present)
    return source, output


def _present_button(where: DeltaGenerator) -> None:
    where.button(_("Present"), key="present_open", icon=":material/fullscreen:", type="tertiary",
                 help=_("the main chart alone on the whole window (Esc returns)"),
                 on_click=state.set_widget, args=(PRESENT.name, True))


# A student in line is told their place once they have waited this long, not at once: a class's new sentence puts
# 15 followers in each process's line for well under a second, and each place drawn at every move (~100 notes a
# process) was a message the event loop sent while the runs ahead of it computed (BENCHMARKS.md, session 53).
NOTE_AFTER = 1.0


@contextmanager
def admitted(work: tuple) -> Iterator[bool]:
    """True when the page may be drawn: at once if this session last drew the same `work`
    (a layer change, a click: light), else once the process's gate lets it through,
    showing the student their place in line meanwhile (after NOTE_AFTER s). False: the line is full (said)."""
    note = st.empty()        # drawn on every run: the page's elements keep their places
    if state.held(state.ADMITTED) == work:
        yield True
        return
    gate = resources.admission_gate()

    def on_wait(w: Waiting) -> None:
        note.info(_("Many students at once: you are number {position} in line for the server "
                    "(about {seconds} s). Your page follows by itself.").format(
                        position=w.position, seconds=max(1, round(w.seconds))),
                  icon=":material/hourglass_top:")

    _wait_for_own_turn(note, gate)
    with gate.admitted(on_wait, quiet=NOTE_AFTER, still=_stopped) as ok:
        note.empty()
        if not ok:
            note.warning(_("The server is full right now: {n} students are waiting. "
                           "Please try again in a minute.").format(n=gate.waiting), icon=":material/group:")
            st.button(_("Try again"), key="admission-retry")
        yield ok
        if ok:
            state.hold(state.ADMITTED, work)
            limits.count_page()


def _stopped() -> None:
    """Raises if Streamlit stops or reruns this run (what drawing the note would do), so that it leaves the line."""
    if (check := getattr(get_script_run_ctx(suppress_warning=True), "yield_check", None)) is not None:
        check()


def _wait_for_own_turn(note: DeltaGenerator, gate: Gate) -> None:
    """While the server is busy, a student who had their new pages of the minute waits (app/limits.py)."""
    while (wait := limits.page_wait(gate)) > 0:
        note.info(_("The server is busy and you have asked for {n} new pages in the last minute: yours "
                    "follows in {seconds} s, by itself.").format(n=resources.config().sentences_per_minute,
                                                                  seconds=max(1, round(wait))),
                  icon=":material/timer:")
        time.sleep(min(1.0, wait))


def navigation(settings: SidebarChoices) -> tuple[st.navigation, dict[str, st.Page]]:
    """st.navigation over PAGES (the menu at the top of the sidebar), and the st.Page of each slug."""
    st_pages: dict[str, st.Page] = {}        # filled below; each page's runner can open the others
    st_pages.update({p.slug: st.Page(_runner(p, settings, st_pages), title=_(p.title), icon=p.icon, url_path=p.slug,
                                     default=p is PAGES[0]) for p in PAGES})
    return st.navigation(list(st_pages.values())), st_pages


def _runner(page: Page, settings: SidebarChoices, st_pages: dict[str, st.Page]) -> Callable[[], None]:
    def run() -> None:
        show(page, settings, st_pages)
    run.__name__ = f"page_{page.slug}"
    return run
