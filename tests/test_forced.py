"""Force a word and decode on (issue 54): DecodeOptions.prefix, `explain(..., prefix=...)`,
`python -m model.trace --prefix`. Forcing what the model would have said changes nothing; a forced start is
kept and the method goes on from it; the scores count the forced tokens' real probabilities; bad input gets
a message."""
from __future__ import annotations

import json
import math

import pytest
import torch

from model.commands import trace as trace_command
from model.inference.decoding import forced_decode
from model.inference.options import DecodeOptions
from model.inference.pipeline import InputError, explain, explanation_json, forced_ids
from model.storage.checkpoint import Checkpoint, load_checkpoint
from tests.support import ROOT

SHIPPED = ROOT / "checkpoints" / "multi30k-en-de"
pytestmark = pytest.mark.skipif(not (SHIPPED / "config.json").is_file(), reason="the shipped checkpoints are not here")
ANIMAL = "The animal didn't cross the street because it was too tired."


@pytest.fixture(scope="module")
def shipped() -> Checkpoint:
    return load_checkpoint(SHIPPED)


@pytest.mark.parametrize("method", ["greedy", "sample"])
def test_forcing_what_the_model_would_say_changes_nothing(shipped, method):
    opts = DecodeOptions(method, record_steps=True, seed=3)
    plain = explain(shipped, ANIMAL, opts)
    for k in (1, 3, len(plain.result.tokens) - 1):
        forced = explain(shipped, ANIMAL, DecodeOptions(method, record_steps=True, seed=3,
                                                        prefix=tuple(plain.result.tokens[:k])))
        assert forced.result.tokens == plain.result.tokens
        assert forced.result.hypotheses[0].log_prob == pytest.approx(plain.result.hypotheses[0].log_prob, abs=1e-4)


@pytest.mark.parametrize("method", ["greedy", "beam"])
def test_a_forced_start_is_kept_and_the_method_goes_on(shipped, method):
    opts = DecodeOptions(method, record_steps=True, alpha=shipped.beam_alpha)
    ex = explain(shipped, ANIMAL, opts, prefix="Die Katze")
    start = forced_ids(shipped, "Die Katze")
    assert tuple(ex.result.tokens[: len(start)]) == start and ex.output.startswith("Die Katze")
    for t, token in enumerate(start):                     # a forced step: one hypothesis, the forced token kept
        step = ex.result.steps[t]
        assert len(step.hypotheses) == 1
        assert [c.token for c in step.candidates if c.status == "kept"] == [token]
        assert any(c.status == "pruned" for c in step.candidates)          # what it would have said instead
    after = ex.result.steps[len(start)]
    assert len(after.hypotheses) == 1 and (method == "greedy" or len(ex.result.steps[len(start) + 1].hypotheses) > 1)


def test_the_score_counts_the_forced_tokens_real_probabilities(shipped):
    ex = explain(shipped, ANIMAL, DecodeOptions("greedy", record_steps=True), prefix="Die")
    src = torch.tensor([ex.source_ids])
    probs = forced_decode(shipped.model, src, ex.result.tokens).probs          # each output token, then EOS
    assert ex.result.hypotheses[0].log_prob == pytest.approx(sum(math.log(p) for p in probs), abs=1e-3)
    assert probs[0] < 0.5                                  # "Die" was not the model's own first choice


def test_the_json_says_which_tokens_were_forced(shipped, tmp_path):
    opts = DecodeOptions("greedy", record_steps=True, prefix=forced_ids(shipped, "Eine"))
    part = explanation_json(explain(shipped, "A dog runs on the beach.", opts), shipped, opts)["decoding"]
    assert part["forced"]["tokens"] == ["▁Eine"] and part["options"]["prefix"] == list(opts.prefix)
    out = tmp_path / "t.json"
    assert trace_command.main(["--text", "A dog runs on the beach.", "--prefix", "Eine", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["output"]["tokens"][0] == "▁Eine" and data["decoding"]["forced"]["text"] == "Eine"


def test_bad_forced_starts_get_a_message(shipped, capsys):
    with pytest.raises(InputError, match="empty"):
        explain(shipped, ANIMAL, prefix="  ")
    with pytest.raises(InputError, match="at most"):
        explain(shipped, "A dog.", prefix="Ein Hund rennt sehr schnell über die große grüne Wiese am Fluss " * 2)
    with pytest.raises(InputError, match="cannot write"):
        explain(shipped, ANIMAL, DecodeOptions(record_steps=True, prefix=(shipped.config.eos_id,)))
    with pytest.raises(SystemExit) as done:
        trace_command.main(["--text", "A dog.", "--prefix", " ", "--out", "-"])
    assert done.value.code == 2 and "empty" in capsys.readouterr().err
