"""Ensembles: the mean of the members' probabilities, decoded like one model (cached,
beamed, batched), and refused when the members cannot be averaged."""
from __future__ import annotations

import pytest
import torch

from model import Trace
from model.commands.translate import main as translate_main
from model.inference.decoding import decode, output_log_probs
from model.inference.ensemble import Ensemble
from model.inference.options import DecodeOptions
from model.network.tokenizer import Tokenizer
from model.storage.checkpoint import save_checkpoint
from tests.support import random_batch, sentences, tiny_model

V = 40


@pytest.fixture(scope="module")
def members():
    # different shapes on purpose: the states and caches of unequal members must not mix
    return [tiny_model(V, seed=3), tiny_model(V, seed=7, d_model=48, n_decoder_layers=3, n_encoder_layers=1)]


def mean_log_probs(models, src, tgt) -> torch.Tensor:
    """Reference: each member's full teacher-forced pass, probabilities averaged, then
    the padding and start symbols hidden as output_log_probs does for one model."""
    with torch.inference_mode():
        probs = torch.stack([m(src, tgt).float().log_softmax(-1).exp() for m in models]).mean(0)
    log_probs = probs.log()
    log_probs[..., [models[0].cfg.pad_id, models[0].cfg.bos_id]] = float("-inf")
    return log_probs.log_softmax(-1)


def test_ensemble_distribution_is_the_mean_of_the_members(members):
    ens = Ensemble(members)
    src, tgt = random_batch(V, [6, 4], seed=1), random_batch(V, [5, 3], seed=2, bos=True)
    with torch.inference_mode():
        hidden = ens.decode(tgt, ens.encode(src), ens.src_mask(src))            # (B, T, 32 + 48)
        got = output_log_probs(ens, hidden)
    assert hidden.shape == (2, 5, 32 + 48)
    real = tgt != 0                                                             # padded positions are free
    torch.testing.assert_close(got[real], mean_log_probs(members, src, tgt)[real], atol=1e-5, rtol=1e-5)


def test_ensemble_of_one_decodes_as_the_model(members):
    src = random_batch(V, [6, 3, 8], seed=4)
    for opts in (DecodeOptions("greedy"), DecodeOptions("beam", beam_size=3)):
        alone, ens = decode(members[0], src, opts), decode(Ensemble(members[:1]), src, opts)
        assert [r.tokens for r in ens] == [r.tokens for r in alone]
        assert [r.score for r in ens] == pytest.approx([r.score for r in alone], abs=1e-5)


def test_ensemble_greedy_follows_the_mean_distribution(members):
    """Greedy over the ensemble = argmax of the reference mean, recomputed over each whole prefix."""
    ens = Ensemble(members)
    src = random_batch(V, [7], seed=5)
    got = decode(ens, src, DecodeOptions("greedy", max_len_a=0, max_len_b=8))[0].tokens
    ys = [ens.cfg.bos_id]
    for _ in range(8):
        nxt = int(mean_log_probs(members, src, torch.tensor([ys]))[0, -1].argmax())
        if nxt == ens.cfg.eos_id:
            break
        ys.append(nxt)
    assert got == ys[1:]


def test_ensemble_beam_cached_equals_uncached_and_batched_equals_alone(members):
    ens = Ensemble(members)
    src = random_batch(V, [6, 3, 8, 5], seed=6)
    opts = DecodeOptions("beam", beam_size=4)
    cached = decode(ens, src, opts)
    uncached = decode(ens, src, DecodeOptions("beam", beam_size=4, use_cache=False))
    assert [r.tokens for r in cached] == [r.tokens for r in uncached]
    for i, n in enumerate([6, 3, 8, 5]):
        assert decode(ens, src[i:i + 1, :n], opts)[0].tokens == cached[i].tokens


def test_ensemble_refuses_what_cannot_be_averaged_or_traced(members):
    with pytest.raises(ValueError, match="vocab"):
        Ensemble([members[0], tiny_model(V + 1, seed=1)])
    with pytest.raises(ValueError, match="at least one"):
        Ensemble([])
    ens = Ensemble(members)
    src = random_batch(V, [4], seed=1)
    with pytest.raises(ValueError, match="traced"):
        ens.encode(src, trace=Trace())
    with pytest.raises(ValueError, match="traced"):
        decode(ens, src, DecodeOptions("greedy", record_steps=True))


def test_translate_cli_decodes_an_ensemble_and_names_a_foreign_tokenizer(tokenizer, tmp_path, capsys):
    for name, seed in (("a", 1), ("b", 2)):
        save_checkpoint(tmp_path / name, tiny_model(tokenizer.vocab_size, seed=seed), tokenizer, tokenizer,
                        meta={"src_lang": "en", "tgt_lang": "de"})
    other = Tokenizer.train(sentences(300, seed=9), vocab_size=tokenizer.vocab_size)
    save_checkpoint(tmp_path / "c", tiny_model(other.vocab_size, seed=3), other, other,
                    meta={"src_lang": "en", "tgt_lang": "de"})

    (tmp_path / "in.txt").write_text("the dog runs\na man in the park\n")
    args = ["--checkpoint", str(tmp_path / "a"), "--input", str(tmp_path / "in.txt"), "--no-progress"]
    assert translate_main([*args, "--ensemble", str(tmp_path / "b")]) == 0
    assert len(capsys.readouterr().out.split("\n")) == 3
    with pytest.raises(SystemExit) as refused:
        translate_main([*args, "--ensemble", str(tmp_path / "c")])
    assert refused.value.code == 2 and "tokenizer differs" in capsys.readouterr().err
