"""AppTest per view: no exception, figure data shaped like the token lists, rows sum to 1,
stepping changes the step, bad input gives a message."""
from __future__ import annotations

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from figures.browser import unpacked
from tests.support import APP, array, goto, page_of


@pytest.fixture
def at(app_checkpoints, monkeypatch):
    """The app on the attention explorer (the landing page is the whole-model overview)."""
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    assert page_of(app) == "overview"
    goto(app, "explore")
    assert not app.exception, app.exception
    return app




def charts(at) -> dict[str, dict]:
    """Plotly figures by the key the app gave them (element ids end with "-<key>")."""
    return {el.proto.id.rsplit("-", 1)[-1]: json.loads(el.proto.spec) for el in at.get("plotly_chart")}




def heatmaps(spec: dict) -> list[np.ndarray]:
    return [array(t["z"]) for t in spec["data"] if t["type"] == "heatmap"]


def tick_text(spec: dict, axis: str) -> list[str]:
    return spec["layout"][axis]["ticktext"]


def drawn(at) -> dict[str, dict]:
    """What the browser draws the explorer's grid and one-head chart from (app/attention_charts.py), by key."""
    found = {}
    for el in at.get("bidi_component"):
        if el.proto.component_name.endswith("attention_charts"):
            data = json.loads(el.proto.json)
            found[el.proto.id.rsplit("-", 1)[-1]] = data[0] if isinstance(data, list) else data
    return found


def test_explore_view_shapes_and_rows(at):
    assert set(charts(at)) == set()                         # the averages' expander is closed: not drawn
    grid, single = drawn(at)["grid"], drawn(at)["single"]
    assert grid["chart"] == "grid" and single["chart"] == "single"
    attn = unpacked(grid["numbers"])                        # (L, H, Tq, Tk): sent once, with the grid
    rows, cols = single["rows"], single["cols"]
    assert attn.shape == (2, 4, len(rows), len(cols))        # layers x heads of the tiny model
    assert rows[0] == "&lt;s&gt;" and cols[-1] == "&lt;/s&gt;"   # cross: target rows, source columns
    assert np.allclose(attn.sum(axis=-1), 1, atol=1e-3)
    assert single["numbers"] == {"ref": grid["numbers"]["ref"], "shape": list(attn.shape)}   # by name only
    assert (single["layer"], single["head"]) == (0, 0)
    at.session_state["explore_averages"] = True              # opened
    at.run()
    assert set(charts(at)) == {"mean"}
    assert heatmaps(charts(at)["mean"])[0].shape == attn.shape[2:]


def test_the_pickers_choose_what_the_browser_shows(at):
    at.selectbox(key="layer").set_value(1).run()
    at.selectbox(key="head").set_value(3).run()
    assert not at.exception
    single, grid = drawn(at)["single"], drawn(at)["grid"]
    assert (single["layer"], single["head"]) == (1, 3) and single["names"][1 * 4 + 3] == "layer 1, head 3"
    assert set(grid["numbers"]) == {"ref", "shape"}       # the browser holds the numbers: not sent again
    at.radio(key="image_format").set_value("svg").run()                # the camera icon downloads SVG
    assert {d["image_format"] for d in drawn(at).values()} == {"svg"}


@pytest.mark.parametrize("kind", ["encoder_self", "decoder_self"])
def test_other_kinds(at, kind):
    at.radio(key="kind").set_value(kind).run()
    assert not at.exception
    single, grid = drawn(at)["single"], drawn(at)["grid"]
    attn = unpacked(grid["numbers"])                                  # another kind: new numbers, sent
    rows, cols = single["rows"], single["cols"]
    assert attn.shape[2:] == (len(rows), len(cols))
    assert single["numbers"] == {"ref": grid["numbers"]["ref"], "shape": list(attn.shape)}
    if kind == "decoder_self":
        assert np.allclose(np.triu(attn, 1), 0) and rows == cols
    else:
        assert rows == cols and rows[-1] == "&lt;/s&gt;"


def test_highlighting_a_token_adds_its_row_across_heads(at):
    at.selectbox(key="query").set_value(1).run()
    assert not at.exception
    z = heatmaps(charts(at)["row"])[0]
    assert z.shape[0] == 2 * 4 and np.allclose(z.sum(axis=1), 1, atol=1e-4)


def test_step_view_steps(at):
    goto(at, "step")
    assert not at.exception
    assert any("Step 0" in m.value for m in at.markdown)
    at.button(key="next").click().run()
    assert any("Step 1" in m.value for m in at.markdown)
    at.button(key="next").click().run()
    assert any("Step 2" in m.value for m in at.markdown)
    at.button(key="prev").click().run()
    assert any("Step 1" in m.value for m in at.markdown)
    tree = charts(at)["tree"]
    assert {t["name"] for t in tree["data"] if t.get("name")} >= {"kept"}
    at.toggle(key="all_pruned").set_value(True).run()
    assert not at.exception
    assert len(nodes_of(charts(at)["tree"], "pruned")) > len(nodes_of(tree, "pruned"))
    at.button(key="reset").click().run()
    assert any("Step 0" in m.value for m in at.markdown)
    assert not at.exception


def nodes_of(tree: dict, status: str) -> np.ndarray:
    return np.concatenate([array(t["x"]) for t in tree["data"] if t.get("name") == status] or [np.zeros(0)])


def test_greedy_steps_show_probabilities(at):
    goto(at, "step")
    at.radio(key="method").set_value("greedy").run()
    assert not at.exception
    assert "tree" not in charts(at)
    bar = charts(at)["topk"]
    probs = list(array(bar["data"][0]["x"]))
    assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-6


def test_only_a_sentence_not_computed_yet_gets_a_spinner(at, monkeypatch):
    """A spinner starts a thread (and sends a message) even when it never shows: a sentence computed already is
    shown without one; a new one gets decode_early's, while its batch decodes, and the translation below finds it
    computed."""
    import threading
    started = []

    class Counted(threading.Timer):
        def start(self) -> None:
            started.append(self.interval)
            super().start()

    monkeypatch.setattr(threading, "Timer", Counted)
    at.run()
    assert not at.exception and started == []
    at.text_input(key="text").set_value("Three red bicycles lean against an old stone wall.").run()
    assert not at.exception and len(started) == 1, started


@pytest.mark.parametrize("text,needle", [("", "empty"), ("    ", "empty"), ("ball " * 150, "longer than")])
def test_bad_input_gives_a_message(at, text, needle):
    at.text_input(key="text").set_value(text).run()
    assert not at.exception
    messages = [m.value for m in list(at.info) + list(at.warning)]
    assert any(needle in m for m in messages), messages


def test_markup_in_input_is_shown_literally(at):
    at.text_input(key="text").set_value("<b>hi</b><script>alert(1)</script>").run()
    assert not at.exception
    for spec in charts(at).values():
        for axis in ("xaxis", "yaxis"):
            for t in spec["layout"].get(axis, {}).get("ticktext", []):
                assert "<" not in t and ">" not in t


def test_no_checkpoint_page(tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(tmp_path))
    app = AppTest.from_file(APP, default_timeout=30).run()
    assert not app.exception
    assert "No checkpoint yet" in app.title[0].value


# ---- part 2 views -------------------------------------------------------------------------------
def test_positional_view_equals_the_formula(at):
    goto(at, "positional")
    assert not at.exception
    spec = charts(at)["pe_heatmap"]
    z = heatmaps(spec)[0]                                       # (S, D)
    pos = np.arange(z.shape[0])[:, None]
    i = np.arange(0, z.shape[1], 2)[None, :]
    angle = pos / 10000 ** (i / z.shape[1])
    assert np.allclose(z[:, 0::2], np.sin(angle), atol=1e-5)
    assert np.allclose(z[:, 1::2], np.cos(angle), atol=1e-5)
    assert len(tick_text(spec, "yaxis")) == z.shape[0]
    assert {"pe_similarity", "pe_curves", "pe_decomposition"} <= set(charts(at))


def test_masks_view_blocked_entries_are_zero_after_softmax(at):
    goto(at, "masks")
    assert not at.exception
    c = charts(at)
    causal = heatmaps(c["causal_mask"])[0]
    weights = heatmaps(c["weights"])[0]                        # decoder self by default
    assert causal.shape == weights.shape and (causal == 0).any()
    assert np.all(weights[causal == 0] == 0)
    assert np.allclose(weights.sum(axis=1), 1, atol=1e-4)
    scores = c["scores"]["data"][0]
    blanks = np.array([[v is None for v in row] for row in scores["z"]]) if isinstance(scores["z"], list) \
        else np.isnan(array(scores["z"]))
    assert np.array_equal(blanks, causal == 0)
    # the padded (shorter) sentence: blocked key columns get weight 0
    pad_mask, pad_attn = heatmaps(c["pad_mask_1"])[0], heatmaps(c["pad_attn_1"])[0]
    assert (pad_mask == 0).any() and np.all(pad_attn[pad_mask == 0] == 0)


def test_inside_one_head_recomputes_the_models_weights(at):
    goto(at, "head")
    assert not at.exception
    assert any("equal the model's own" in c.value for c in at.caption)
    scaled = array(charts(at)["head_pipeline"]["data"][2]["y"])
    at.toggle(key="no_scale").set_value(True).run()
    assert not at.exception
    unscaled = array(charts(at)["head_pipeline"]["data"][2]["y"])
    assert np.isclose(scaled.sum(), 1) and np.isclose(unscaled.sum(), 1)
    assert unscaled.max() >= scaled.max()                      # a sharper softmax without 1/sqrt(d_k)
    out = heatmaps(charts(at)["head_output"])[0]
    assert np.allclose(out[:-1].sum(axis=0), out[-1], atol=1e-5)   # the last row is the sum of the others


def test_model_card_view(at, app_checkpoints):
    goto(at, "card")
    assert not at.exception
    tables = at.dataframe
    params = tables[1].value
    assert params.iloc[-1]["component"] == "total"
    from model.storage.checkpoint import load_checkpoint
    total = load_checkpoint(app_checkpoints / "multi30k-en-de").model.num_parameters()
    assert params.iloc[-1]["parameters"] == f"{total:,}"


def test_switching_to_a_model_of_another_language_offers_its_sentences(at):
    from app.sentence import PRESETS
    at.text_input(key="text").set_value("a sentence of my own").run()
    at.selectbox(key="checkpoint").set_value("multi30k-de-en").run()
    assert not at.exception
    assert at.title[0].value.endswith("de → en")
    assert at.text_input(key="text").value == next(iter(PRESETS["de"]))
    at.text_input(key="text").set_value("ein Hund").run()
    goto(at, "step")             # same language: the text stays
    assert at.text_input(key="text").value == "ein Hund"
    at.selectbox(key="checkpoint").set_value("multi30k-en-de").run()
    assert at.text_input(key="text").value == next(iter(PRESETS["en"]))


def test_deep_link_round_trip(app_checkpoints, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    first = AppTest.from_file(APP, default_timeout=60).run()
    first.text_input(key="text").set_value("the dog runs in the park").run()
    goto(first, "step")
    first.radio(key="method").set_value("greedy").run()
    first.button(key="next").click().run()
    first.button(key="next").click().run()
    assert not first.exception
    link = {k: first.query_params[k] for k in first.query_params}
    assert link["text"] == ["the dog runs in the park"] or link["text"] == "the dog runs in the park"
    second = AppTest.from_file(APP, default_timeout=60)
    for k, v in link.items():
        second.query_params[k] = v[0] if isinstance(v, list) else v
    goto(second, "step")                                       # the link's path: /step
    assert not second.exception
    assert second.text_input(key="text").value == "the dog runs in the park"
    assert page_of(second) == "step" and second.radio(key="method").value == "greedy"
    assert any("Step 2" in m.value for m in second.markdown)


def test_knocking_out_a_whole_layer_changes_the_output(at):
    goto(at, "knockout")
    assert not at.exception
    assert any("Choose heads" in i.value for i in at.info)
    original = at.markdown[0].value
    at.multiselect(key="ko_layers").set_value(["decoder.1.cross_attn", "decoder.0.cross_attn"]).run()
    assert not at.exception
    texts = [m.value for m in at.markdown]
    assert any(t.startswith("**Without 8 heads:**") for t in texts)
    assert any("the translation changed" in c.value for c in at.caption), (original, texts)
    spec = charts(at)["ko_probs"]
    before, after = array(spec["data"][0]["y"]), array(spec["data"][1]["y"])
    assert before.shape == after.shape and not np.allclose(before, after)


def test_matrix_csv_keeps_repeated_tokens_apart():
    from model.analysis.readings import matrix_csv
    text = matrix_csv(np.array([[0.25, 0.75], [1.0, 0.0]]), ["a", "a"], ["x", "<b>"])
    assert text.splitlines() == [",0:x,1:<b>", "0:a,0.25,0.75", "1:a,1,0"]


def test_tree_until_places_kept_finished_and_pruned_candidates():
    from model.analysis.readings import tree_until
    from model.inference.decoding import Candidate, StepRecord

    def cand(parent: int, token: int, status: str) -> Candidate:
        return Candidate(parent, token, -1.0, -1.0, -1.0, status)

    steps = [
        StepRecord(0, [], [cand(0, 10, "kept"), cand(0, 11, "kept"), cand(0, 12, "pruned")]),
        StepRecord(1, [], [cand(1, 20, "kept"), cand(0, 2, "finished"), cand(0, 21, "kept"), cand(1, 22, "pruned")]),
    ]
    pieces = lambda ids: [f"t{i}" for i in ids]  # noqa: E731
    nodes, edges, index = tree_until(steps, 1, pieces)
    assert [n["token"] for n in nodes] == ["<s>", "t10", "t11", "t20", "t2", "t21", "t22"]
    # kept candidates of step 1 become hypotheses 0 and 1 of step 2, in the order kept;
    # the finished and pruned ones hang below them (y = 2, 3)
    assert [(n["x"], n["y"], n["status"]) for n in nodes[3:]] == [
        (2, 0, "kept"), (2, 2, "finished"), (2, 1, "kept"), (2, 3, "pruned")]
    assert edges == [(0, 1), (0, 2), (2, 3), (1, 4), (1, 5), (2, 6)]
    assert index[(2, 0)] == 3 and index[(2, 1)] == 5 and nodes[5]["text"] == "<s> t10 t21"
    # step 0's pruned candidate appears only when every step's are asked for, or at step 0
    assert len(tree_until(steps, 1, pieces, pruned_only_last=False)[0]) == len(nodes) + 1
    assert [n["token"] for n in tree_until(steps, 0, pieces)[0]] == ["<s>", "t10", "t11", "t12"]


def test_the_knockout_page_opens_on_every_heads_effect(at, app_checkpoints):
    """By default: a grid of every head alone and every whole layer switched off; the
    whole-layer cell of the decoder's cross-attention matches a knockout computed apart."""
    from model.inference.options import DecodeOptions
    from model.inference.pipeline import explain, head_names, log_probability
    from model.storage.checkpoint import load_checkpoint
    goto(at, "knockout")
    assert not at.exception
    spec = charts(at)["ko_grid"]
    z = array(spec["data"][0]["z"])
    ckpt = load_checkpoint(app_checkpoints / "multi30k-en-de")
    modules = list(dict.fromkeys(n.rsplit(".", 1)[0] for n in head_names(ckpt)))
    assert z.shape == (len(modules), ckpt.config.n_heads + 1)
    ex = explain(ckpt, at.text_input(key="text").value, DecodeOptions("beam", record_steps=True, record_top_k=8))
    row = modules.index("decoder.1.cross_attn")
    off = frozenset(f"decoder.1.cross_attn.{h}" for h in range(ckpt.config.n_heads))
    expected = log_probability(ckpt, ex.source_ids, ex.result.tokens) - \
        log_probability(ckpt, ex.source_ids, ex.result.tokens, off)
    assert abs(z[row, -1] - expected) < 1e-3


def test_the_sentences_cache_stays_within_its_bytes(app_checkpoints, monkeypatch):
    """TRANSFORMER_CACHE_MB bounds what a process keeps of its sentences (decodings, traces with the
    residual stream, logit lenses) by the bytes of their tensors, not by a count; pages still draw."""
    from app import resources
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    monkeypatch.setenv("TRANSFORMER_CACHE_MB", "1")
    held = []
    for text in ("A dog runs in the park.", "Two men play football in a park.", "A girl in a red coat reads a book."):
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params["text"] = text
        at.run()                                     # the overview: a trace with the stream, a logit lens
        goto(at, "explore")
        assert not at.exception, at.exception
        now, bound = resources.kept_bytes()
        assert bound == 2 ** 20 and 0 < now <= bound
        held.append(now)
    assert 3 * held[0] > bound, held                  # three sentences' worth would not fit: the oldest went


def test_what_no_page_asked_for_in_cache_idle_seconds_goes(app_checkpoints, monkeypatch):
    """TRANSFORMER_CACHE_IDLE_S: a class that moved on from a sentence leaves nothing of it in the process's caches
    (the newest few results and figures stay, for a page left open), and its page draws again."""
    from app import resources
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    monkeypatch.setenv("TRANSFORMER_CACHE_IDLE_S", "3")
    monkeypatch.setattr(resources, "KEPT_FRESH", 1)
    monkeypatch.setattr(resources, "FIGURES_FRESH", 1)
    now = [1000.0]                                   # the caches' clock stands still while the three load (a
    monkeypatch.setattr(resources, "CLOCK", lambda: now[0])   # busy machine's runs take longer than 3 s)
    texts = ("A dog runs in the park.", "Two men play football in a park.", "A girl in a red coat reads a book.")
    for text in texts:
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params["text"] = text
        at.run()                                     # the overview: its decoding, trace, lens and figures
        assert not at.exception, at.exception
    held, figures = resources.kept_bytes()[0], resources.figures_held()[0]
    now[0] += 3.2
    at.run()                                         # the last sentence again, alone, 3.2 s later
    assert not at.exception, at.exception
    assert 0 < resources.kept_bytes()[0] < 0.5 * held, (resources.kept_bytes(), held)     # one sentence of three
    assert 0 < resources.figures_held()[0] < 0.5 * figures, (resources.figures_held(), figures)


def test_shared_figures_are_kept_within_their_bytes_and_built_once(monkeypatch):
    """TRANSFORMER_FIGURES_MB bounds the figures a process shares by the bytes they send: the same key gives the
    same figure without building it again, and once the bound is passed the oldest-used goes (built again when
    asked for)."""
    import plotly.graph_objects as go

    from app import resources
    from figures import Display
    monkeypatch.setenv("TRANSFORMER_FIGURES_MB", "1")
    built: list[int] = []

    def build(i: int):
        built.append(i)
        return go.Figure(go.Heatmap(z=np.full((200, 200), float(i))))   # ~0.43 MB of JSON each

    def get(i: int):
        return resources.get_figure("test_big", ("a key", i), Display(), "en", lambda: build(i))

    first = get(0)
    assert get(0) is first and built == [0]
    assert 0.3 * 2 ** 20 < resources.figure_bytes(first) < 0.6 * 2 ** 20
    for i in (1, 2, 3):
        get(i)
    count, held, bound = resources.figures_held()
    assert bound == 2 ** 20 and held <= bound and count == 2, (count, held)
    assert get(3) is not None and built == [0, 1, 2, 3]           # the newest kept
    get(0)
    assert built == [0, 1, 2, 3, 0]                                # the oldest went


def test_a_model_served_fast_says_so_and_a_link_shows_plain_fp32(app_checkpoints, tmp_path, monkeypatch):
    """A checkpoint whose card chose a faster precision (issue 43) is served with it, the sidebar says which, and
    `fp32=1` in the link shows plain fp32 instead: the same translation either way."""
    import shutil

    from app import resources
    from model.inference.precision import PackedLinear
    from model.storage.checkpoint import write_config_entry
    shutil.copytree(app_checkpoints / "multi30k-en-de", tmp_path / "multi30k-en-de")
    write_config_entry(tmp_path / "multi30k-en-de", "precision", {"scheme": "onednn"})
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(tmp_path))
    shown = {}
    for link in ({}, {"fp32": "1"}):
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params.update({"text": "A dog runs in the park.", **link})
        goto(at, "explore")
        assert not at.exception, at.exception
        captions = " ".join(c.value for c in at.sidebar.caption)
        shown[bool(link)] = ("oneDNN" in captions, "plain fp32" in captions, at.toggle(key="fp32").value,
                             [m.value for m in at.markdown if m.value.startswith("###")])
    assert shown[False][:3] == (True, False, False) and shown[True][:3] == (False, True, True), shown
    assert shown[False][3] == shown[True][3] and shown[False][3], shown
    served = resources.get_served(str(tmp_path / "multi30k-en-de"), "onednn").model
    assert any(isinstance(m, PackedLinear) for m in served.modules())
