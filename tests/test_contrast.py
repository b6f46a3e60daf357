"""Why this token and not that one (issue 54, model/analysis/attribution/contrast.py), on the shipped model:
contrastive gradient x input is the difference of the two single ones, integrated gradients' completeness
holds for the difference, erasure says what hiding a token really does, and the top source token of a
method moves the preference more than a random one on most sentences. Bad input gets a message."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from model.analysis.attribution.contrast import alternative_id, contrast, runner_up
from model.analysis.attribution.faithfulness import erased_log_probs
from model.analysis.attribution.gradients import Pass, gradient_x_input
from model.commands import attribution as attribution_command
from model.inference.options import DecodeOptions
from model.inference.pipeline import InputError, decode_many, source_ids
from model.storage.checkpoint import Checkpoint, load_checkpoint
from tests.support import ROOT

SHIPPED = ROOT / "checkpoints" / "multi30k-en-de"
pytestmark = pytest.mark.skipif(not (SHIPPED / "config.json").is_file(), reason="the shipped checkpoints are not here")
ANIMAL = "The animal didn't cross the street because it was too tired."
SENTENCES = [  # captions and everyday sentences (none of them a test set's)
    "A man in a blue shirt is cooking dinner.", "Two girls are reading a book in the park.",
    "The dog jumps over the fence.", "A woman sells fruit at the market.", "My brother works in a big hospital.",
    "The children are playing football after school.", "She forgot her umbrella at home.",
    "A boy rides his bike down the hill.", "We need more milk and bread.", "The old man feeds the birds.",
    "I am learning German because I like the language.", "The cat is sleeping on the red sofa.",
    "Three people are waiting for the bus.", "He bought a new car last week.",
    "A girl in a yellow dress is dancing.", "The teacher writes on the board.",
    "Our train leaves at eight o'clock.", "A man is climbing a tall rock.",
    "The museum is closed on Mondays.", "Two dogs run along the beach.",
]


@pytest.fixture(scope="module")
def shipped() -> Checkpoint:
    return load_checkpoint(SHIPPED)


def _translated(ckpt: Checkpoint, text: str) -> tuple[list[int], list[int]]:
    ids = source_ids(ckpt, text)
    return ids, decode_many(ckpt, [ids], DecodeOptions("greedy"))[0].tokens


def _es_not_sie(ckpt: Checkpoint, methods: tuple[str, ...]):
    """The animal sentence at "es", against "sie": the contrast, and the passes of the chosen and of the other
    token (the same inputs; the other token where the chosen one was)."""
    ids, output = _translated(ckpt, ANIMAL)
    t = output.index(ckpt.tgt_tokenizer.piece_id("▁es"))
    alt = alternative_id(ckpt, "sie")
    p = Pass.of(ckpt.model, ids, output)
    other = Pass(p.src, p.tgt, p.gold.clone().index_fill_(0, torch.tensor([t]), alt))
    return contrast(ckpt, ids, output, t, alt, methods=methods), p, other, t


def test_contrastive_gradient_x_input_is_the_difference_of_the_two_single_ones(shipped):
    c, p, other, t = _es_not_sie(shipped, ("grad_x_input",))
    chosen, alternative = gradient_x_input(shipped.model, p), gradient_x_input(shipped.model, other)
    source, prefix = c.scores["grad_x_input"]
    assert np.allclose(source, chosen.source[t] - alternative.source[t], atol=1e-4)
    assert np.allclose(prefix, chosen.prefix[t, : t + 1] - alternative.prefix[t, : t + 1], atol=1e-4)
    assert c.chosen_token == "▁es" and c.alternative_token == "▁sie" and c.difference > 0


def test_integrated_gradients_complete_the_difference_within_one_percent(shipped):
    c, _p, _other, t = _es_not_sie(shipped, ("integrated_gradients",))
    source, prefix = c.scores["integrated_gradients"]
    change = c.difference - c.ig_baseline_difference
    assert abs(source.sum() + prefix.sum() - change) <= 0.01 * abs(change) + 1e-6
    assert c.ig_completeness_error <= 0.01 and c.ig_points >= 24 and len(prefix) == t + 1


def test_erasure_is_the_difference_lost_by_hiding_each_source_token(shipped):
    c, p, other, t = _es_not_sie(shipped, ("erasure",))
    n = len(c.source_tokens)
    hide = np.eye(n, dtype=bool)
    without = (erased_log_probs(shipped.model, p, hide, np.full(n, t))
               - erased_log_probs(shipped.model, other, hide, np.full(n, t)))
    assert np.allclose(c.scores["erasure"][0], c.difference - without, atol=1e-4)
    assert c.source_tokens[c.top_source("erasure")] == "▁it"        # "es" and not "sie": it is the word "it"


def test_the_top_token_of_integrated_gradients_moves_the_preference_more_than_a_random_one(shipped):
    """On 8 sentences, at a random output position, against the runner-up token: hiding integrated gradients'
    top source token takes more of log p(chosen) - log p(runner-up) away than hiding a random other source
    token, on most of them (on 100 test2016 sentences: BENCHMARKS.md, `benchmarks/contrast_faithfulness.py`)."""
    rng = np.random.default_rng(0)
    wins = 0
    for text in SENTENCES[:8]:
        ids, output = _translated(shipped, text)
        t = int(rng.integers(0, len(output)))
        c = contrast(shipped, ids, output, t, runner_up(shipped, ids, output, t),
                     methods=("integrated_gradients", "erasure"))
        top = c.top_source("integrated_gradients")
        other = int(rng.choice([i for i in range(len(ids)) if i != top]))
        taken = c.scores["erasure"][0]             # the difference each source token's hiding takes away
        wins += bool(taken[top] > taken[other])
    assert wins >= 5, f"{wins} of 8"


def test_bad_questions_get_a_message(shipped):
    ids, output = _translated(shipped, ANIMAL)
    t = output.index(shipped.tgt_tokenizer.piece_id("▁es"))
    with pytest.raises(InputError, match="past the end"):
        contrast(shipped, ids, output, len(output) + 1, alternative_id(shipped, "sie"))
    with pytest.raises(InputError, match="the model chose"):
        contrast(shipped, ids, output, t, alternative_id(shipped, "es"))
    with pytest.raises(InputError, match="one token"):
        alternative_id(shipped, "Katzenfutterdose")
    with pytest.raises(InputError, match="empty"):
        alternative_id(shipped, "  ")
    with pytest.raises(InputError, match="not a token the model can write"):
        contrast(shipped, ids, output, t, shipped.config.pad_id)


def test_the_command_line_writes_the_contrast(shipped, tmp_path, capsys):
    out = tmp_path / "why.json"
    assert attribution_command.main(["--text", ANIMAL, "--position", "11", "--contrast", "sie", "--no-integrated",
                                     "--out", str(out)]) == 0
    part = json.loads(out.read_text())["contrast"]
    assert part["chosen"]["token"] == "▁es" and part["alternative"]["token"] == "▁sie"
    assert set(part["methods"]) == {"grad_x_input", "erasure"} and len(part["source_tokens"]) == len(
        part["methods"]["erasure"]["source"])
    for argv, said in ((["--text", ANIMAL, "--position", "11"], "go together"),
                       (["--text", ANIMAL, "--position", "99", "--contrast", "sie"], "past the end"),
                       (["--text", ANIMAL, "--position", "11", "--contrast", "es"], "the model chose")):
        with pytest.raises(SystemExit) as done:
            attribution_command.main([*argv, "--no-integrated", "--out", str(out)])
        assert done.value.code == 2 and said in capsys.readouterr().err
