"""The sentence a student translates: the preset picker, the text box, the translation.

Drawn above every page that takes a sentence (app/pages.py). The sentence's owner is
the setting `text` (app/state.py), so it survives pages that do not draw the box.
"""
from __future__ import annotations

import json

import streamlit as st

from app import polls, resources, state
from app.settings import TEXT, Settings
from model.attribution import attribution_json
from model.checkpoint import Checkpoint
from model.pipeline import Explanation, InputError, explanation_json

# Presets that show known effects (labels say which): image captions like the Multi30K training data,
# and everyday sentences like Tatoeba's. tests/test_shipped.py holds what the shipped models make of them.
PRESETS = {
    "en": {
        "A man in an orange hat starring at something.": "a Multi30K test sentence",
        "The man has eaten the red apple.": "verb-final reordering: 'hat ... gegessen'",
        "A firefighter climbs up the ladder.": "a compound, 'Feuerwehrmann', and 'hinauf' at the end",
        "The woman is holding her baby, and she is smiling.": "pronouns: 'her', 'she'",
        "Two young children in colorful shirts are playing with a big ball on the green grass "
        "next to a small lake while their parents watch.": "a long sentence",
        "I love pizza.": "everyday",
        "We have bought a new car.": "everyday: 'haben ... gekauft', the verb at the end",
        "Where is the bathroom?": "everyday: a question",
        "Can you help me?": "everyday: a question",
        "I have already eaten.": "everyday",
    },
    "de": {
        "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.": "ein Multi30K-Testsatz",
        "Wir haben ein neues Auto gekauft.": "Verb am Satzende: 'gekauft' wird 'bought'",
        "Ein Feuerwehrmann klettert auf die Leiter des Feuerwehrautos.": "Komposita",
        "Die Frau hält ihr Baby und sie lächelt.": "Pronomen",
        "Ich liebe Pizza.": "Alltag",
        "Ich habe den Apfel gegessen.": "Alltag: 'habe ... gegessen' wird 'ate'",
        "Kannst du mir helfen?": "Alltag: eine Frage",
        "Ich habe heute keine Zeit.": "Alltag",
    },
}
CUSTOM = "(type your own)"
PRESET = "preset"         # the preset picker's widget key (it only sets the sentence)
TEXT_LANG = "text_lang"   # owner key: the language the sentence is in


def _use_preset() -> None:
    chosen = state.widget(PRESET)
    if chosen != CUSTOM:
        state.set_widget(TEXT.name, chosen)


def _follow_language(src_lang: str, first_preset: str) -> None:
    """A model reading another language gets that language's first preset."""
    if state.get(TEXT_LANG, src_lang) != src_lang:
        state.set_widget(TEXT.name, first_preset)
        state.mirror(PRESET, CUSTOM)
    state.put(TEXT_LANG, src_lang)


def input_ui(src_lang: str) -> str:
    presets = PRESETS.get(src_lang, {})
    first = next(iter(presets), "")
    _follow_language(src_lang, first)
    if state.widget(PRESET) is None:
        state.mirror(PRESET, CUSTOM)
    st.selectbox("Try a preset sentence", [CUSTOM, *presets], key=PRESET, on_change=_use_preset,
                 format_func=lambda s: s if s == CUSTOM else f"{s}  ({presets[s]})")
    state.restore(TEXT.name, first)
    text = st.text_input(f"Sentence to translate ({src_lang}, at most {resources.MAX_APP_TOKENS} subword tokens)",
                         key=TEXT.name, max_chars=1000)
    return state.remember(TEXT.name, text)


def _too_long(ckpt: Checkpoint, text: str) -> bool:
    return bool(text.strip()) and len(ckpt.src_tokenizer.encode(text)) > resources.MAX_APP_TOKENS


def decode_early(ckpt: Checkpoint, text: str, settings: Settings) -> None:
    """Decode the sentence before the page waits in line for the server: sessions that
    ask at the same moment are decoded as one batch (app/batching.py), and the
    translation below is then a cache hit. Text the model cannot take is left to it."""
    if _too_long(ckpt, text):
        return
    try:
        with st.spinner("Translating…"):
            resources.get_explanation(str(settings.checkpoint), text, settings.opts)
    except InputError:
        return


def translation(ckpt: Checkpoint, text: str, settings: Settings) -> Explanation | None:
    """Translate and show the result; None (with a message) for text the model cannot take."""
    if _too_long(ckpt, text):
        st.warning(f"That sentence is longer than {resources.MAX_APP_TOKENS} subword tokens; please shorten it.")
        return None
    try:
        with st.spinner("Translating…"):
            ex = resources.get_explanation(str(settings.checkpoint), text, settings.opts)
    except InputError as exc:
        st.info(f"Nothing to show yet: {exc}.")
        return None
    if polls.answer_hidden(polls.NEXT_TOKEN):
        st.container(key="translation").markdown("### (the translation is hidden while the class answers)")
        return ex
    st.container(key="translation").markdown(f"### {ex.output or '(empty output)'}")
    confidence_note(ckpt, ex)
    unknown = ex.source_ids.count(ckpt.config.unk_id)
    if unknown:
        st.caption(f"{unknown} piece(s) of the input are outside the vocabulary and shown as <unk>.")
    export_ui(ckpt, ex, settings)
    return ex


def confidence_note(ckpt: Checkpoint, ex: Explanation) -> None:
    """Whether to trust the translation: calibrated on val (model/calibrate.py), with its reasons."""
    conf = ex.confidence(ckpt)
    reasons = conf.reasons(ex.output_pieces(ckpt))
    box = st.container(key="confidence")
    why = f" Why: {'; '.join(reasons)}." if reasons else ""
    if conf.p_wrong is None:
        box.caption(f"Mean token probability {conf.mean_prob:.2f}. This model has no calibrated confidence "
                    f"(`python -m model.calibrate` fits one).{why}")
    elif conf.flagged:
        box.warning(f"**Check this translation.** The model is unsure: by its own probabilities, translations "
                    f"like this one are wrong {conf.p_wrong:.0%} of the time.{why}", icon=":material/help:")
    else:
        box.caption(f"Confident: translations this sure are wrong about {conf.p_wrong:.0%} of the time "
                    f"(mean token probability {conf.mean_prob:.2f}).{why}")


def trace_json(ckpt: Checkpoint, ex: Explanation, settings: Settings, integrated: bool = False) -> dict:
    """The trace format with its `attribution` part (docs/trace-format.md)."""
    out = explanation_json(ex, ckpt, settings.opts)
    att = resources.get_attribution(ckpt, ex, (str(settings.checkpoint), ex.text, settings.opts), integrated)
    return out | {"attribution": attribution_json(att)}


def export_ui(ckpt: Checkpoint, ex: Explanation, settings: Settings) -> None:
    st.sidebar.download_button(
        "Download this trace (JSON)",
        data=lambda: json.dumps(trace_json(ckpt, ex, settings), ensure_ascii=False),
        file_name="trace.json",
        mime="application/json",
        key="dl_trace",
        on_click="ignore",
        help="the documented trace format: docs/trace-format.md",
    )
