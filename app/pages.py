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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from app import resources, sentence, state
from app import settings as settings_module
from app.context import Context
from app.links import Site
from app.settings import Setting, SidebarChoices, declared, linked
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
from serving.admission import Waiting


@dataclass(frozen=True)
class Page:
    slug: str
    title: str                  # marked with N_: translated where it is shown
    icon: str
    render: Callable[[Context], None]
    takes_sentence: bool = True

    @property
    def settings(self) -> tuple[Setting, ...]:
        """What the page lets a student choose: the settings its module declares (`declare(...)` at its
        top), found there so that a new setting cannot be left off."""
        return declared(sys.modules[self.render.__module__])


PAGES: tuple[Page, ...] = (
    Page("overview", N_("The whole model"), ":material/account_tree:", overview.render),
    Page("explore", N_("Translate & explore attention"), ":material/grid_view:", explore.render),
    Page("lesson", N_("Guided lesson"), ":material/school:", lesson.render),
    Page("step", N_("Step through decoding"), ":material/skip_next:", stepper.render),
    Page("positional", N_("Positional encoding"), ":material/waves:", positional.render),
    Page("masks", N_("Masks"), ":material/visibility_off:", masks.render),
    Page("head", N_("Inside one head"), ":material/center_focus_strong:", one_head.render),
    Page("knockout", N_("Head knockout"), ":material/block:", knockout.render),
    Page("attribution", N_("What the model used"), ":material/insights:", attribution.render),
    Page("heads", N_("Heads across the corpus"), ":material/view_module:", corpus_heads.render, takes_sentence=False),
    Page("lab", N_("Training lab"), ":material/model_training:", lab.render, takes_sentence=False),
    Page("card", N_("Model card & training"), ":material/description:", card.render, takes_sentence=False),
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
    source, output = header(title, settings.projector)
    text = ""
    if page.takes_sentence:
        text = sentence.compact_input_ui(ckpt.src_lang, source) if settings.projector else sentence.input_ui(
            ckpt.src_lang)
    work = (page.slug, str(settings.checkpoint), text, settings.opts)
    if page.takes_sentence and state.held(state.ADMITTED) != work:
        sentence.decode_early(ckpt, text, settings)     # batched with the sentences of the same moment
    with admitted(work) as ok:
        if not ok:
            return
        if page.takes_sentence:
            ex = sentence.translation(ckpt, text, settings, output)
            if ex is None:
                return
            ctx = Context(ckpt, settings, text, ex, pages=st_pages or {}, site=SITE)
        state.hold(state.PAGE, page.slug)              # links.publish writes what this page needs
        with st.container(key=f"page-{page.slug}"):   # names the page for tests (CSS class st-key-page-<slug>)
            page.render(ctx)


def header(title: str, compact: bool) -> tuple[DeltaGenerator | None, DeltaGenerator | None]:
    """The page's title, and where the sentence and its translation go. Compact (projector mode, the front
    of a room): one slim line, the sentence (a button that opens the text box) beside its translation,
    the title read out by screen readers only, so that the page's picture comes first."""
    if not compact:
        st.title(title)
        return None, None           # the sentence and its translation below the title, one after the other
    compact_style()
    st.markdown(f'<h1 style="{HIDDEN}">{html.escape(title)}</h1>', unsafe_allow_html=True)
    source, arrow, output = st.container(key="header").columns([10, 1, 12], vertical_alignment="center")
    arrow.markdown(":material/arrow_forward:")
    return source, output


@contextmanager
def admitted(work: tuple) -> Iterator[bool]:
    """True when the page may be drawn: at once if this session last drew the same `work`
    (a layer change, a click: light), else once the process's gate lets it through,
    showing the student their place in line meanwhile. False: the line is full (said)."""
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

    with gate.admitted(on_wait) as ok:
        note.empty()
        if not ok:
            note.warning(_("The server is full right now: {n} students are waiting. "
                           "Please try again in a minute.").format(n=gate.waiting), icon=":material/group:")
            st.button(_("Try again"), key="admission-retry")
        yield ok
        if ok:
            state.hold(state.ADMITTED, work)


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
