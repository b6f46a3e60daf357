"""The model card: what a model read (with attribution), and one quality table per test set."""
from __future__ import annotations

import json

import figures
from model.storage.card import add_eval_report, corpora, read_eval_reports, render_card
from model.storage.checkpoint import write_config_entry
from tests.support import make_checkpoint


def _report(data: str, split: str, bleu: float, references: str = "line", n: int = 10, refs: int = 10) -> dict:
    row = {"bleu": bleu, "bleu_lowercase": bleu + 1, "chrf": 50.0, "bleu_signature": "nrefs:1|case:mixed",
           "chrf_signature": "chrF2", "sentences_per_second": 12.5}
    return {"data": data, "split": split, "references": references, "sentences": n, "reference_count": refs,
            "results": {"greedy": row}, "command": f"python -m model.evaluate --data {data}"}


def test_the_card_names_every_corpus_of_every_training_part_with_its_attribution(tokenizer, tmp_path):
    first = {"data": "../shared/data/multi30k"}
    mixed = {"data": "runs/mix", "data_note": "Multi30K train + Tatoeba en-de train", "continued_from":
             {"epochs": 38, "steps": 100, "train_args": first}, "epochs": 44, "init_from": "checkpoints/x"}
    assert corpora({"train_args": first}) == ["multi30k"]
    assert corpora({}) == ["multi30k"]
    assert corpora({"train_args": mixed}) == ["multi30k", "tatoeba"]
    everyday = {"data": "runs/mix-everyday", "init_from": "checkpoints/x", "continued_from": {"train_args": mixed},
                "data_note": "Multi30K train twice + Tatoeba en-de train (2018 edition in full, 173,611 pairs)"}
    assert corpora({"train_args": everyday}) == ["multi30k", "tatoeba", "tatoeba-2018"]    # its parts, each once
    assert corpora({"train_args": {"data_note": "Tatoeba (2018 edition in full)"}}) == ["tatoeba-2018"]
    make_checkpoint(tokenizer, tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    (tmp_path / "m" / "config.json").write_text(json.dumps({**config, "train_args": mixed}))
    card = render_card(tmp_path / "m")
    assert "Multi30K task 1" in card and "Attribution: Tatoeba contributors" in card and "CC BY 2.0 FR" in card
    assert "## Licences" in card and "non-commercial" in card and "GPL" not in card
    issue81 = {"data": "runs/mix81-en-de", "init_from": "checkpoints/x", "continued_from": {"train_args": everyday},
               "data_note": "everyday-extra train + 100,000 Ding lexicon entries + 11,856 Common Voice German "
                            "sentences back-translated by the shipped de->en"}
    assert corpora({"train_args": issue81})[-3:] == ["everyday-extra", "ding-lexicon", "back-translation"]
    (tmp_path / "m" / "config.json").write_text(json.dumps({**config, "train_args": issue81}))
    card = render_card(tmp_path / "m")
    assert "CC BY-SA 4.0" in card and "GPL-2+" in card and "`lexicon.tsv.gz`" in card and "CC0" in card


def test_each_test_set_keeps_its_own_scores(tokenizer, tmp_path):
    d = tmp_path / "m"
    make_checkpoint(tokenizer, d)
    (d / "eval_results.json").write_text(json.dumps({**_report("x", "test_2016_flickr", 1.0), "data": None}))
    assert len(read_eval_reports(d)) == 1                                     # an older single report
    add_eval_report(d, _report("../shared/data/multi30k", "test_2016_flickr", 39.5))   # replaces it
    add_eval_report(d, _report("../shared/data/tatoeba-en-de", "test", 31.2, "all", 1000, 1344))
    add_eval_report(d, _report("/elsewhere/tatoeba-en-de", "test", 31.4, "all", 1000, 1344))  # same set again
    reports = read_eval_reports(d)
    assert [(r["split"], r["results"]["greedy"]["bleu"]) for r in reports] == [("test_2016_flickr", 39.5),
                                                                               ("test", 31.4)]
    card = render_card(d)
    assert "| greedy | 39.50 | 40.50 | 50.00 | 12.5 |" in card and "| greedy | 31.40 | 32.40 |" in card
    assert "all 1,344 references of 1,000 sentences" in card and "1.00" not in card.split("## Quality")[1]


def test_the_card_says_when_the_app_flags_a_translation(tokenizer, tmp_path):
    make_checkpoint(tokenizer, tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    val = {"multi30k:val": {"sentences": 1014, "wrong": 108, "wrong_flagged": 0.44, "right_flagged": 0.04}}
    confidence = {"threshold": 0.4385, "note": "fitted on multi30k:val", "val": val}
    assert "## Confidence" not in render_card(tmp_path / "m")
    (tmp_path / "m" / "config.json").write_text(json.dumps({**config, "confidence": confidence}))
    card = render_card(tmp_path / "m")
    assert "P(wrong) ≥ 0.44" in card and "| multi30k:val | 1014 | 108 | 44% | 4% |" in card


def test_the_card_ranks_the_attribution_methods_by_faithfulness(tokenizer, tmp_path):
    make_checkpoint(tokenizer, tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert "## Attribution" not in render_card(tmp_path / "m")
    entry = {"sentences": 500, "tokens": 6000, "split": "test_2016_flickr",
             "drop": {"random": {"1": 0.26, "3": 0.83}, "alti": {"1": 3.0, "3": 4.0}},
             "stderr": {"random": {"1": 0.02, "3": 0.03}, "alti": {"1": 0.04, "3": 0.04}}}
    (tmp_path / "m" / "config.json").write_text(json.dumps({**config, "faithfulness": entry}))
    card = render_card(tmp_path / "m")
    section = card.split("## Attribution")[1]
    assert section.index("| alti | 3.00 ± 0.04 | 4.00 ± 0.04 |") < section.index("| random | 0.26 ± 0.02 |")


def test_the_card_gives_bleu_by_sentence_length_and_the_page_charts_it(tokenizer, tmp_path):
    d = tmp_path / "m"
    make_checkpoint(tokenizer, d)
    report = _report("../shared/data/tatoeba-en-de", "test-long", 31.0, "all", 1000, 1186)
    by_length = [{"words": "1-5", "sentences": 0, "bleu": None, "chrf": None},
                 {"words": "6-10", "sentences": 700, "bleu": 33.25, "chrf": 60.0},
                 {"words": "11-15", "sentences": 280, "bleu": 27.5, "chrf": 55.0},
                 {"words": "16+", "sentences": 20, "bleu": 20.0, "chrf": 50.0}]
    report["results"]["beam 4"] = {**report["results"]["greedy"], "alpha": 1.0, "by_length": by_length}
    add_eval_report(d, report)
    card = render_card(d)
    assert "| decoding | 1-5 words | 6-10 words | 11-15 words | 16+ words |" in card
    assert "| beam 4 (α 1) | – | 33.25 (700) | 27.50 (280) | 20.00 (20) |" in card
    fig = figures.bleu_by_length([("tatoeba test-long", by_length), ("multi30k test", by_length[:2])])
    assert [t.name for t in fig.data] == ["tatoeba test-long", "multi30k test"]
    assert list(fig.data[0].x) == ["1-5", "6-10", "11-15", "16+"] and fig.data[0].y[0] is None
    assert list(fig.data[0].customdata) == [0, 700, 280, 20] and fig.layout.barmode == "group"


def test_the_card_says_how_many_hand_written_sentences_came_back_right(tokenizer, tmp_path, monkeypatch):
    """Issue 40: the card file and the card page give the hand check's count and where its table is."""
    from streamlit.testing.v1 import AppTest

    from tests.support import APP, goto
    make_checkpoint(tokenizer, tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    hand = {"right": 9, "of": 40, "words": "8-15", "table": "benchmarks/judged/x.tsv", "before": 0}
    (tmp_path / "m" / "config.json").write_text(json.dumps({**config, "hand_check": hand}))
    card = render_card(tmp_path / "m")
    assert "## Judged by hand" in card and "9 of 40 everyday sentences of 8-15 words" in card and "before: 0" in card
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=60).run()
    goto(at, "card")
    assert any("9 of 40 everyday sentences" in m.value for m in at.markdown), [m.value for m in at.markdown]


def test_a_part_that_started_from_a_grown_model_says_so(tokenizer, tmp_path):
    """model.grow made the checkpoint a part started from deeper: the card's line for that part names it."""
    from model.storage.checkpoint import load_checkpoint
    from model.training.state import continued_from
    make_checkpoint(tokenizer, tmp_path / "g")
    config = json.loads((tmp_path / "g" / "config.json").read_text())
    note = "grown from checkpoints/x (3+3 layers -> 6+4, model.grow)"
    (tmp_path / "g" / "config.json").write_text(json.dumps({**config, "grown_from": note, "epochs": 4}))
    start = continued_from(load_checkpoint(tmp_path / "g"))
    assert start["grown_from"] == note
    make_checkpoint(tokenizer, tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    (tmp_path / "m" / "config.json").write_text(json.dumps(
        {**config, "epochs": 6, "train_args": {"init_from": "runs/g", "epochs": 6, "continued_from": start}}))
    assert f"epochs 5-6: continued from those weights, {note}, with `--init-from runs/g" in render_card(tmp_path / "m")


def test_the_card_says_how_the_app_computes_and_what_that_kept(tokenizer, tmp_path):
    from model.commands.precision import served_entry
    make_checkpoint(tokenizer, tmp_path / "m")
    assert "## Precision" not in render_card(tmp_path / "m")
    sets = {"multi30k:val": {"sentences": 1014, "identical": 1.0, "bleu_fp32": 40.83, "bleu": 40.83}}
    results = {"onednn": {"sets": sets, "attention_gap": 2.4e-7, "one_sentence_s": {"fp32": 0.0721, "onednn": 0.0519}}}
    write_config_entry(tmp_path / "m", "precision", served_entry("onednn", results, ["../shared/data/multi30k:val"]))
    card = render_card(tmp_path / "m")
    assert "serves it as `onednn`" in card and "72 -> 52 ms" in card and "within 2.4e-07" in card
    assert "| multi30k:val | 100.0% | 40.83 | 40.83 |" in card
    slower = {"onednn": {**results["onednn"], "one_sentence_s": {"fp32": 0.120, "onednn": 0.133}}}
    write_config_entry(tmp_path / "m", "precision", served_entry("fp32", slower, ["../shared/data/multi30k:val"]))
    card = render_card(tmp_path / "m")            # none chosen: the card says what was tried, and its times
    assert "The app serves it as fp32, chosen by `python -m model.precision` on ../shared/data/multi30k:val" in card
    assert "(`onednn` 120 -> 133 ms)" in card
