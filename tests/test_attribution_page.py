"""The page "What the model used" under AppTest: it draws the methods, says what is missing and why,
quotes a measured faithfulness when the checkpoint has one, and the step page shows its step's
attribution beside the cross-attention."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from model.analysis.attribution.scores import Scores
from model.storage.checkpoint import write_config_entry
from tests.support import APP, goto, page_of

MEASURED = {"sentences": 500, "tokens": 6000, "split": "test_2016_flickr", "data": "x",
            "drop": {"alti": {"1": 2.5, "3": 4.0}, "attention.layer1": {"1": 2.0, "3": 3.5},
                     "random": {"1": 0.3, "3": 0.9}},
            "stderr": {"alti": {"1": 0.1, "3": 0.1}, "attention.layer1": {"1": 0.1, "3": 0.1},
                       "random": {"1": 0.05, "3": 0.1}},
            "measure": "mean drop", "ig_completeness_within_1pct": 1.0, "seconds_per_sentence": {}}
IG = "Integrated gradients (baseline: zero embeddings)"     # how the methods list shows it


@pytest.fixture
def at(app_checkpoints, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    at = AppTest.from_file(APP, default_timeout=90).run()
    at.text_input(key="text").set_value("the cat sits").run()
    return at


def charts(at: AppTest) -> list[str]:
    return [c.proto.id for c in at.get("plotly_chart")]


def test_the_page_draws_the_chosen_methods_and_the_heads(at):
    goto(at, "attribution")
    assert not at.exception and page_of(at) == "attribution"
    assert at.multiselect(key="attr_methods").value == ["attention.layer1", "alti", "integrated_gradients"]
    assert sum("how faithful" in i.value.lower() for i in at.info) == 1           # not measured for this model
    assert len(at.get("plotly_chart")) == 3 + 2                                    # 3 methods, shares, heads
    at.session_state["attr_one_head"] = True                                        # "One head" opened
    at.run()
    assert not at.exception and len(at.get("plotly_chart")) == 3 + 2 + 2            # and its two charts
    at.selectbox(key="attr_reference").set_value("integrated_gradients").run()
    assert not at.exception
    at.toggle(key="attr_ig").set_value(False).run()
    assert not at.exception and IG not in at.multiselect(key="attr_methods").options
    at.multiselect(key="attr_methods").set_value(["value_norm", "rollout"]).run()
    assert not at.exception and len(at.get("plotly_chart")) == 2 + 2 + 2


def test_a_measured_faithfulness_is_quoted(app_checkpoints, tmp_path, monkeypatch):
    measured = tmp_path / "checkpoints"                   # a copy: the app's cache keeps every loaded checkpoint
    shutil.copytree(app_checkpoints, measured)
    write_config_entry(measured / "multi30k-en-de", "faithfulness", MEASURED)
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(measured))
    at = AppTest.from_file(APP, default_timeout=90).run()
    goto(at, "attribution")
    quote = " ".join(s.value for s in at.success)
    assert "500 sentences" in quote and "2.50" in quote and "2.00" in quote and "0.30" in quote
    assert not at.exception


def test_the_step_page_shows_what_the_step_used(at):
    at.radio(key="method").set_value("greedy").run()
    goto(at, "step")
    at.button(key="next").click().run()
    assert not at.exception
    assert any("came from the source" in m.value and "Where it looked" in m.value for m in at.markdown)
    before = len(at.get("plotly_chart"))
    at.toggle(key="step_used_chart").set_value(True).run()
    assert not at.exception and len(at.get("plotly_chart")) == before + 1


def test_a_long_sentence_waits_for_a_click_before_integrated_gradients(at):
    at.radio(key="method").set_value("greedy").run()
    at.text_input(key="text").set_value("the big dog runs in the park and the small cat sits on the red ball").run()
    goto(at, "attribution")
    assert not at.exception
    assert IG not in at.multiselect(key="attr_methods").options
    at.button(key="attr_ig_go").click().run()
    assert not at.exception and IG in at.multiselect(key="attr_methods").options
    at.selectbox(key="attr_reference").set_value("rollout").run()        # any later rerun: computed, no button
    assert IG in at.multiselect(key="attr_methods").options
    assert not any(b.key == "attr_ig_go" for b in at.button)


def _first_source_token(inputs, layer):
    """A toy method: every generated token used the first source token alone."""
    t, s = len(inputs.output) + 1, len(inputs.source)
    source = np.zeros((t, s))
    source[:, 0] = 1.0
    return Scores("toy_first", source, np.zeros((t, t)), joint=True)


def test_a_method_added_to_the_registry_is_on_the_page_and_in_the_json(app_checkpoints, monkeypatch):
    """Adding a method is one registry line (and its computation): `attribute` computes it, the JSON
    carries it with its label, and the page lists it."""
    from model.analysis.attribution import REGISTRY, Cost, MethodSpec, attribute, attribution_json
    from model.storage.checkpoint import load_checkpoint
    toy = MethodSpec("toy_first", "First source token (toy)", "A test's method.", Cost.TRACE, True,
                     _first_source_token)
    monkeypatch.setattr("model.analysis.attribution.registry.REGISTRY", [*REGISTRY, toy])
    ckpt = load_checkpoint(app_checkpoints / "multi30k-en-de")
    att = attribute(ckpt, ckpt.src_tokenizer.encode("a dog") + [ckpt.config.eos_id], [5, 6], Cost.TRACE)
    part = attribution_json(att)["methods"]["toy_first"]
    assert part["label"] == "First source token (toy)" and part["joint"] and part["source_share"] == [1.0] * 3
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    at = AppTest.from_file(APP, default_timeout=90).run()
    at.text_input(key="text").set_value("a toy method's own sentence").run()
    goto(at, "attribution")
    assert not at.exception
    assert "First source token (toy)" in at.multiselect(key="attr_methods").options
