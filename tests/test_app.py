"""AppTest per view: no exception, figure data shaped like the token lists, rows sum to 1,
stepping changes the step, bad input gives a message."""
from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT

APP = str(ROOT / "app" / "main.py")


@pytest.fixture
def at(app_checkpoints, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    assert not app.exception, app.exception
    return app


def charts(at) -> dict[str, dict]:
    """Plotly figures by the key the app gave them (element ids end with "-<key>")."""
    return {el.proto.id.rsplit("-", 1)[-1]: json.loads(el.proto.spec) for el in at.get("plotly_chart")}


def array(value) -> np.ndarray:
    """Plotly JSON arrays: plain lists, or typed arrays {"dtype", "bdata" (base64), "shape"}."""
    if isinstance(value, dict) and "bdata" in value:
        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        if isinstance(shape, str):
            shape = [int(x) for x in shape.split(",")]
        return flat.reshape(shape).astype(float) if shape else flat.astype(float)
    return np.array(value, dtype=float)


def heatmaps(spec: dict) -> list[np.ndarray]:
    return [array(t["z"]) for t in spec["data"] if t["type"] == "heatmap"]


def tick_text(spec: dict, axis: str) -> list[str]:
    return spec["layout"][axis]["ticktext"]


def test_explore_view_shapes_and_rows(at):
    specs = charts(at)
    assert set(specs) == {"grid", "single", "mean"}
    grid, single = specs["grid"], specs["single"]
    assert len(heatmaps(grid)) == 2 * 4                     # layers x heads of the tiny model
    z = heatmaps(single)[0]
    rows, cols = tick_text(single, "yaxis"), tick_text(single, "xaxis")
    assert z.shape == (len(rows), len(cols))
    assert rows[0] == "&lt;s&gt;" and cols[-1] == "&lt;/s&gt;"   # cross: target rows, source columns
    assert np.allclose(z.sum(axis=1), 1, atol=1e-4)
    for m in heatmaps(grid):
        assert m.shape == z.shape and np.allclose(m.sum(axis=1), 1, atol=1e-4)
    assert heatmaps(specs["mean"])[0].shape == z.shape


@pytest.mark.parametrize("kind", ["encoder_self", "decoder_self"])
def test_other_kinds(at, kind):
    at.radio(key="kind").set_value(kind).run()
    assert not at.exception
    single = charts(at)["single"]
    z = heatmaps(single)[0]
    rows, cols = tick_text(single, "yaxis"), tick_text(single, "xaxis")
    assert z.shape == (len(rows), len(cols))
    if kind == "decoder_self":
        assert np.allclose(np.triu(z, 1), 0) and rows == cols
    else:
        assert rows == cols and rows[-1] == "&lt;/s&gt;"


def test_highlighting_a_token_adds_its_row_across_heads(at):
    at.selectbox(key="query").set_value(1).run()
    assert not at.exception
    z = heatmaps(charts(at)["row"])[0]
    assert z.shape[0] == 2 * 4 and np.allclose(z.sum(axis=1), 1, atol=1e-4)


def test_step_view_steps(at):
    at.radio(key="view").set_value("step").run()
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
    at.button(key="reset").click().run()
    assert any("Step 0" in m.value for m in at.markdown)
    assert not at.exception


def test_greedy_steps_show_probabilities(at):
    at.radio(key="view").set_value("step").run()
    at.radio(key="method").set_value("greedy").run()
    assert not at.exception
    assert "tree" not in charts(at)
    bar = charts(at)["topk"]
    probs = list(array(bar["data"][0]["x"]))
    assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-6


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
