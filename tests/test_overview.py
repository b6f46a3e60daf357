"""The whole-model overview: figure 1 drawn from a config with a sentence's numbers, and a
detail panel per block."""
from __future__ import annotations

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from figures import diagram
from figures.common import STATUS_COLORS
from model.network.config import preset
from model.network.trace import Recording, Trace
from tests.support import APP, array, goto, link_of, page_of, random_batch, tiny_model


def test_the_blocks_follow_the_models_config():
    cfg = preset("small", src_vocab_size=100, tgt_vocab_size=100)
    blocks = diagram.blocks(cfg)
    assert tuple(b.id for b in blocks) == diagram.BLOCK_IDS
    labels = {b.id: b.label for b in blocks}
    assert labels["encoder.feed_forward"] == "Feed forward (256→512→256)"
    assert labels["encoder.self_attn"] == "Multi-head attention (8 heads)"
    assert labels["encoder.embedding"] == "Input embedding × √256"
    assert len(set(diagram.picker_names(cfg).values())) == len(blocks)   # a list of them needs distinct names
    no_pe = diagram.blocks(cfg.replace(positional_encoding=False, scale_embedding=False))
    assert {b.id: b.label for b in no_pe}["encoder.positional"] == "(no positional encoding)"
    assert {b.id: b.label for b in no_pe}["encoder.embedding"] == "Input embedding"


def _traced():
    model = tiny_model(40)
    trace = Trace(Recording(stream=True))
    model(random_batch(40, [6], seed=1), random_batch(40, [5], seed=2, bos=True), trace)
    return model, trace


def test_the_strips_hold_the_chosen_tokens_values():
    model, trace = _traced()
    values, texts = diagram.values_of(trace, 2, 3, 1, [("a", 0.5), ("<b>", 0.25)])
    assert np.array_equal(values["encoder.embedding"], trace["source.embedding"][0, 2].numpy())
    assert np.array_equal(values["decoder.cross_attn.norm"], trace["decoder.1.cross_attn.out"][0, 3].numpy())
    assert np.array_equal(values["encoder.feed_forward"], trace["encoder.1.feed_forward.update"][0, 2].numpy())
    assert values["decoder.cross_attn"].shape == (6,) and abs(values["decoder.cross_attn"].sum() - 1) < 1e-5
    assert values["decoder.self_attn"].shape == (5,) and np.all(values["decoder.self_attn"][4:] == 0)  # causal
    assert "&lt;b&gt; 0.25" in texts["output.softmax"]                   # tokens are escaped


def test_the_diagram_draws_every_block_and_outlines_the_chosen_one():
    model, trace = _traced()
    values, texts = diagram.values_of(trace, 0, 0, 0, [("a", 0.9)])
    fig = diagram.model_diagram(model.cfg, values, texts, selected="decoder.feed_forward")
    spec = json.loads(fig.to_json())
    heatmaps = [t for t in spec["data"] if t["type"] == "heatmap"]
    assert len(heatmaps) == len(values)
    markers = [t for t in spec["data"] if t["type"] == "scatter"][0]
    assert tuple(markers["customdata"]) == diagram.BLOCK_IDS
    red = [s for s in spec["layout"]["shapes"] if s.get("line", {}).get("color") == STATUS_COLORS["chosen"]]
    assert len(red) == 1 and red[0]["y0"] < 8.0 < red[0]["y1"]          # the decoder FFN sits at y = 8
    assert {"text": "2×"}.items() <= next(a for a in spec["layout"]["annotations"] if a["text"] == "2×").items()



def test_in_large_letters_no_name_shares_its_line_with_a_strip_or_a_text():
    """Projector letters: a name beside a strip is cut into lines of at most 20 characters, and a block's text
    (the softmax's likeliest tokens) goes on the line below its name, not beside it on the right."""
    model, trace = _traced()
    values, texts = diagram.values_of(trace, 0, 0, 0, [("a", 0.9), ("b", 0.05), ("c", 0.01)])
    notes = json.loads(diagram.model_diagram(model.cfg, values, texts, large=True).to_json())["layout"]["annotations"]
    boxed = [n for n in notes if n.get("xanchor") in ("left", "right") and not n.get("showarrow", True)
             and not n["text"].endswith("×")]
    assert all(n["xanchor"] == "left" for n in boxed)                   # nothing right-aligned beside a name
    softmax = next(n for n in boxed if n["text"].startswith("Softmax"))
    assert softmax["text"] == "Softmax<br>" + texts["output.softmax"]
    beside_strips = [n["text"] for n in boxed if n["y"] in {b.y for b in diagram.blocks(model.cfg) if b.id in values}]
    assert beside_strips and all(len(line) <= 20 for t in beside_strips for line in t.split("<br>")), beside_strips
    assert diagram.two_lines("Masked multi-head attention") == "Masked multi-head<br>attention"
    small = json.loads(diagram.model_diagram(model.cfg, values, texts).to_json())["layout"]["annotations"]
    assert any(n.get("xanchor") == "right" and n["text"] == texts["output.softmax"] for n in small)

@pytest.fixture
def at(app_checkpoints, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    return goto(AppTest.from_file(APP, default_timeout=60).run(), "overview")


HEADERS = {"embedding": "embedding", "positional": "Positional encoding added", "self_attn": "self-attention",
           "cross_attn": "Cross-attention", "norm": "Add & Norm", "feed_forward": "feed-forward network",
           "linear": "The output", "softmax": "The output"}


@pytest.mark.parametrize("block", diagram.BLOCK_IDS)
def test_every_block_opens_its_panel(at, block):
    at.selectbox(key="ov_block").set_value(block).run()
    assert not at.exception, at.exception
    assert any(HEADERS[block.split(".")[-1]].lower() in h.value.lower() for h in at.subheader), block
    assert link_of(at)["block"] == block            # always in an overview link: it tells it from an old "/" link


def test_a_link_opens_the_block_token_and_position(app_checkpoints, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"view": "overview", "text": "the dog runs", "block": "decoder.feed_forward",
                            "token": "1", "pos": "2"})
    at.run()
    assert page_of(at) == "overview" and not at.exception
    assert (at.selectbox(key="ov_block").value, at.selectbox(key="ov_token").value,
            at.selectbox(key="ov_pos").value) == ("decoder.feed_forward", 1, 2)
    assert any("feed-forward" in h.value for h in at.subheader)


def test_the_output_panel_cuts_and_the_logit_lens_ends_at_the_real_prediction(at):
    at.selectbox(key="ov_block").set_value("output.softmax").run()
    at.slider(key="ov_top_k").set_value(3).run()
    bars = json.loads(at.get("plotly_chart")[-1].proto.spec)["data"][0]
    assert bars["marker"]["color"].count(STATUS_COLORS["pruned"]) == 17               # 20 shown, 3 kept by top-k
    lens = at.dataframe[-1].value
    assert list(lens["layer"]) == [0, 1]
    assert lens.iloc[-1, 2] >= 1


def test_the_attention_block_opens_the_explorer_at_its_kind_and_layer(at):
    at.selectbox(key="ov_layer").set_value(1).run()
    at.selectbox(key="ov_block").set_value("decoder.cross_attn").run()
    at.button(key="ov_open_attention").click().run()
    assert page_of(at) == "explore" and not at.exception
    assert at.radio(key="kind").value == "cross" and at.selectbox(key="layer").value == 1


# ---- the guided lesson --------------------------------------------------------------------------
def test_every_lesson_step_draws_its_text_formula_figure_and_try_this(app_checkpoints, monkeypatch):
    from app.views.lesson import STEPS
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    at = goto(AppTest.from_file(APP, default_timeout=60).run(), "lesson")
    for k, step in enumerate(STEPS, start=1):
        assert not at.exception, (k, at.exception)
        assert [h.value for h in at.header] == [step.title]
        assert len(at.latex) == 1 and len(at.get("plotly_chart")) == 1
        assert any(step.try_this in i.value for i in at.info)
        assert link_of(at).get("lesson") == (str(k) if k > 1 else None)
        if k < len(STEPS):
            at.button(key="lesson_next").click().run()
    assert at.button(key="lesson_next").disabled
    at.button(key="lesson_prev").click().run()
    assert at.header[0].value == STEPS[-2].title


def test_a_lesson_link_opens_its_step(app_checkpoints, monkeypatch):
    from app.views.lesson import STEPS
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"view": "lesson", "text": "the dog runs", "lesson": "9"})
    at.run()
    assert page_of(at) == "lesson" and at.header[0].value == STEPS[8].title
    mask = array(json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]["z"])
    assert np.array_equal(mask, np.tril(np.ones_like(mask)))             # the causal mask of this sentence


def test_the_cost_step_counts_this_sentences_scores():
    from app.views.lesson import STEPS, LessonData
    from model.inference.pipeline import explain
    from model.network.tokenizer import Tokenizer
    from model.storage.checkpoint import Checkpoint
    from tests.support import sentences
    tok = Tokenizer.train(sentences(200), vocab_size=40)
    ckpt = Checkpoint(tiny_model(tok.vocab_size), tok, tok)
    data = LessonData(ckpt, explain(ckpt, "the dog runs in the park", recording=Recording(scores=True, stream=True)))
    cost = next(step for step in STEPS if "O(n²)" in step.title)
    bars = json.loads(cost.figure(data).to_json())["data"][0]
    s, t = len(data.src), len(data.tgt)
    assert bars["y"] == [s * s, t * t, t * s]


def test_the_confidence_step_shows_the_probability_of_every_output_token():
    from app.views.lesson import STEPS, LessonData
    from model.inference.pipeline import explain
    from model.network.tokenizer import Tokenizer
    from model.storage.checkpoint import Checkpoint
    from tests.support import sentences
    tok = Tokenizer.train(sentences(200), vocab_size=40)
    ckpt = Checkpoint(tiny_model(tok.vocab_size), tok, tok)
    ex = explain(ckpt, "the dog runs in the park")
    step = next(step for step in STEPS if "trained on" in step.title)
    bars = json.loads(step.figure(LessonData(ckpt, ex)).to_json())["data"][0]
    assert bars["y"] == pytest.approx(ex.output_probs) and len(bars["x"]) == len(ex.result.tokens) + 1
    assert "not calibrated" in step.figure(LessonData(ckpt, ex)).layout.title.text
