"""The interface's languages (i18n/): every text the app shows has its German, the language is one
session's (a context variable, never the process's), links carry it, and every page drawn in German
has no English sentence left in its texts, labels, help and figures."""
from __future__ import annotations

import json
import re
import threading

import pytest
from streamlit.testing.v1 import AppTest

import i18n
from app.pages import PAGES as APP_PAGES
from i18n import N_, Later, _, ngettext
from tests.support import APP, english_sentences, goto, link_of, page_of

PAGES = tuple(p.slug for p in APP_PAGES)        # every page of the app, by its slug


def test_every_text_shown_has_its_translation_and_every_catalog_is_compiled():
    pytest.importorskip("babel", reason="the catalog check needs Babel (the dev extra)")
    from i18n import catalogs
    assert catalogs.problems() == []


def test_a_compiled_catalog_is_judged_by_what_it_says_not_by_which_babel_wrote_it(tmp_path):
    pytest.importorskip("babel", reason="the catalog check needs Babel (the dev extra)")
    from babel.messages.pofile import read_po

    from i18n import catalogs
    po = i18n.LOCALES / "de" / "LC_MESSAGES" / f"{i18n.DOMAIN}.po"
    with po.open("rb") as f:
        catalog = read_po(f)
    shipped = po.with_suffix(".mo").read_bytes()
    assert b"Generated-By: Babel " in shipped
    other_babel = tmp_path / "other.mo"            # the same messages, another header (same length)
    other_babel.write_bytes(shipped.replace(b"Generated-By: Babel ", b"Generated-By: BABEL "))
    assert catalogs.is_compiled(other_babel, catalog)
    changed = next(m for m in catalog if m.id and isinstance(m.string, str) and m.string)
    changed.string += " (neu)"                       # the .po changed, the .mo not yet compiled
    assert not catalogs.is_compiled(other_babel, catalog)
    assert not catalogs.is_compiled(tmp_path / "missing.mo", catalog)


def test_the_language_belongs_to_the_context_not_the_process():
    assert _("Next") == "Next"                      # nobody chose: English (the command-line tools, tests)
    with i18n.using("de"):
        assert _("Next") == "Weiter"
        elsewhere = []                             # another thread: another session's run
        worker = threading.Thread(target=lambda: elsewhere.append(_("Next")))
        worker.start()
        worker.join()
        assert elsewhere == ["Next"]
    assert _("Next") == "Next"
    with i18n.using("xx"):                         # no such catalog: English
        assert _("Next") == "Next"


def test_plurals_placeholders_and_texts_put_into_words_later():
    with i18n.using("de"):
        assert ngettext("{n} answer so far", "{n} answers so far", 1).format(n=1) == "bisher 1 Antwort"
        assert ngettext("{n} answer so far", "{n} answers so far", 3).format(n=3) == "bisher 3 Antworten"
        later = Later(N_("the text is {n} subword tokens long; the limit is {limit}"), n=300, limit=255)
        assert str(later) == "der Text ist 300 Teilwort-Tokens lang; die Grenze liegt bei 255"
    assert str(later) == "the text is 300 subword tokens long; the limit is 255"
    assert i18n.own_name("de") == "Deutsch" and i18n.own_name("en") == "English"


def test_numbers_are_written_as_the_language_writes_them():
    from i18n import marks, num
    assert [num(0.912, ".2f"), num(0.08, ".0%"), num(12345.6, ",.1f"), marks()] == ["0.91", "8%", "12,345.6", ".,"]
    with i18n.using("de"):
        assert [num(0.912, ".2f"), num(0.08, ".0%"), num(12345.6, ",.1f"), marks()] == \
            ["0,91", "8\u202f%", "12.345,6", ",."]


def test_the_browser_language_is_read_from_its_tag():
    assert [i18n.from_locale(t) for t in ("de-DE", "de", "DE-at", "en_US", "fr-FR", "", None)] == \
        ["de", "de", "de", "en", None, None, None]


def test_the_english_detector_finds_english_and_passes_german_and_data():
    assert english_sentences(["Click a cell to see that knockout's translation."])
    assert not english_sentences(["Klicke auf eine Zelle, um die Übersetzung ohne diesen Teil zu sehen.",
                                  "Ausgabe: `the dog is in the park`", "„the cat and the dog“ wird übersetzt"])


def _texts(at: AppTest) -> list[str]:
    """Every text a page shows: markdown and messages, headers, widget labels and help, figure words."""
    texts = []
    for kind in ("markdown", "caption", "info", "warning", "success", "error", "title", "header", "subheader"):
        texts += [str(e.value) for e in at.get(kind)]
    for kind in ("button", "selectbox", "radio", "slider", "toggle", "text_input", "multiselect", "number_input",
                 "select_slider", "text_area", "download_button"):
        for e in at.get(kind):
            texts += [str(getattr(e, "label", "") or ""), str(getattr(e, "help", "") or "")]
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        layout = spec.get("layout", {})
        texts += [str(layout.get("title", {}).get("text", "") if isinstance(layout.get("title"), dict)
                      else layout.get("title", ""))]
        texts += [str(a.get("title", {}).get("text", "")) for k, a in layout.items()
                  if k.startswith(("xaxis", "yaxis")) and isinstance(a, dict) and isinstance(a.get("title"), dict)]
        texts += [str(t.get("name", "")) for t in spec.get("data", [])]
    return [t for t in texts if t]


@pytest.fixture
def german(app_checkpoints, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params["lang"] = "de"
    return at.run()


def test_every_page_in_german_has_no_english_sentence_left(german):
    at, left = german, {}
    assert not at.exception, at.exception
    assert at.selectbox(key="language").value == "de" and link_of(at)["lang"] == "de"
    for slug in PAGES:
        goto(at, slug)
        assert not at.exception, (slug, at.exception)
        assert page_of(at) == slug
        found = english_sentences(_texts(at))
        if found:
            left[slug] = found
    assert not left, left


def test_the_language_picker_switches_the_whole_page_and_the_link(german):
    at = german
    goto(at, "step")
    assert at.button(key="next").label == "Weiter"
    at.selectbox(key="language").set_value("en").run()
    assert at.button(key="next").label == "Next" and "lang" not in link_of(at)
    at.selectbox(key="language").set_value("de").run()
    assert at.button(key="next").label == "Weiter" and link_of(at)["lang"] == "de"


# Addressing the reader formally: an imperative with "Sie" ("Wählen Sie", "Tippen Sie") or a capitalised
# "Sie", "Ihr", "Ihnen" inside a sentence (at a sentence's start they can be "they", "its" or "their").
_FORMAL_IMPERATIVE = re.compile(r"\b[A-ZÄÖÜ][a-zäöüß]+en Sie\b")
_FORMAL_WORD = re.compile(r"\b(?:Sie|Ihnen|Ihr|Ihre|Ihren|Ihrem|Ihrer|Ihres)\b")


def _formal_address(text: str) -> list[str]:
    """The formal address in one German text: its imperatives with "Sie" and its mid-sentence "Sie"/"Ihr…"."""
    found = [m.group() for m in _FORMAL_IMPERATIVE.finditer(text)]
    for m in _FORMAL_WORD.finditer(text):
        before = text[:m.start()].rstrip(" \n*_`„“\"'(")
        if before and not before.endswith((".", "!", "?", ":")):
            found.append(f"…{text[max(0, m.start() - 20):m.end()]}")
    return found


def test_the_german_interface_says_du_throughout():
    pytest.importorskip("babel", reason="the catalog check needs Babel (the dev extra)")
    from babel.messages.pofile import read_po
    assert _formal_address("Wählen Sie ein Token.") and _formal_address("Die Alternative ist leer: Tippen Sie")
    assert _formal_address("Bitte erlauben Sie es.") and _formal_address("Hier sehen Sie Ihre Übersetzung.")
    assert not _formal_address("Noch keine Statistiken. Sie dauern etwa eine Minute (die Modelle bringen ihre mit).")
    assert not _formal_address("eine lineare Schicht: Ihre Gewichte sind die Embedding-Matrix; wähle ein Token.")
    po = i18n.LOCALES / "de" / "LC_MESSAGES" / f"{i18n.DOMAIN}.po"
    with po.open("rb") as f:
        catalog = read_po(f)
    formal = {}
    for message in catalog:
        strings = message.string if isinstance(message.string, tuple | list) else (message.string,)
        found = [hit for s in strings if s for hit in _formal_address(s)]
        if message.id and found:
            formal[str(message.id)[:60]] = found
    assert not formal, formal
