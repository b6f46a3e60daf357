"""The page "Heads across the corpus" under AppTest: without a file it offers to compute (progress,
then the grid) and writes the file beside the checkpoint; with one it draws the grid, follows a
click and the pickers, and opens the explorer on a typical sentence at the same kind, layer and
head; a stale file is not shown as current."""
from __future__ import annotations

import json
import shutil

import pytest
from streamlit.testing.v1 import AppTest

from model.analysis.heads import FILE, compute, sentence_set
from model.analysis.heads.store import save, to_json
from model.inference.options import DecodeOptions
from model.storage.checkpoint import load_checkpoint
from tests.support import APP, goto, page_of, sentences


@pytest.fixture
def checkpoints(app_checkpoints, tmp_path, monkeypatch):
    """A copy of the app's tiny checkpoints (the page writes a file beside the checkpoint)."""
    root = tmp_path / "checkpoints"
    shutil.copytree(app_checkpoints, root)
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(root))
    monkeypatch.setenv("TRANSFORMER_DATA", str(tmp_path / "no-data"))     # no default set: the paste box
    return root


def test_without_a_file_the_page_computes_one_over_pasted_sentences(checkpoints):
    at = AppTest.from_file(APP, default_timeout=120).run()
    goto(at, "heads")
    assert not at.exception and page_of(at) == "heads"
    assert any("No head statistics" in i.value for i in at.info)
    assert not at.get("plotly_chart")
    at.text_area(key="heads_pasted").set_value("\n".join(sentences(6)) + "\n\n").run()
    at.button(key="heads_compute_pasted").click().run()
    assert not at.exception, at.exception
    assert len(at.get("plotly_chart")) == 3                         # the grid, the profile, the map
    assert "6 sentences" in " ".join(m.value for m in at.markdown)
    saved = json.loads((checkpoints / "multi30k-en-de" / FILE).read_text())
    assert saved["input"] == saved["input"] | {"name": "pasted sentences", "usable": 6, "lines": 7}


@pytest.fixture
def with_file(checkpoints):
    ckpt = load_checkpoint(checkpoints / "multi30k-en-de")
    stats = compute(ckpt, sentence_set(ckpt, sentences(8, seed=5), "eight"), DecodeOptions("greedy"),
                    knockout_sentences=2, agreement_sentences=2)
    save(stats, checkpoints / "multi30k-en-de" / FILE)
    return stats


def test_the_grid_the_profile_and_the_way_to_the_explorer(with_file):
    at = AppTest.from_file(APP, default_timeout=120).run()
    goto(at, "heads")
    assert not at.exception and at.selectbox(key="heads_stat").value == "knockout"
    assert at.radio(key="kind").value == "cross"
    assert any(h.value.startswith("Layer 0, head 0:") for h in at.subheader)
    at.selectbox(key="layer").set_value(1).run()
    at.selectbox(key="head").set_value(2).run()
    assert any(h.value.startswith("Layer 1, head 2:") for h in at.subheader)
    role = with_file.kinds["cross"].roles[1][2]
    assert any(h.value == f"Layer 1, head 2: {role}" for h in at.subheader)
    for stat in at.selectbox(key="heads_stat").options:              # every statistic draws
        at.selectbox(key="heads_stat").set_value(stat).run()
        assert not at.exception, stat
    at.radio(key="kind").set_value("encoder_self").run()
    assert "agreement" not in at.selectbox(key="heads_stat").options  # only cross-attention is compared
    assert not at.exception
    typical = with_file.sentences[with_file.kinds["encoder_self"].typical[1, 2, 0]]
    at.button(key="heads_open_t0").click().run()
    assert not at.exception and page_of(at) == "explore"
    assert at.text_input(key="text").value == typical
    assert (at.radio(key="kind").value, at.selectbox(key="layer").value, at.selectbox(key="head").value) == \
        ("encoder_self", 1, 2)
    at.button(key="explore_corpus").click().run()                    # and back, on the same head
    assert page_of(at) == "heads" and any(h.value.startswith("Layer 1, head 2:") for h in at.subheader)


def test_a_file_of_other_weights_is_not_shown(with_file, checkpoints):
    path = checkpoints / "multi30k-en-de" / FILE
    path.write_text(json.dumps(to_json(with_file) | {"fingerprint": "f" * 64}))
    at = AppTest.from_file(APP, default_timeout=120).run()
    goto(at, "heads")
    assert not at.exception
    assert any("other weights" in i.value for i in at.info) and not at.get("plotly_chart")


def test_statistics_that_cannot_be_saved_stay_for_the_process(checkpoints, monkeypatch):
    """A checkpoint directory the server may not write: the page keeps what it computed."""
    from model.analysis.heads import store

    def refuse(stats, path):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(store, "save", refuse)
    at = AppTest.from_file(APP, default_timeout=120).run()
    goto(at, "heads")
    at.text_area(key="heads_pasted").set_value("\n".join(sentences(4, seed=9))).run()
    at.button(key="heads_compute_pasted").click().run()
    assert not at.exception and len(at.get("plotly_chart")) == 3
    assert any("not saved" in c.value for c in at.caption)
    at.radio(key="kind").set_value("decoder_self").run()          # a rerun: still there
    assert not at.exception and len(at.get("plotly_chart")) == 3
    assert not (checkpoints / "multi30k-en-de" / FILE).exists()
