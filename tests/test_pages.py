"""The paths a student takes between pages: every ordered pair of pages keeps the sentence,
its translation, the layer / head and the decoding step; links made before pages had
their own URL paths still open the same state. Plus the pieces that make this hold: the
step cursor, the setting specs and links, and the page registry."""
from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from app.links import current, linked_step, parse
from app.pages import BY_SLUG, PAGES, SITE
from app.settings import REGISTRY
from app.state import StepCursor
from tests.support import APP, LAYER_PAGES, ROOT, goto, link_of, page_of, tour

SLUGS = [p.slug for p in PAGES]
SENTENCE = "the cat sits on a red ball"




def test_tour_takes_every_ordered_pair_once():
    route = tour(SLUGS, "step")
    pairs = list(zip(route, route[1:]))
    assert len(pairs) == len(SLUGS) * (len(SLUGS) - 1) == len(set(pairs))


def translation_of(at: AppTest) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("### "))




@pytest.fixture
def at(app_checkpoints, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    return AppTest.from_file(APP, default_timeout=60).run()


def prepare(at: AppTest) -> str:
    """A typed sentence, layer 1 / head 2, a lab set up for sort without positional
    encoding, and step 2 of the step page; returns the translation."""
    goto(at, "lab")
    at.selectbox(key="lab_task").set_value("sort").run()
    at.toggle(key="lab_positional_encoding").set_value(False).run()
    goto(at, "explore")
    at.text_input(key="text").set_value(SENTENCE).run()
    at.selectbox(key="layer").set_value(1).run()
    at.selectbox(key="head").set_value(2).run()
    goto(at, "step")
    at.button(key="next").click().run()
    at.button(key="next").click().run()
    assert not at.exception and any("**Step 2**" in m.value for m in at.markdown)
    return translation_of(at)


def check_page(at: AppTest, slug: str, translation: str) -> None:
    assert not at.exception, at.exception
    assert page_of(at) == slug
    if BY_SLUG[slug].takes_sentence:
        assert at.text_input(key="text").value == SENTENCE
        assert translation_of(at) == translation
    if slug == "lab":
        assert at.selectbox(key="lab_task").value == "sort" and at.toggle(key="lab_positional_encoding").value is False
    if slug in LAYER_PAGES:
        assert (at.selectbox(key="layer").value, at.selectbox(key="head").value) == (1, 2)
    if slug == "step":
        assert any("**Step 2**" in m.value for m in at.markdown)
        assert [s.value for s in at.slider if s.label == "Step"] == [2]
    assert link_of(at) | {"text": SENTENCE, "layer": "1", "head": "2", "step": "2"} == link_of(at)


def test_every_page_to_every_page_keeps_the_students_work(at):
    translation = prepare(at)
    route = tour(SLUGS, "step")
    for a, b in zip(route, route[1:]):
        goto(at, b)
        try:
            check_page(at, b, translation)
        except AssertionError as exc:
            raise AssertionError(f"after {a} -> {b}: {exc}") from exc


def test_a_sentence_typed_after_a_card_link_survives_the_card(at):
    """Bug: a link to the card with text=X, then a new sentence Y, then the card: X came back."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"view": "card", "text": "the dog runs"})
    at.run()
    assert page_of(at) == "card"
    goto(at, "explore")
    assert at.text_input(key="text").value == "the dog runs"
    at.text_input(key="text").set_value("a woman plays with a blue ball").run()
    goto(at, "card")
    goto(at, "explore")
    assert at.text_input(key="text").value == "a woman plays with a blue ball"
    assert link_of(at)["text"] == "a woman plays with a blue ball"


OLD_LINKS = json.loads((ROOT / "tests" / "data" / "links_before_pages.json").read_text())
WIDGETS = {"checkpoint": "selectbox", "method": "radio", "beam_size": "slider", "alpha": "slider",
           "temperature": "slider", "top_k": "slider", "seed": "number_input", "projector": "toggle",
           "kind": "radio", "layer": "selectbox", "head": "selectbox", "query": "selectbox"}


@pytest.mark.parametrize("case", OLD_LINKS, ids=[c["name"] for c in OLD_LINKS])
def test_links_made_before_pages_open_the_same_state(app_checkpoints, monkeypatch, case):
    """tests/data/links_before_pages.json: links made with the app before this structure
    (one `view=` parameter, no URL paths), by driving its widgets in AppTest, with what
    each showed. Opened at the app's root, each must show the same page and state."""
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(case["link"])
    at.run()
    seen = dict(case["observed"])
    assert not at.exception and page_of(at) == seen.pop("page")
    if "text" in seen:
        text = seen.pop("text")
        if page_of(at) != "card":
            assert at.text_input(key="text").value == text
        assert link_of(at)["text"] == text
    if "step" in seen:
        step = seen.pop("step")
        assert any(f"**Step {step}**" in m.value for m in at.markdown)
    for key, value in seen.items():
        assert getattr(at, WIDGETS[key])(key=key).value == value, key


# ---- the pieces ----------------------------------------------------------------------------------
def test_the_cursor_follows_its_decoding():
    c = StepCursor(pending=5)
    assert c.follow("a", 10) == 5 and c.pending is None          # a link's step, once
    c.move(3, 10)
    assert c.step == 8 and c.follow("a", 10) == 8                 # same decoding: stays
    c.move(5, 10)
    assert c.step == 9                                            # clamped at the last step
    assert c.follow("b", 4) == 0                                  # another decoding: from the start
    c.toggle_play()
    assert c.tick(4) and c.tick(4) and c.tick(4) and c.step == 3 and not c.tick(4) and not c.playing
    c.go(7, 4)
    assert c.step == 3 and c.follow("b", 2) == 1                  # fewer steps: clamped


def test_the_step_slider_is_drawn_anew_after_every_move_but_its_own():
    """A request the browser sent before it saw a move names the old slider, not the new one."""
    c = StepCursor()
    c.follow("a", 10)
    keys = [c.slider_key]
    for act in (lambda: c.move(1, 10), lambda: c.go(5, 10), c.reset, lambda: setattr(c, "pending", 4),
                c.toggle_play):
        act()
        c.follow("a", 10)
        c.tick(10)
        keys.append(c.slider_key)
    assert len(set(keys)) == len(keys) and c.step == 5
    c.slide(2)
    assert c.step == 2 and c.slider_key == keys[-1]               # the slider's own move keeps its key
    c.move(0, 10)
    assert c.slider_key == keys[-1]                               # no move, no new slider


def test_every_linked_setting_round_trips_and_ignores_junk():
    for param, spec in SITE.linked.items():
        assert spec.default is None or spec.valid(spec.default), param
        for value in [v for v in (spec.default, *(spec.bounds or ()), *(spec.choices or ())) if v is not None]:
            assert spec.from_link(spec.to_link(value)) == value, (param, value)
    got = parse({"beam": "99", "alpha": "x", "method": "nope", "layer": "-1", "kind": "decoder_self",
                 "checkpoint": "elsewhere", "text": "t" * 1001, "unknown": "1"}, ["multi30k-en-de"], SITE.linked)
    assert got == {"kind": "decoder_self"}
    assert linked_step({"step": "3"}) == 3 and linked_step({"step": "x"}) is None and linked_step({}) is None


def test_links_hold_the_sentence_and_what_differs_from_the_defaults():
    values = {spec.name: spec.default for spec in SITE.linked.values()} | {"text": "a dog", "beam_size": 8}
    assert current(SITE, values, 0) == {"text": "a dog", "beam": "8"}
    assert current(SITE, values, 4)["step"] == "4"
    assert current(SITE, values, 0, page="overview") == {"text": "a dog", "beam": "8", "block": "encoder.self_attn"}


def test_the_pages_hand_links_every_setting_a_page_declares():
    """Links and the class read the settings the pages declare (`app.links.Site`), not a registry they would
    have to import the pages to fill: every registered setting with a link parameter is there, and each
    page lists its own."""
    assert {s.param: s for s in REGISTRY.values() if s.param} == dict(SITE.linked)
    assert SITE.slugs == tuple(SLUGS) and SITE.landing == "overview"
    assert "block" in {s.param for s in BY_SLUG["overview"].settings}
    assert "block" not in {s.param for s in BY_SLUG["masks"].settings}


def test_page_slugs_are_unique_and_every_page_renders_through_the_registry():
    assert len(SLUGS) == len(set(SLUGS)) and SLUGS[0] == "overview"
    assert all(callable(p.render) for p in PAGES)


# ---- the model's own length penalty ---------------------------------------------------------------
def test_the_alpha_slider_follows_the_models_own_unless_moved(tokenizer, tmp_path, monkeypatch):
    """A checkpoint tuned for alpha 3.4 (config.json "decoding") opens with 3.4 and a link
    without alpha; switching to a model without one moves an untouched slider to 0.6; a
    moved slider stays, and its value is in the link."""
    from model.storage.checkpoint import save_checkpoint, write_decoding
    from tests.support import tiny_model
    m = tiny_model(tokenizer.vocab_size, seed=1)
    for name, langs in (("multi30k-en-de", ("en", "de")), ("multi30k-de-en", ("de", "en"))):
        save_checkpoint(tmp_path / name, m, tokenizer, tokenizer, meta={"src_lang": langs[0], "tgt_lang": langs[1]})
    write_decoding(tmp_path / "multi30k-en-de", {"alpha": 3.4})   # the shipped en->de's; the slider once ended at 3
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"text": SENTENCE})
    at.run()
    goto(at, "explore")
    assert at.slider(key="alpha").value == 3.4 and "alpha" not in link_of(at)
    at.selectbox(key="checkpoint").set_value("multi30k-de-en").run()
    assert at.slider(key="alpha").value == 0.6 and "alpha" not in link_of(at)
    at.slider(key="alpha").set_value(1.2).run()
    assert link_of(at)["alpha"] == "1.2"
    at.selectbox(key="checkpoint").set_value("multi30k-en-de").run()
    assert at.slider(key="alpha").value == 1.2 and link_of(at)["alpha"] == "1.2"
    assert not at.exception

    at = AppTest.from_file(APP, default_timeout=60)          # a link that names 0.6 keeps it on a 3.4 model
    at.query_params.update({"text": SENTENCE, "alpha": "0.6", "view": "explore"})
    at.run()
    assert at.slider(key="alpha").value == 0.6 and link_of(at)["alpha"] == "0.6"


def test_links_leave_out_an_alpha_equal_to_the_models_own():
    values = {"text": "a dog", "alpha": 1.5}
    assert current(SITE, values, 0) == {"text": "a dog", "alpha": "1.5"}
    assert current(SITE, values, 0, defaults={"alpha": 1.5}) == {"text": "a dog"}
    assert current(SITE, {"text": "a dog", "alpha": 0.6}, 0, defaults={"alpha": 1.5})["alpha"] == "0.6"
