"""When to distrust a translation: the numbers, the fit, the threshold, and what a checkpoint stores."""
from __future__ import annotations

import json
import math
import shutil

import pytest

from model.commands.calibrate import Judged, best_threshold, fit, report, share_threshold
from model.commands.calibrate import main as calibrate_main
from model.inference.confidence import (
    UNCOVERED,
    Calibration,
    assess,
    familiar_words_text,
    features,
    unseen_words,
    words,
)
from model.inference.options import DecodeOptions
from model.inference.pipeline import explain
from model.storage.checkpoint import load_checkpoint
from tests.support import ROOT, make_checkpoint


def test_words_are_letters_only_and_lowercased():
    assert words("Wo ist der Bahnhof? 3 Äpfel, don't!") == ["wo", "ist", "der", "bahnhof", "äpfel", "don", "t"]
    assert familiar_words_text(["A dog.", "a Cat"]) == "a\ncat\ndog\n"


def test_features_read_the_probabilities_and_the_unseen_share():
    familiar = frozenset({"the", "dog"})
    mean, low, share, missing, unread = features([0.5, 0.25, 1.0], "The dog eats pizza", familiar)
    assert mean == pytest.approx((math.log(0.5) + math.log(0.25)) / 3)
    assert low == pytest.approx(math.log(0.25)) and share == pytest.approx(0.5)
    assert missing == unread == 0.0                  # no lexicon, no trace: the two signals read nothing
    assert unseen_words("pizza, the PIZZA and dog", familiar) == ["pizza", "and"]
    assert features([1.0], "pizza", None)[2] == 0.0 and unseen_words("pizza", None) == []


def test_p_wrong_grows_as_the_model_hesitates_and_the_input_gets_stranger():
    cal = Calibration((-1.0, -1.0, 1.0), 0.0, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), 0.5)
    assert cal.p_wrong((-0.1, -0.2, 0.0)) < cal.p_wrong((-2.0, -4.0, 0.0)) < cal.p_wrong((-2.0, -4.0, 1.0))
    assert Calibration.from_dict(json.loads(json.dumps(cal.to_dict()))) == cal
    with pytest.raises(ValueError, match="features"):
        Calibration.from_dict({**cal.to_dict(), "features": ["other"]})


def test_assess_flags_at_the_threshold_and_names_its_reasons():
    cal = Calibration((-2.0, 0.0, 3.0), 0.0, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), 0.7)
    sure = assess([0.99, 0.98, 0.99], "the dog", cal, frozenset({"the", "dog"}))
    unsure = assess([0.95, 0.2, 0.99], "the pizza", cal, frozenset({"the", "dog"}))
    assert not sure.flagged and sure.p_wrong < 0.7 and sure.reasons(["▁der", "▁Hund", "</s>"]) == []
    assert unsure.flagged and unsure.unseen == ("pizza",) and unsure.weakest == (1, 0.2)
    assert unsure.reasons(["▁die", "▁Pizza", "</s>"]) == ["never read in training: 'pizza'",
                                                         "unsure at 'Pizza' (p = 0.20)"]
    hoodie = assess([0.9, 0.1, 0.9, 0.9], "x", None, None).reasons(["▁Ho", "od", "ie", "</s>"])
    assert hoodie[0] == "unsure at 'Hoodie' (p = 0.10 for its piece 'od')"
    assert "hesitant" in assess([0.3, 0.3], "the dog", cal, None).reasons(["▁a", "</s>"])[-1]
    uncalibrated = assess([0.9, 0.1], "x", None, None)
    assert uncalibrated.p_wrong is None and not uncalibrated.flagged and not uncalibrated.familiarity_known


def test_the_threshold_separates_wrong_from_right_best():
    p = [0.9, 0.8, 0.7, 0.6, 0.3, 0.2, 0.1]
    wrong = [True, True, False, True, False, False, False]
    assert best_threshold(p, wrong) == 0.6                  # all 3 wrong flagged, 1 of 4 right: 1 - 0.25
    assert best_threshold([0.5, 0.5, 0.1], [True, False, False]) == 0.5   # ties are flagged together


def test_the_threshold_flags_the_asked_share_of_the_wrong_ones():
    p = [0.9, 0.8, 0.7, 0.6, 0.3, 0.2, 0.1]
    wrong = [True, False, True, False, True, False, True]      # wrong ones at 0.9, 0.7, 0.3, 0.1
    assert share_threshold(p, wrong, 0.5) == 0.7                # 2 of 4, the highest that does
    assert share_threshold(p, wrong, 0.8) == 0.1                # 3.2 of 4: all 4
    assert share_threshold(p, wrong, 0.75) == 0.3
    assert share_threshold(p, [False] * 7, 0.8) == 1.0          # nothing wrong: nothing to flag


def test_fit_learns_that_low_probability_means_wrong():
    judged = [Judged("a", (-0.1 - 0.01 * i, -0.3, 0.0), False) for i in range(30)]
    judged += [Judged("b", (-1.5 - 0.01 * i, -3.0, 0.3), True) for i in range(10)]
    judged += [Judged("b", (-0.12, -0.4, 0.0), True), Judged("a", (-1.4, -2.5, 0.2), False)]
    cal = fit(judged)
    assert cal.p_wrong((-2.0, -3.5, 0.4)) > cal.threshold > cal.p_wrong((-0.05, -0.2, 0.0))
    table = report(judged, cal)
    assert table["all"]["sentences"] == 42 and table["all"]["wrong"] == 11
    assert table["all"]["wrong_flagged"] >= 0.8 and table["a"]["right_flagged"] <= 0.05   # default: 80 % of the wrong
    assert table["all"]["confident_wrong"] == round(sum(j.wrong and cal.p_wrong(j.x) < cal.threshold for j in judged)
                                                    / sum(cal.p_wrong(j.x) < cal.threshold for j in judged), 3)
    every = fit(judged, flag_share=1.0)          # the odd wrong one that looks sure is flagged too, and more right
    assert report(judged, every)["all"]["wrong_flagged"] == 1.0 and every.threshold < cal.threshold
    separating = fit(judged, flag_share=0)
    best = report(judged, separating)
    assert best["b"]["wrong_flagged"] >= 0.9 and best["a"]["right_flagged"] <= 0.05
    assert separating.threshold == math.floor(best_threshold([separating.p_wrong(j.x) for j in judged],
                                                             [j.wrong for j in judged]) * 1e4) / 1e4


def test_an_untrained_model_has_nothing_to_fit_and_no_calibration(tokenizer, tmp_path):
    ckpt_dir = tmp_path / "tiny"
    make_checkpoint(tokenizer, ckpt_dir)
    data = _data(tmp_path, ["the dog runs", "a red ball"], ["der Hund rennt", "ein roter Ball"])
    with pytest.raises(SystemExit):
        calibrate_main(["--checkpoint", str(ckpt_dir), "--val", f"{data}:test"])    # never on a test split
    with pytest.raises(SystemExit):        # every translation is wrong: nothing to fit, said in one line
        calibrate_main(["--checkpoint", str(ckpt_dir), "--val", f"{data}:val", "--beam-size", "2"])
    ckpt = load_checkpoint(ckpt_dir)
    assert ckpt.calibration is None and ckpt.familiar_words is None
    ex = explain(ckpt, "the dog runs")
    assert len(ex.output_probs) == len(ex.result.tokens) + 1 and all(0 < p <= 1 for p in ex.output_probs)
    assert ex.confidence(ckpt).p_wrong is None


def _data(root, en, de):
    data = root / "data"
    data.mkdir()
    for split in ("train", "val", "test"):
        (data / f"{split}.en").write_text("\n".join(en) + "\n")
        (data / f"{split}.de").write_text("\n".join(de) + "\n")
    return data


@pytest.mark.skipif(not (ROOT / "checkpoints" / "multi30k-en-de").is_dir(), reason="needs the shipped en-de")
def test_calibrate_stores_the_fit_that_the_app_then_reads(tmp_path):
    ckpt_dir = tmp_path / "en-de"
    shutil.copytree(ROOT / "checkpoints" / "multi30k-en-de", ckpt_dir)
    # right references for the first sentences, references of other sentences for the last: those are wrong
    en = ["A dog runs in the grass.", "A man is riding a bike.", "Two children play in the water.",
          "A woman is singing.", "A boy jumps into the lake.", "Three men are standing on a street."]
    de = ["Ein Hund rennt im Gras.", "Ein Mann fährt Fahrrad.", "Zwei Kinder spielen im Wasser.",
          "Eine Frau singt.", "Ich habe keine Zeit für so etwas.", "Wo ist der Bahnhof, bitte?"]
    data = _data(tmp_path, en, de)
    out = tmp_path / "fit.json"
    assert calibrate_main(["--checkpoint", str(ckpt_dir), "--val", f"{data}:val", "--train", f"{data}:train",
                           "--beam-size", "2", "--json", str(out), "--write"]) == 0
    fitted = json.loads(out.read_text())
    assert fitted["val"]["all"] == {**fitted["val"]["all"], "sentences": 6, "wrong": 2}
    ckpt = load_checkpoint(ckpt_dir)
    assert ckpt.calibration == Calibration.from_dict(fitted) and "bahnhof" not in ckpt.familiar_words
    assert {"dog", "grass", "lake"} <= ckpt.familiar_words
    conf = explain(ckpt, "Where is the dog?").confidence(ckpt)
    assert conf.p_wrong is not None and conf.unseen == ("where",) and conf.familiarity_known



@pytest.mark.skipif(not (ROOT / "checkpoints" / "multi30k-en-de").is_dir(), reason="needs the shipped en-de")
def test_a_new_models_table_carries_the_judgments_of_outputs_judged_before(tmp_path):
    """`benchmarks.confidence_sample carry`: where the checkpoint's output is the one judged for that source, its
    judgment and note come along; an output never judged is left for a person; every source of the first table."""
    import csv
    import subprocess
    import sys
    trust = ROOT / "benchmarks" / "judged" / "trust-en-de-shipped.tsv"
    with open(trust, encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))[:3]
    rows[2]["output"] = "Eine andere Übersetzung."                    # judged, but not what the model says
    judged = tmp_path / "judged.tsv"
    with open(judged, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, list(rows[0]), delimiter="\t", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    out = tmp_path / "new.tsv"
    done = subprocess.run([sys.executable, "-m", "benchmarks.confidence_sample", "carry", "--checkpoint",
                           str(ROOT / "checkpoints" / "multi30k-en-de"), "--out", str(out), str(judged)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    with open(out, encoding="utf-8") as f:
        new = list(csv.DictReader(f, delimiter="\t"))
    assert [r["source"] for r in new] == [r["source"] for r in rows]
    carried = [(r["carried"], r["right"], r["note"]) for r in new[:2]]
    assert carried == [("yes", x["right"], x["note"]) for x in rows[:2]]
    assert new[2]["carried"] == "no" and new[2]["right"] == "" and new[2]["output"] != rows[2]["output"]
    assert all(r["flagged"] in ("yes", "no") for r in new)              # the shipped model's notice, as the app shows
    assert "1 new to judge" in done.stdout and rows[2]["source"] in done.stdout


def test_the_notice_names_the_words_the_lexicon_finds_missing_and_weighs_them():
    from model.inference.lexicon import Lexicon
    lex = Lexicon.from_pairs([("turtle", "Schildkröte"), ("garden", "Garten"), ("Berlin", "Berlin")], "en", "de")
    text = "My turtle lives in a garden in Berlin."
    kept, lost = "Meine Schildkröte lebt in einem Garten in Berlin.", "Mein Schaden lebt in einem Garten."
    assert lex.check(text, lost) == (["turtle", "garden", "berlin"], ["turtle", "berlin"])
    x = features([0.9, 0.9], text, None, lex.check(text, lost))
    assert x[3] == pytest.approx(2 / 3) and features([0.9, 0.9], text, None, lex.check(text, kept))[3] == 0.0
    four = Calibration((-1.0, -1.0, 1.0, 2.0), -1.0, (0.0,) * 4, (1.0,) * 4, 0.5,
                       names=("mean_log_prob", "min_log_prob", "unseen_share", "missing_share"))
    assert Calibration.from_dict(json.loads(json.dumps(four.to_dict()))) == four
    right = assess([0.9, 0.9], text, four, None, lex.check(text, kept))
    wrong = assess([0.9, 0.9], text, four, None, lex.check(text, lost))
    assert wrong.p_wrong > right.p_wrong and wrong.flagged and not right.flagged
    assert wrong.missing == ("turtle", "berlin")
    assert wrong.reasons(["▁Mein", "</s>"])[0] == "'turtle', 'berlin' may be missing from the translation"
    assert right.reasons(["▁Meine", "</s>"]) == []
    three = Calibration((-1.0, -1.0, 1.0), -1.0, (0.0,) * 3, (1.0,) * 3, 0.5)     # fitted before the signal
    assert three.p_wrong(x) == three.p_wrong(x[:3])


def test_a_source_word_the_output_drew_almost_nothing_from_is_named():
    import torch

    from model.inference.confidence import word_coverage
    pieces = ["▁The", "▁hedge", "hog", "▁sleeps", "▁.", "</s>"]
    cross = torch.zeros(4, 2, 3, 6)                    # (L, H, T, S): 3 output steps
    cross[:, :, 0, 0] = cross[:, :, 1, 3] = 1.0        # "The", then "sleeps", then EOS
    cross[:, :, 2, 5] = 0.9
    cross[:, :, 2, 2] = 0.1                            # "hog": 0.1 in all, under UNCOVERED (0.5)
    cross[:2, :, 1, 1] = 1.0                           # the first two layers looked at "hedge": not counted
    coverage = word_coverage(cross, pieces, "en")
    assert [w for w, _ in coverage] == ["hedgehog", "sleeps"]          # function words, "." and EOS left out
    assert coverage[0][1] == pytest.approx(0.1) and coverage[0][1] < UNCOVERED <= coverage[1][1]
    x = features([0.9, 0.9, 0.9], "The hedgehog sleeps.", None, ([], []), coverage)
    assert x[4] == pytest.approx(0.5)
    conf = assess([0.9, 0.9, 0.9], "The hedgehog sleeps.", None, None, ([], []), coverage)
    assert conf.unread == ("hedgehog",)
    assert conf.reasons(["▁Er", "▁schläft", "</s>"]) == ["the translation barely drew on 'hedgehog'"]
    both = assess([0.9] * 3, "The hedgehog sleeps.", None, None, (["hedgehog"], ["hedgehog"]), coverage)
    assert both.reasons(["▁Er", "</s>"]) == ["'hedgehog' may be missing from the translation"]   # said once


def test_an_explanation_reads_its_coverage_from_its_own_trace(tokenizer, tmp_path):
    make_checkpoint(tokenizer, tmp_path / "m")
    ckpt = load_checkpoint(tmp_path / "m")
    ex = explain(ckpt, "the dog runs in the park", DecodeOptions("greedy", max_len_b=3))
    coverage = ex.source_coverage(ckpt)
    assert [w for w, _ in coverage] == ["dog", "runs", "park"]
    steps = len(ex.output_probs)
    assert all(0 <= c <= steps + 1e-4 for _, c in coverage)
    assert ex.confidence(ckpt).unread == tuple(w for w, c in coverage if c < UNCOVERED)
    with_reference = explain(ckpt, "the dog runs in the park", DecodeOptions("greedy"), reference="a dog")
    assert with_reference.source_coverage(ckpt) == []
