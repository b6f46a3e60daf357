"""Scoring: several references per sentence (Tatoeba), lowercased BLEU, grouping a split by source."""
from __future__ import annotations

import pytest
import sacrebleu

from model.training.data import group_references
from model.training.metrics import corpus_scores, reference_streams, scores_by_length

HYPS = ["the cat sits on the mat .", "a dog runs in the park .", "I love pizza ."]
REFS = [["the cat is on the mat .", "the cat sits on the mat ."],
        ["a dog is running in the park ."],
        ["I like pizza .", "I love pizza !", "pizza is what I love ."]]


def test_a_hypothesis_matching_any_reference_scores_as_matching_it():
    first_only = corpus_scores(HYPS[:1], [REFS[0][0]])
    all_refs = corpus_scores(HYPS[:1], [REFS[0]])
    assert all_refs.bleu == pytest.approx(100.0) and first_only.bleu < 60


def test_filling_missing_references_changes_no_score():
    ours = corpus_scores(HYPS, REFS)
    # fill the missing slots with each sentence's *last* reference instead of its first
    width = max(len(r) for r in REFS)
    other = [list(s) for s in zip(*[r + [r[-1]] * (width - len(r)) for r in REFS])]
    assert ours.bleu == pytest.approx(sacrebleu.corpus_bleu(HYPS, other).score)
    assert ours.chrf == pytest.approx(sacrebleu.corpus_chrf(HYPS, other).score)
    assert "nrefs:var" not in ours.bleu_signature


def test_one_reference_per_line_is_the_old_behaviour():
    refs = [r[0] for r in REFS]
    assert corpus_scores(HYPS, refs).bleu == pytest.approx(sacrebleu.corpus_bleu(HYPS, [refs]).score)
    assert reference_streams(refs) == [refs]


def test_lowercased_bleu_ignores_case_only_when_asked():
    s = corpus_scores(["The Dog Runs ."], ["the dog runs ."], lowercase_too=True)
    assert s.bleu < 50 and s.bleu_lowercase == pytest.approx(100.0)
    assert corpus_scores(["a"], ["a"]).bleu_lowercase is None


@pytest.mark.parametrize("refs", [[[]], [["x"], []]])
def test_a_sentence_without_reference_is_refused(refs):
    with pytest.raises(ValueError, match="no reference"):
        corpus_scores(["a"] * len(refs), refs)


def test_grouping_keeps_first_seen_order_and_every_distinct_target():
    sources = ["Hi.", "Run!", "Hi.", "Hi.", "Wait."]
    targets = ["Hallo!", "Lauf!", "Grüß Gott!", "Hallo!", "Warte!"]
    assert group_references(sources, targets) == (
        ["Hi.", "Run!", "Wait."], [["Hallo!", "Grüß Gott!"], ["Lauf!"], ["Warte!"]])


def test_bleu_by_length_scores_each_length_on_its_own_sentences():
    sources = ["one two three", "one two three four five six seven", "a b c d e f g h i j k l m n o p q",
               "x y", "one two three four five six"]
    hyps = ["the cat sits", "a dog runs in the park today", "I love pizza very much", "hi there", "good day to you"]
    refs = [["the cat sits"], ["a dog is running in the park"], ["I love pizza ."], ["hello there"],
            ["good day to you"]]
    rows = scores_by_length(sources, hyps, refs)
    assert [(r["words"], r["sentences"]) for r in rows] == [("1-5", 2), ("6-10", 2), ("11-15", 0), ("16+", 1)]
    assert rows[2]["bleu"] is None and rows[2]["chrf"] is None        # no sentence: no score, not 0
    alone = corpus_scores([hyps[1], hyps[4]], [refs[1], refs[4]])
    assert rows[1]["bleu"] == round(alone.bleu, 2) and rows[1]["chrf"] == round(alone.chrf, 2)
    assert rows[0]["bleu"] != rows[1]["bleu"]
    with pytest.raises(ValueError):
        scores_by_length(sources[:2], hyps, refs)
