"""The sentence a student translates: the preset picker, the text box, the translation.

Drawn above every page that takes a sentence (app/pages.py). The sentence's owner is
the setting `text` (app/state.py), so it survives pages that do not draw the box.
"""
from __future__ import annotations

import contextlib
import functools
import json
import urllib.parse
from pathlib import Path

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

import webpage
from app import polls, resources, state, what_if
from app.settings import MAX_TEXT_CHARS, TEXT, SidebarChoices
from app.ui import plain
from i18n import N_, _, language, ngettext
from model.analysis.attribution import Cost, attribution_json
from model.inference.pipeline import SCORES, Explanation, InputError, explanation_json
from model.storage.checkpoint import Checkpoint
from serving import class_ahead
from serving.class_store import ClassGone, NotTeacher, StoreDown

# Presets that show known effects (labels say which): image captions like the Multi30K training data,
# and everyday sentences like Tatoeba's. tests/test_shipped.py holds what the shipped models make of them.
PRESETS = {
    "en": {
        "A man in an orange hat starring at something.": N_("a Multi30K test sentence"),
        "The man has eaten the red apple.": N_("verb-final reordering: 'hat ... gegessen'"),
        "A firefighter climbs up the ladder.": N_("a compound, 'Feuerwehrmann', and 'hinauf' at the end"),
        "The woman is holding her baby because she is tired.": N_("pronouns: 'her', 'she'"),
        "Two young children in colorful shirts are playing with a big ball on the green grass "
        "next to a small lake while their parents watch.": N_("a long sentence"),
        "I love pizza.": N_("everyday"),
        "We have bought a new car.": N_("everyday: 'haben ... gekauft', the verb at the end"),
        "Where is the bathroom?": N_("everyday: a question"),
        "Can you help me?": N_("everyday: a question"),
        "I have already eaten.": N_("everyday"),
    },
    "de": {
        "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.": N_("a Multi30K test sentence"),
        "Wir haben ein neues Auto gekauft.": N_("the verb at the end: 'gekauft' becomes 'bought'"),
        "Ein Feuerwehrmann klettert auf die Leiter des Feuerwehrwagens.": N_("compounds"),
        "Die Frau hält ihr Baby und sie lächelt.": N_("pronouns"),
        "Ich liebe Pizza.": N_("everyday"),
        "Ich habe den Apfel gegessen.": N_("everyday: 'habe ... gegessen' becomes 'ate'"),
        "Kannst du mir helfen?": N_("everyday: a question"),
        "Ich habe heute keine Zeit.": N_("everyday"),
    },
}
CUSTOM = N_("(type your own)")      # the picker's first line: no preset (shown translated)
PRESET = "preset"         # the preset picker's widget key (it only sets the sentence)
TEXT_LANG = "text_lang"   # owner key: the language the sentence is in
SEPARATOR = "  ("         # a preset's line: the sentence, then its label in brackets
LABEL_CHARS = 160         # the compact header shows the sentence whole (wrapped) up to this many characters


def _line(sentence: str, label: str) -> str:
    return f"{sentence}{SEPARATOR}{_(label)})"


def _use_preset() -> None:
    """The picker's lines are what it shows (in the interface's language): the sentence is the line's
    start; the first line, "(type your own)" in any language, names no sentence."""
    sentence = str(state.widget(PRESET, "")).rsplit(SEPARATOR, 1)[0]
    if any(sentence in presets for presets in PRESETS.values()):
        state.set_widget(TEXT.name, sentence)


def _follow_language(src_lang: str, first_preset: str) -> None:
    """A model reading another language gets that language's first preset."""
    if state.get(TEXT_LANG, src_lang) != src_lang:
        state.set_widget(TEXT.name, first_preset)
        state.forget(PRESET)
    state.put(TEXT_LANG, src_lang)


def input_ui(src_lang: str, where: DeltaGenerator | None = None) -> str:
    """The preset picker and the text box, in `where` (the page, or the compact header's popover)."""
    where = where or st
    presets = PRESETS.get(src_lang, {})
    first = next(iter(presets), "")
    _follow_language(src_lang, first)
    lines = [_(CUSTOM), *(_line(s, label) for s, label in presets.items())]
    if state.widget(PRESET) not in lines:              # first run, or another interface language
        state.mirror(PRESET, lines[0])
    where.selectbox(_("Try a preset sentence"), lines, key=PRESET, on_change=_use_preset)
    state.restore(TEXT.name, first)
    text = where.text_input(_("Sentence to translate ({lang}, at most {n} subword tokens)").format(
        lang=src_lang, n=resources.MAX_APP_TOKENS), key=TEXT.name, max_chars=MAX_TEXT_CHARS)
    return state.remember(TEXT.name, text)


def compact_input_ui(src_lang: str, where: DeltaGenerator) -> str:
    """The front of a room's header: the sentence as a button that opens the picker and the text box."""
    shown = state.widget(TEXT.name) or state.get(TEXT.name) or next(iter(PRESETS.get(src_lang, {})), "")
    label = shown if len(shown) <= LABEL_CHARS else shown[:LABEL_CHARS - 1] + "…"
    with where.popover(plain(label) or _("Type a sentence"), icon=":material/edit:", type="tertiary",
                       key="edit_sentence", help=_("Change the sentence ({lang})").format(lang=src_lang)):
        return input_ui(src_lang, st.container())


def _too_long(ckpt: Checkpoint, text: str) -> bool:
    return bool(text.strip()) and len(ckpt.src_tokenizer.encode(text)) > resources.MAX_APP_TOKENS


def _announce(work: class_ahead.Work) -> None:
    """A teacher's run, about to decode: said in the class, so that every app process decodes it too
    (serving/class_ahead.py). Trouble with the class is left to the end of the run, which publishes the view."""
    m, store = state.held(state.CLASS), resources.class_store()
    if m is None or not m.teacher or store is None or not work.text.strip():
        return
    try:
        store.announce(m.code, m.secret, class_ahead.say(work))
    except (ClassGone, NotTeacher, StoreDown):
        pass


def decode_early(ckpt: Checkpoint, text: str, settings: SidebarChoices, ahead: tuple[str, ...] = ()) -> None:
    """Decode the sentence before the page waits in line for the server: sessions that
    ask at the same moment are decoded as one batch (app/batching.py), and the
    translation below is then a cache hit. Text the model cannot take is left to it. A teacher's run says in
    the class what it is about to compute: this decoding and what the page computes from it (`ahead`: Page.ahead;
    serving/class_ahead.py)."""
    if _too_long(ckpt, text):
        return
    _announce(class_ahead.Work(str(settings.checkpoint), text, settings.opts, settings.precision, ahead))
    try:
        _explained(text, settings)
    except InputError:
        return


def _explained(text: str, settings: SidebarChoices) -> Explanation:
    """The sentence's explanation, under a "Translating…" spinner only when it is not computed yet (a spinner
    starts a thread and sends a message, even when it never shows)."""
    args = (str(settings.checkpoint), text, settings.opts)
    ready = resources.explanation_ready(*args, precision=settings.precision)
    with contextlib.nullcontext() if ready else st.spinner(_("Translating…")):
        return resources.get_explanation(*args, precision=settings.precision)


def translation(ckpt: Checkpoint, text: str, settings: SidebarChoices,
                where: DeltaGenerator | None = None) -> Explanation | None:
    """Translate and show the result in `where` (the page, or the compact header's right side); None
    (with a message) for text the model cannot take."""
    where = where or st
    if _too_long(ckpt, text):
        where.warning(_("That sentence is longer than {n} subword tokens; please shorten it.").format(
            n=resources.MAX_APP_TOKENS))
        return None
    try:
        ex = _explained(text, settings)
    except InputError as exc:
        where.info(_("Nothing to show yet: {why}.").format(why=exc))
        if settings.opts.prefix:
            what_if.clear_button(where, key="what_if_clear_unfit")
        return None
    heading = "### " if not settings.projector else "#### "
    if polls.answer_hidden(polls.NEXT_TOKEN):
        where.container(key="translation").markdown(heading + _("(the translation is hidden while the class answers)"))
        return ex
    where.container(key="translation").markdown(heading + (ex.output or _("(empty output)")))
    confidence_note(ckpt, ex, where, short=settings.projector)
    if settings.opts.prefix:
        where.caption(_("Forced to start with “{start}” (the step page's “What if”).").format(
            start=ckpt.tgt_tokenizer.decode(settings.opts.prefix)))
    unknown = ex.source_ids.count(ckpt.config.unk_id)
    if unknown:
        where.caption(ngettext("{n} piece of the input is outside the vocabulary and shown as <unk>.",
                               "{n} pieces of the input are outside the vocabulary and shown as <unk>.",
                               unknown).format(n=unknown))
    export_ui(ckpt, ex, settings)
    return ex


def confidence_note(ckpt: Checkpoint, ex: Explanation, where: DeltaGenerator | None = None,
                    short: bool = False) -> None:
    """Whether to trust the translation: calibrated on val (model/commands/calibrate.py), with its reasons.
    `short` (the front of a room): a few words, the whole sentence in their tooltip."""
    said, brief, flagged = ex.confidence(ckpt).words(ex.output_pieces(ckpt))
    box = (where or st).container(key="confidence")
    if flagged:
        if not short:
            box.warning(said, icon=":material/help:")
            return
        box.markdown(":orange-badge[:material/help: " + brief + "]", help=said)
        return
    if short:
        box.caption(brief, help=said)
    else:
        box.caption(said)


def trace_json(ckpt: Checkpoint, ex: Explanation, settings: SidebarChoices, upto: Cost = Cost.GRADIENT) -> dict:
    """The trace format with its `attribution` part (docs/trace-format.md), every method up to `upto`; its
    trace records the scores too (one teacher-forced pass, when the button is pressed)."""
    scored = resources.get_explanation(str(settings.checkpoint), ex.text, settings.opts, recording=SCORES,
                                       precision=settings.precision)
    out = explanation_json(scored, ckpt, settings.opts)
    att = resources.get_attribution(ckpt, ex, (str(settings.checkpoint), ex.text, settings.opts), upto)
    return out | {"attribution": attribution_json(att)}


def export_ui(ckpt: Checkpoint, ex: Explanation, settings: SidebarChoices) -> None:
    st.sidebar.download_button(
        _("Download this trace (JSON)"),
        data=lambda: json.dumps(trace_json(ckpt, ex, settings), ensure_ascii=False),
        file_name="trace.json",
        mime="application/json",
        key="dl_trace",
        on_click="ignore",
        help=_("the documented trace format: docs/trace-format.md"),
    )
    st.sidebar.download_button(
        _("Download as a web page"),
        data=functools.partial(lesson_file, settings.checkpoint, ex.text, language(), app_url(st.context.url)),
        file_name="lesson.html",
        mime="text/html",
        key="dl_html",
        on_click="ignore",
        icon=":material/web:",
        help=_("this sentence's translation, attention, decoding steps, attribution, positional encoding and masks "
               "in one file that opens offline in any browser (the same as `transformer-explained html`)"),
    )


def app_url(url: str | None) -> str:
    """The app's own address, for the web page's links back: the page's URL without the page."""
    if not url:
        return webpage.content.APP_URL
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path.rsplit('/', 1)[0]}"


def lesson_file(checkpoint: Path, text: str, lang: str, url: str) -> str:
    """The web page of one sentence (webpage/), as the command makes it. It runs on Streamlit's own thread when
    the button is pressed: the language is an argument, not the session's context."""
    return webpage.build([webpage.Request(text, checkpoint.name)], lambda _name: resources.get_checkpoint(
        str(checkpoint)), lang=lang, app_url=url)
