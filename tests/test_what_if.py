"""The step page's "what if" (issue 54) under AppTest: force one of a step's candidates or a typed word and
decoding goes on from it; the original and the forced translation side by side; the forced start is in the
link (a following class and a reload see it) and every page's translation says so; the way back; a forced
start too long for a new sentence gets a message and the way back, not a traceback. On "What the model used":
why its token and not another, by three methods, and a word of several tokens gets a message."""
from __future__ import annotations

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from model.analysis.readings import aligned, summed_attention, whole_words, word_pieces
from tests.support import APP, array, goto, link_of


@pytest.fixture
def at(app_checkpoints, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    app = AppTest.from_file(APP, default_timeout=90).run()
    app.text_input(key="text").set_value("the cat sits on the mat").run()
    goto(app, "step")
    app.radio(key="method").set_value("greedy").run()
    assert not app.exception, app.exception
    return app


def charts(at: AppTest) -> dict[str, dict]:
    return {el.proto.id.rsplit("-", 1)[-1]: json.loads(el.proto.spec) for el in at.get("plotly_chart")}


def _said(at: AppTest) -> str:
    return " ".join(m.value for m in at.markdown) + " ".join(c.value for c in at.caption)


def test_forcing_a_candidate_decodes_on_from_it_and_the_link_keeps_it(at):
    choice = at.selectbox(key="what_if_candidate_0")
    candidate = choice.options[1]                           # the first offered: not the model's own choice
    choice.select_index(1).run()
    at.button(key="what_if_go_0").click().run()
    assert not at.exception, at.exception
    forced = link_of(at).get("forced")
    assert forced and forced.split() == [candidate]
    said = _said(at)
    assert "What if:" in said and "the model's own" in said and "first different token at output position 0" in said
    assert "Forced to start with" in said                   # the translation box says so, on every page
    goto(at, "explore")
    assert "Forced to start with" in _said(at) and not at.exception
    goto(at, "step")
    at.button(key="what_if_clear").click().run()
    assert "forced" not in link_of(at) and "What if:" not in _said(at) and not at.exception


def test_a_typed_word_is_forced_as_its_pieces(at):
    at.button(key="next").click().run()
    at.text_input(key="what_if_word_1").set_value("sits").run()
    at.button(key="what_if_go_1").click().run()
    assert not at.exception, at.exception
    forced = link_of(at)["forced"].split()
    assert len(forced) >= 2 and forced[1].startswith("▁")   # the output before step 1 (one token), then the word's
    assert "".join(forced[1:]) == "▁sits"                   # pieces


def test_a_start_too_long_for_a_new_sentence_gets_a_message_and_the_way_back(at):
    at.text_input(key="what_if_word_0").set_value("the cat sits on the mat " * 3).run()
    at.button(key="what_if_go_0").click().run()
    assert not at.exception and link_of(at).get("forced")
    at.text_input(key="text").set_value("a cat").run()
    assert not at.exception
    messages = [m.value for m in list(at.info)]
    assert any("forced start" in m for m in messages), messages
    at.button(key="what_if_clear_unfit").click().run()
    assert "forced" not in link_of(at) and not at.exception


def test_why_this_word_and_not_another_on_what_the_model_used(at):
    goto(at, "attribution")
    at.session_state["why_not"] = True                      # the lazy expander, opened
    at.run()
    assert not at.exception, at.exception
    figure = charts(at)["why_not_chart"]
    assert len(figure["data"][0]["y"]) == 3                 # gradient x input, integrated gradients, erasure
    assert any("log p(" in m.value for m in at.markdown)
    at.text_input(key="why_typed").set_value("the cat sits on the mat").run()     # more than one token
    assert not at.exception and any("must be one token" in w.value for w in at.warning)


def test_the_contrast_figure_keeps_each_method_s_sign_on_its_own_scale():
    import figures
    fig = figures.contrast_heatmap(["a", "b"], np.array([[2.0, -4.0], [0.5, 0.1]]), np.array([[1.0], [0.0]]),
                                   ["x", "y"], ["<s>"], "why")
    z = np.array(fig.data[0].z)
    assert z.shape == (2, 3) and np.allclose(z[0], [0.5, -1.0, 0.25]) and np.allclose(z[1], [1.0, 0.2, 0.0])
    assert fig.data[0].customdata[0][1][2] == "-4.000"       # the hover gives the real value
    with pytest.raises(ValueError):
        figures.contrast_heatmap(["a"], np.zeros((1, 3)), np.zeros((1, 1)), ["x", "y"], ["<s>"])


def test_several_tokens_at_once_sum_the_attention_of_every_head(at):
    goto(at, "explore")
    at.session_state["explore_several"] = True
    at.run()
    assert not at.exception, at.exception
    at.multiselect(key="several").select(1).select(2).run()
    assert not at.exception, at.exception
    spec = charts(at)["several_chart"]
    z = array(spec["data"][0]["z"])
    assert z.ndim == 2 and z.shape[0] == len(spec["layout"]["yaxis"]["ticktext"]) > 1   # a row per layer and head
    assert np.all(z >= -1e-6) and np.all(z <= 1 + 1e-6)    # each query's share of attention on them


def test_change_a_word_and_compare(at):
    goto(at, "explore")
    at.session_state["explore_compare"] = True
    at.run()
    at.text_input(key="edited").set_value("the dog sits on the mat").run()
    assert not at.exception, at.exception
    assert link_of(at).get("edited") == "the dog sits on the mat"
    said = _said(at)
    assert "original" in said and "changed" in said and ("identical" in said or "first different token" in said)
    diff = array(charts(at)["compare_chart"]["data"][0]["z"])
    assert diff.ndim == 2 and np.all(np.abs(diff) <= 1 + 1e-6)
    at.text_input(key="edited").set_value("ball " * 300).run()
    assert not at.exception and any("The changed sentence" in w.value for w in at.warning)


def test_readings_for_several_tokens_and_two_sentences():
    pieces = ["▁The", "▁animal", "▁d", "id", "n", "'", "t", "▁cross", "</s>"]
    assert word_pieces(pieces, 3) == [2, 3, 4, 5, 6] and word_pieces(pieces, 8) == [8]
    assert whole_words(pieces, [1, 4]) == [1, 2, 3, 4, 5, 6]
    attn = np.random.default_rng(0).dirichlet(np.ones(5), size=(2, 3, 4))          # (L, H, Tq, Tk), rows sum to 1
    keys = summed_attention(attn, [1, 3], "keys")
    assert keys.shape == (2, 3, 4) and np.allclose(keys, attn[..., 1] + attn[..., 3])
    queries = summed_attention(attn, [0, 2], "queries")
    assert queries.shape == (2, 3, 5) and np.allclose(queries.sum(-1), 1)
    assert aligned(["▁the", "▁dog", "▁sits"], ["▁the", "▁cat", "▁sits"]) == [(0, 0), (2, 2)]


def test_the_difference_map_spans_the_largest_change():
    import figures
    fig = figures.attention_difference(np.array([[0.1, -0.2], [0.0, 0.05]]), ["a", "b"], ["x", "y"], "t", "q", "k")
    assert fig.data[0].zmin == -0.2 and fig.data[0].zmax == 0.2 and fig.data[0].zmid == 0
    small = figures.attention_difference(np.array([[0.001]]), ["a"], ["x"], "t", "q", "k")
    assert small.data[0].zmax == 0.05                        # a tiny change is not blown up to full colour
