"""The Streamlit app: type a sentence, see every attention head, step through decoding.

Run with `make app` (or `streamlit run app/main.py`). Checkpoints are looked up in
checkpoints/ (or $TRANSFORMER_CHECKPOINTS).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `streamlit run app/main.py` from anywhere
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from app import links, state  # noqa: E402
from app.settings import Settings, sidebar  # noqa: E402
from app.views import card, explore, head, knockout, masks, positional, stepper  # noqa: E402
from model.checkpoint import CheckpointError  # noqa: E402
from model.pipeline import InputError, explanation_json  # noqa: E402

# Presets that show known effects (labels say which).
PRESETS = {
    "en": {
        "A man in an orange hat starring at something.": "a Multi30K test sentence",
        "The man has eaten the red apple.": "verb-final reordering: 'hat ... gegessen'",
        "A firefighter climbs the ladder of the fire truck.": "compounds: 'Feuerwehrmann', 'Feuerwehrauto'",
        "The woman is holding her baby, and she is smiling.": "pronouns: 'her', 'she'",
        "Two young children in colorful shirts are playing with a big ball on the green grass "
        "next to a small lake while their parents watch.": "a long sentence",
    },
    "de": {
        "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.": "ein Multi30K-Testsatz",
        "Der Mann hat den roten Apfel gegessen.": "Verb am Satzende",
        "Ein Feuerwehrmann klettert auf die Leiter des Feuerwehrautos.": "Komposita",
        "Die Frau hält ihr Baby und sie lächelt.": "Pronomen",
    },
}
VIEWS = {
    "explore": "Translate & explore attention",
    "step": "Step through decoding",
    "positional": "Positional encoding",
    "masks": "Masks",
    "head": "Inside one head",
    "knockout": "Head knockout",
    "card": "Model card & training",
}


def no_checkpoint_page() -> None:
    st.title("No checkpoint yet")
    st.info(f"The app looks for trained checkpoints in `{state.checkpoints_dir()}` and found none.")
    st.markdown("Train one (about 2 hours on a 2-core CPU, much less on a GPU):")
    st.code(
        "python train.py --data ../shared/data/multi30k --src en --tgt de --preset small \\\n"
        "    --out checkpoints/multi30k-en-de --time-budget 110 --half",
        language="bash",
    )


CUSTOM = "(type your own)"


def _use_preset() -> None:
    if st.session_state["preset"] != CUSTOM:
        st.session_state["text"] = st.session_state["preset"]


def input_ui(src_lang: str) -> str:
    presets = PRESETS.get(src_lang, {})
    if st.session_state.get("text_lang", src_lang) != src_lang:   # switched to a model reading another language
        st.session_state["text"], st.session_state["preset"] = next(iter(presets), ""), CUSTOM
    st.session_state["text_lang"] = src_lang
    st.session_state.setdefault("text", next(iter(presets), ""))
    st.selectbox(
        "Try a preset sentence",
        [CUSTOM, *presets],
        key="preset",
        on_change=_use_preset,
        format_func=lambda s: s if s == CUSTOM else f"{s}  ({presets[s]})",
    )
    return st.text_input(
        f"Sentence to translate ({src_lang}, at most {state.MAX_APP_TOKENS} subword tokens)", key="text", max_chars=1000
    )


def main() -> None:
    st.set_page_config(page_title="Transformer, explained", page_icon="🔎", layout="wide")
    try:
        page()
    finally:  # also when a view ends the run early (st.rerun while playing)
        if st.session_state.get("_links_restored"):
            links.publish()


def page() -> None:
    checkpoints = state.available_checkpoints()
    if not checkpoints:
        no_checkpoint_page()
        return
    links.restore(tuple(VIEWS), tuple(p.name for p in checkpoints))
    view = st.sidebar.radio("View", list(VIEWS), format_func=VIEWS.get, key="view")
    settings: Settings = sidebar(checkpoints, state.DEFAULT_CHECKPOINT)
    try:
        ckpt = state.get_checkpoint(str(settings.checkpoint))
    except CheckpointError as exc:
        st.error(f"This checkpoint cannot be loaded: {exc}")
        return
    st.title(f"Transformer, explained: {ckpt.src_lang} → {ckpt.tgt_lang}")
    if view == "card":
        card.render(ckpt, settings)
        return
    text = input_ui(ckpt.src_lang)
    too_long = len(ckpt.src_tokenizer.encode(text)) > state.MAX_APP_TOKENS if text.strip() else False
    if too_long:
        st.warning(f"That sentence is longer than {state.MAX_APP_TOKENS} subword tokens; please shorten it.")
        return
    try:
        with st.spinner("Translating…"):
            ex = state.get_explanation(str(settings.checkpoint), text, settings.opts)
    except InputError as exc:
        st.info(f"Nothing to show yet: {exc}.")
        return
    st.container(key="translation").markdown(f"### {ex.output or '(empty output)'}")
    unknown = ex.source_ids.count(ckpt.config.unk_id)
    if unknown:
        st.caption(f"{unknown} piece(s) of the input are outside the vocabulary and shown as <unk>.")
    export_ui(ckpt, ex, settings)
    if view == "step":
        greedy = None
        if settings.opts.method == "beam":
            greedy = state.get_explanation(str(settings.checkpoint), text, stepper.greedy_options(settings.opts))
        stepper.render(ckpt, ex, settings, greedy)
        return
    views = {"explore": explore, "positional": positional, "masks": masks, "head": head, "knockout": knockout}
    views[view].render(ckpt, ex, settings)


def export_ui(ckpt, ex, settings: Settings) -> None:
    with st.sidebar:
        st.download_button(
            "Download this trace (JSON)",
            data=lambda: json.dumps(explanation_json(ex, ckpt, settings.opts), ensure_ascii=False),
            file_name="trace.json",
            mime="application/json",
            key="dl_trace",
            on_click="ignore",
            help="the documented trace format: docs/trace-format.md",
        )


main()
