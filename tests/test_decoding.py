"""Decoding: greedy / beam / sampling agree with references, caches and batches, and a
hand-scripted model pins beam search down exactly."""
from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from torch import Tensor

from model import Trace
from model.inference.decoding import (
    beam_step,
    decode,
    forced_decode,
    greedy_batch,
    repeating_tokens,
    sampling_distribution,
)
from model.inference.options import DecodeOptions, max_output_length
from model.network.layers import DecoderCache
from tests.support import random_batch, tiny_model

V = 40


@pytest.fixture(scope="module")
def model():
    # a random tiny model repeats itself; a few seeds and lengths make EOS appear sometimes
    return tiny_model(V, seed=3)


def src_batch():
    return random_batch(V, [6, 3, 8, 5], seed=4)


def test_beam_size_one_is_exactly_greedy(model):
    src = src_batch()
    greedy = greedy_batch(model, src, max_output_length(src.size(1), model.cfg.max_positions))
    beam1 = [r.tokens for r in decode(model, src, DecodeOptions("beam", beam_size=1, max_len_a=1.5, max_len_b=10))]
    loop_greedy = [r.tokens for r in decode(model, src, DecodeOptions("greedy"))]
    # greedy_batch pads every row to the longest allowed length; compare per sentence limit
    for i, n in enumerate([6, 3, 8, 5]):
        limit = max_output_length(n, model.cfg.max_positions)
        assert beam1[i] == loop_greedy[i] == greedy[i][:limit]


def test_cached_decoding_equals_full_prefix_recompute(model):
    src = random_batch(V, [7], seed=5)
    src_mask = model.src_mask(src)
    with torch.inference_mode():
        memory = model.encode(src, src_mask)
        cache = DecoderCache.empty(model.cfg.n_decoder_layers)
        ys = torch.tensor([[model.cfg.bos_id]])
        for _ in range(12):
            cached = model.generator(model.decode(ys[:, -1:], memory, src_mask, cache)[:, -1])
            full = model.generator(model.decode(ys, memory, src_mask)[:, -1])
            assert torch.allclose(cached, full, atol=1e-4)
            assert cached.argmax() == full.argmax()
            ys = torch.cat([ys, full.argmax(-1, keepdim=True)], dim=1)


@pytest.mark.parametrize("method", ["greedy", "beam"])
def test_decode_loop_cached_equals_recomputed(model, method):
    """The decode loop itself, with and without the cache: same hypotheses, scores and
    recorded attention rows (the benchmark's "full recompute" is this reference)."""
    src = src_batch()
    opts = DecodeOptions(method, beam_size=3, record_steps=True)
    cached = decode(model, src, opts)
    full = decode(model, src, replace(opts, use_cache=False))
    for a, b in zip(cached, full):
        assert [h.tokens for h in a.hypotheses] == [h.tokens for h in b.hypotheses]
        assert [h.score for h in a.hypotheses] == pytest.approx([h.score for h in b.hypotheses], abs=1e-4)
        assert len(a.steps) == len(b.steps) > 1
        for sa, sb in zip(a.steps, b.steps):
            for ha, hb in zip(sa.hypotheses, sb.hypotheses):
                assert ha.tokens == hb.tokens
                assert torch.allclose(ha.self_attn, hb.self_attn, atol=1e-5)
                assert torch.allclose(ha.cross_attn, hb.cross_attn, atol=1e-5)


@pytest.mark.parametrize("opts", [DecodeOptions("greedy"), DecodeOptions("beam", beam_size=3),
                                  DecodeOptions("sample", temperature=1.3, top_k=10, seed=7)],
                         ids=["greedy", "beam", "sample"])
def test_batched_equals_one_at_a_time(model, opts):
    src = src_batch()
    batched = decode(model, src, opts)
    for i, n in enumerate([6, 3, 8, 5]):
        alone = decode(model, src[i:i + 1, :n], opts)[0]
        assert [h.tokens for h in batched[i].hypotheses] == [h.tokens for h in alone.hypotheses]
        assert batched[i].score == pytest.approx(alone.score, abs=1e-5)


@pytest.mark.parametrize("ngram", [0, 2], ids=["plain", "no-repeat"])
def test_batched_records_each_sentence_s_steps_as_decoding_it_alone(model, ngram):
    """The step records of a padded batch (what the step page shows of a class's sentences, decoded together) are
    each sentence's own: the same tokens, parents and top-k as decoding it alone, and attention of its own shape."""
    src = src_batch()
    opts = DecodeOptions("beam", beam_size=3, record_steps=True, record_top_k=4, no_repeat_ngram=ngram)
    batched = decode(model, src, opts)
    for i, n in enumerate([6, 3, 8, 5]):
        alone = decode(model, src[i:i + 1, :n], opts)[0]
        assert len(batched[i].steps) == len(alone.steps) > 1
        for sa, sb in zip(batched[i].steps, alone.steps):
            assert [c.token for c in sa.candidates] == [c.token for c in sb.candidates]
            for ha, hb in zip(sa.hypotheses, sb.hypotheses, strict=True):
                assert (ha.tokens, ha.parent) == (hb.tokens, hb.parent)
                assert [t for t, _ in ha.top_k] == [t for t, _ in hb.top_k] and len(ha.top_k) == 4
                assert [p for _, p in ha.top_k] == pytest.approx([p for _, p in hb.top_k], abs=1e-5)
                assert ha.self_attn.shape == hb.self_attn.shape and ha.cross_attn.shape == hb.cross_attn.shape == (
                    model.cfg.n_decoder_layers, model.cfg.n_heads, n)
                assert torch.allclose(ha.cross_attn, hb.cross_attn, atol=1e-5)
                assert torch.allclose(ha.cross_attn.sum(-1), torch.ones(()), atol=1e-5)


def test_sampling_repeats_with_a_seed_and_tends_to_greedy_when_cold(model):
    src = src_batch()
    a = decode(model, src, DecodeOptions("sample", seed=1, temperature=2.0))
    b = decode(model, src, DecodeOptions("sample", seed=1, temperature=2.0))
    c = decode(model, src, DecodeOptions("sample", seed=2, temperature=2.0))
    assert [r.tokens for r in a] == [r.tokens for r in b]
    assert [r.tokens for r in a] != [r.tokens for r in c]
    cold = decode(model, src, DecodeOptions("sample", seed=1, temperature=1e-4))
    assert [r.tokens for r in cold] == [r.tokens for r in decode(model, src, DecodeOptions("greedy"))]


def test_sampling_distribution_filters():
    lp = torch.tensor([0.5, 0.3, 0.15, 0.05]).log()
    assert torch.allclose(sampling_distribution(lp, 1.0, 0, 1.0), lp.exp())
    top2 = sampling_distribution(lp, 1.0, 2, 1.0)
    assert torch.allclose(top2, torch.tensor([0.625, 0.375, 0, 0]))
    nucleus = sampling_distribution(lp, 1.0, 0, 0.75)         # 0.5 + 0.3 >= 0.75: two tokens
    assert torch.allclose(nucleus, torch.tensor([0.625, 0.375, 0, 0]))
    hot = sampling_distribution(lp, 100.0, 0, 1.0)
    assert (hot - 0.25).abs().max() < 0.01


@pytest.mark.parametrize("method", ["greedy", "beam"])
def test_recorded_attention_rows_equal_one_teacher_forced_pass(model, method):
    src = random_batch(V, [7], seed=5)
    result = decode(model, src, DecodeOptions(method, beam_size=3, record_steps=True))[0]
    best = result.hypotheses[0]
    trace = Trace()
    forced_decode(model, src, best.tokens, trace)
    self_attn, cross = trace.attention("decoder_self")[:, 0], trace.attention("cross")[:, 0]  # (L, H, T, *)
    # walk the parent pointers back from the step where the best hypothesis ended
    end = len(best.tokens) if best.finished else len(best.tokens) - 1
    index = next(h.index for h in result.steps[end].hypotheses if h.tokens[1:] == best.tokens[:end])
    for t in range(end, -1, -1):
        rec = result.steps[t].hypotheses[index]
        assert rec.tokens[1:] == best.tokens[:t]
        assert rec.self_attn.shape == (2, 4, t + 1) and rec.cross_attn.shape == (2, 4, 7)
        assert torch.allclose(rec.self_attn, self_attn[:, :, t, : t + 1], atol=1e-5)
        assert torch.allclose(rec.cross_attn, cross[:, :, t], atol=1e-5)
        index = rec.parent


def test_forced_decode_probabilities_and_ranks(model):
    src = random_batch(V, [6], seed=2)
    greedy = decode(model, src, DecodeOptions("greedy"))[0]
    forced = forced_decode(model, src, greedy.tokens)
    assert all(r == 1 for r in forced.ranks[: len(greedy.tokens)])   # greedy tokens are each step's top choice
    n = len(greedy.tokens) + (1 if greedy.hypotheses[0].finished else 0)   # EOS counted when generated
    assert sum(math.log(p) for p in forced.probs[:n]) == pytest.approx(greedy.hypotheses[0].log_prob, abs=1e-4)


# ---- a fake model whose next-token distributions are scripted by hand ------------------------
PAD, BOS, EOS, A, B, C = 0, 2, 3, 4, 5, 6
EPS = 1e-9


class ScriptedModel:
    """Next-token probabilities looked up by prefix (tokens after BOS). The prefix of each
    row lives in the cache, so DecoderCache.reorder keeps it aligned with the beam."""

    def __init__(self, script: dict[tuple[int, ...], dict[int, float]]) -> None:
        self.script = script
        self.cfg = SimpleNamespace(pad_id=PAD, bos_id=BOS, eos_id=EOS, max_positions=64, n_decoder_layers=1)
        self.generator = lambda h: h
        self.project = lambda h, trace=None: h          # the final linear layer: identity here

    def src_mask(self, src: Tensor) -> Tensor:
        return (src != PAD)[:, None, None, :]

    def encode(self, src: Tensor, src_mask: Tensor, trace=None, knockout=frozenset()) -> Tensor:
        return torch.zeros(src.size(0), src.size(1), 1)

    def decode(self, last: Tensor, memory: Tensor, src_mask: Tensor, cache: DecoderCache, trace=None,
               knockout=frozenset()) -> Tensor:
        kv = cache.self_attn[0]
        kv.k = last.float()[:, None] if kv.k is None else torch.cat([kv.k, last.float()[:, None]], dim=2)
        kv.v = kv.k
        rows = []
        for prefix in kv.k[:, 0, :].long().tolist():
            probs = torch.full((7,), EPS)
            for tok, p in self.script.get(tuple(prefix[1:]), {EOS: 1.0}).items():
                probs[tok] = p
            rows.append(probs.log())
        return torch.stack(rows)[:, None, :]                           # (R, 1, V) "hidden" = logits


SCRIPT = {
    (): {A: 0.5, B: 0.3, EOS: 0.15, C: 0.05},
    (A,): {EOS: 0.6, B: 0.3, C: 0.1},
    (B,): {A: 0.9, EOS: 0.1},
    (B, A): {EOS: 0.99, C: 0.01},
    (A, B): {EOS: 0.6, C: 0.4},
}
SRC = torch.tensor([[7 % 7 + 4, 5, 6, EOS]])   # content irrelevant: 4 tokens, max length 16


def test_scripted_beam_early_eos():
    """Beam 2, no length normalisation.
    step 0: from [] the 4 best: A .5, B .3, EOS .15, C .05. A and B kept; EOS is ranked 3rd
            (not in the top 2), so pruned; C pruned (beam full).
    step 1: A EOS .30 (rank 1: finished, "A"), B A .27 kept, A B .15 kept, A C .05 pruned.
            Live bound: log .27 < log .30 and log-probs only fall: stop. Best: "A", log .30.
    """
    r = decode(ScriptedModel(SCRIPT), SRC, DecodeOptions("beam", beam_size=2, length_penalty="none",
                                                         record_steps=True))[0]
    assert [h.tokens for h in r.hypotheses] == [[A]]
    assert r.hypotheses[0].log_prob == pytest.approx(math.log(0.30), abs=1e-6)
    assert len(r.steps) == 2
    step0 = [(c.token, c.status) for c in r.steps[0].candidates]
    assert step0 == [(A, "kept"), (B, "kept"), (EOS, "pruned"), (C, "pruned")]
    assert len(r.steps[0].hypotheses) == 1                             # only one live beam at step 0
    step1 = [(c.parent, c.token, c.status) for c in r.steps[1].candidates]
    assert step1 == [(0, EOS, "finished"), (1, A, "kept"), (0, B, "kept"), (0, C, "pruned")]
    assert [h.parent for h in r.steps[1].hypotheses] == [0, 0]         # A and B both extend step 0's only hypothesis


def test_scripted_beam_length_penalty_reversal():
    """Same script, score = log-prob / length (EOS counted).
    step 1: "A" finishes with log .30 / 2 = -0.602. Live B A (log .27 = -1.309) could still
            reach -1.309/16 at the length limit, so the search goes on.
    step 2: B A EOS = .27 * .99 = .2673 -> -1.3194 / 3 = -0.4398 (finished, rank 1);
            A B EOS = .15 * .6 = .09 -> -2.408 / 3 = -0.803 (finished, rank 2);
            A B C = .06 kept. Three finished >= beam 2: stop.
    Ranking by score: "B A" (-0.440) > "A" (-0.602) > "A B" (-0.803): the longer
    hypothesis wins, where without normalisation "A" (log .30 > log .2673) did.
    """
    r = decode(ScriptedModel(SCRIPT), SRC, DecodeOptions("beam", beam_size=2, length_penalty="average"))[0]
    assert [h.tokens for h in r.hypotheses] == [[B, A], [A], [A, B]]
    expected = [math.log(0.2673) / 3, math.log(0.30) / 2, math.log(0.09) / 3]
    assert [h.score for h in r.hypotheses] == pytest.approx(expected, abs=1e-6)
    plain = decode(ScriptedModel(SCRIPT), SRC, DecodeOptions("beam", beam_size=2, length_penalty="none"))[0]
    assert plain.tokens == [A]


def test_beam_step_is_a_pure_function():
    """Two live hypotheses (log-probs log .5 and log .3), vocabulary of 5 with EOS = 3."""
    cum = torch.tensor([0.5, 0.3]).log()
    lp = torch.tensor([[EPS, EPS, EPS, 0.6, 0.4 - 2 * EPS], [EPS, EPS, EPS, 0.2, 0.8 - 2 * EPS]]).log()
    cands = beam_step(cum, lp, beam_size=2, eos_id=3, normalise=lambda x, n: x, length=2)
    # totals: (0,EOS) .30, (1,4) .24, (0,4) .20, (1,EOS) .06
    assert [(c.parent, c.token, c.status) for c in cands] == [
        (0, 3, "finished"), (1, 4, "kept"), (0, 4, "kept"), (1, 3, "pruned")]
    assert cands[1].cum_log_prob == pytest.approx(math.log(0.24), abs=1e-6)


def test_beam_step_takes_the_best_continuations_of_all_from_each_rows_best():
    """beam_step chooses among each row's 2*beam best tokens (taken for a whole batch at once by `decode`): the same
    candidates, in the same order, as the best of every row's every token (what it took before, one sentence a time)."""
    gen = torch.Generator().manual_seed(0)
    for n, vocab, beam in ((1, 9, 4), (3, 50, 2), (4, 300, 4), (5, 12, 6)):
        cum = -torch.rand(n, generator=gen) * 5
        lp = torch.randn(n, vocab, generator=gen).log_softmax(-1)
        total = (cum[:, None] + lp).flatten()
        best, flat = total.topk(min(2 * beam, total.numel()))
        want = [(i // vocab, i % vocab, v) for v, i in zip(best.tolist(), flat.tolist())]
        for row_best in (None, lp.topk(min(2 * beam + 3, vocab), dim=-1)):      # its own, or a batch's wider one
            got = beam_step(cum, lp, beam, eos_id=3, normalise=lambda x, m: x, length=2, row_best=row_best)
            assert [(c.parent, c.token) for c in got] == [w[:2] for w in want]
            assert [c.cum_log_prob for c in got] == pytest.approx([w[2] for w in want], abs=1e-6)
            assert [c.log_prob for c in got] == pytest.approx([lp[p, t].item() for p, t, _ in want], abs=1e-6)


def test_gnmt_length_penalty():
    opts = DecodeOptions("beam", alpha=0.6)
    assert opts.normalise(-2.0, 1) == pytest.approx(-2.0)                 # ((5+1)/6)^a = 1
    assert opts.normalise(-2.0, 7) == pytest.approx(-2.0 / 2 ** 0.6)
    with pytest.raises(ValueError):
        DecodeOptions("beam", beam_size=17)
    assert DecodeOptions("beam", alpha=5.0).alpha == 5.0
    with pytest.raises(ValueError, match="alpha"):
        DecodeOptions("beam", alpha=5.5)


# ---- blocking repeated n-grams ----------------------------------------------------------------
def _ngrams(tokens: list[int], n: int) -> list[tuple[int, ...]]:
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def test_repeating_tokens_are_those_that_would_close_a_seen_ngram():
    assert repeating_tokens([5, 6, 7, 5, 6], 3) == [7]
    assert sorted(repeating_tokens([5, 6, 7, 6], 2)) == [7]
    assert repeating_tokens([5, 6], 3) == [] and repeating_tokens([], 2) == []
    assert sorted(repeating_tokens([4, 4, 9], 1)) == [4, 9]


@pytest.mark.parametrize("method", ["greedy", "beam"])
def test_no_output_repeats_an_ngram_when_blocked(model, method):
    src = src_batch()
    free = [r.tokens for r in decode(model, src, DecodeOptions(method, beam_size=3))]
    assert any(len(set(_ngrams(t, 2))) < len(_ngrams(t, 2)) for t in free)          # the tiny model repeats
    for result in decode(model, src, DecodeOptions(method, beam_size=3, no_repeat_ngram=2, record_steps=True)):
        for h in result.hypotheses:
            assert len(set(_ngrams(h.tokens, 2))) == len(_ngrams(h.tokens, 2)), h.tokens
    with pytest.raises(ValueError):
        DecodeOptions(no_repeat_ngram=-1)


def test_a_cache_reorder_can_leave_the_cross_attention_as_it_is():
    """cross=False (every row keeps its sentence, decode's re-parenting) gathers only the self-attention's K/V."""
    cache = DecoderCache.empty(2)
    for i, kv in enumerate(cache.self_attn + cache.cross_attn):
        kv.k, kv.v = torch.arange(3.0)[:, None] + i, torch.arange(3.0)[:, None] - i     # (3 rows, 1)
    cross = [(kv.k, kv.v) for kv in cache.cross_attn]
    cache.reorder(torch.tensor([2, 2, 0]), cross=False)
    assert all(kv.k is k and kv.v is v for kv, (k, v) in zip(cache.cross_attn, cross))
    assert [kv.k[:, 0].tolist() for kv in cache.self_attn] == [[2.0, 2.0, 0.0], [3.0, 3.0, 1.0]]
    cache.reorder(torch.tensor([1, 0]))
    assert [kv.k[:, 0].tolist() for kv in cache.cross_attn] == [[3.0, 2.0], [4.0, 3.0]]
