"""Batching concurrent sessions' decodings: batches form under concurrency, each caller
gets its own result, a failing item fails only its caller, batches of a group never
overlap; and a sentence decoded in a batch explains exactly as one decoded alone, also when its traced pass
is one of a batch's."""
from __future__ import annotations

import threading
import time

import pytest
import torch

from model.inference.options import DecodeOptions
from model.inference.pipeline import decode_many, explain, explain_decoded, explain_decoded_many, source_ids
from model.network.trace import Recording, Trace
from model.storage.checkpoint import Checkpoint
from serving.batching import Batcher
from tests.support import sentences, tiny_model


def call_together(batcher: Batcher, items: list, group="g") -> tuple[dict, dict]:
    results, errors = {}, {}

    def one(item):
        try:
            results[item] = batcher(group, item)
        except Exception as exc:        # noqa: BLE001
            errors[item] = exc
    threads = [threading.Thread(target=one, args=(i,)) for i in items]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return results, errors


def test_concurrent_calls_share_batches_and_each_gets_its_own_result():
    running, most = [0], [0]

    def run(group, items):
        running[0] += 1
        most[0] = max(most[0], running[0])
        time.sleep(0.05)
        running[0] -= 1
        return [f"{group}:{x * 2}" for x in items]
    b = Batcher(run, max_batch=4, window=0.1)
    results, errors = call_together(b, list(range(10)))
    assert not errors and results == {i: f"g:{i * 2}" for i in range(10)}
    assert sum(b.batches) == 10 and len(b.batches) < 10 and max(b.batches) <= 4
    assert most[0] == 1                                  # one batch of a group at a time


def test_a_lone_call_waits_only_the_window():
    b = Batcher(lambda g, items: [x + 1 for x in items], window=0.05)
    start = time.monotonic()
    assert b("g", 1) == 2 and list(b.batches) == [1]
    assert time.monotonic() - start < 5          # a margin no busy machine breaks; waiting for company would hang


def test_a_failing_item_fails_only_its_caller():
    def run(group, items):
        if "bad" in items:
            raise ValueError("bad item")
        return [x.upper() for x in items]
    b = Batcher(run, window=0.1)
    results, errors = call_together(b, ["a", "bad", "c"])
    assert results == {"a": "A", "c": "C"} and isinstance(errors["bad"], ValueError)


def test_groups_do_not_mix():
    seen = []

    def run(group, items):
        seen.append((group, tuple(items)))
        return items
    b = Batcher(run, window=0.1)
    threads = [threading.Thread(target=b, args=(g, f"{g}{i}")) for g in "xy" for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert all(all(item.startswith(group) for item in items) for group, items in seen)


@pytest.mark.parametrize("opts", [DecodeOptions("beam", beam_size=3, record_steps=True),
                                  DecodeOptions("greedy", record_steps=True)], ids=["beam", "greedy"])
def test_a_sentence_decoded_in_a_batch_explains_as_one_decoded_alone(tokenizer, opts):
    ckpt = Checkpoint(tiny_model(tokenizer.vocab_size, seed=2), tokenizer, tokenizer)
    texts = sentences(5, seed=9)
    ids = [source_ids(ckpt, t) for t in texts]
    for text, i, result in zip(texts, ids, decode_many(ckpt, ids, opts)):
        together, alone = explain_decoded(ckpt, text, i, result), explain(ckpt, text, opts)
        assert together.result.tokens == alone.result.tokens and together.output == alone.output
        assert len(together.result.steps) == len(alone.result.steps)
        for a, b in zip(together.result.steps, alone.result.steps):
            assert [c.token for c in a.candidates] == [c.token for c in b.candidates]
            for ha, hb in zip(a.hypotheses, b.hypotheses):
                torch.testing.assert_close(ha.cross_attn, hb.cross_attn, atol=1e-5, rtol=1e-4)
                torch.testing.assert_close(ha.self_attn, hb.self_attn, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(together.trace.attention("cross"), alone.trace.attention("cross"))


def test_traced_passes_taken_together_give_each_sentence_its_own_trace(tokenizer):
    """explain_decoded_many: one padded pass, cut per sentence: every tensor of each trace has the shape of the
    sentence's own pass and its values (padding is never seen), and the same token probabilities."""
    ckpt = Checkpoint(tiny_model(tokenizer.vocab_size, seed=3), tokenizer, tokenizer)
    texts = sentences(6, seed=4)
    ids = [source_ids(ckpt, t) for t in texts]
    assert len({len(i) for i in ids}) > 1                            # sources of several lengths: padding
    results = decode_many(ckpt, ids, DecodeOptions("beam", beam_size=3, record_steps=True))
    assert len({len(r.tokens) for r in results}) > 1                 # and outputs of several lengths
    together = explain_decoded_many(ckpt, list(zip(texts, ids, results)))
    for text, i, result, many in zip(texts, ids, results, together):
        alone = explain_decoded(ckpt, text, i, result)
        assert many.output == alone.output and many.target_ids == alone.target_ids
        assert many.trace.source_tokens == alone.trace.source_tokens
        assert many.trace.target_tokens == alone.trace.target_tokens
        assert many.trace.names() == alone.trace.names()
        for name in alone.trace.names():
            a, b = many.trace[name], alone.trace[name]
            assert a.shape == b.shape, name
            if a.dtype == torch.bool:
                assert torch.equal(a, b), name
            else:
                torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4, msg=name)
        torch.testing.assert_close(torch.tensor(many.output_probs), torch.tensor(alone.output_probs),
                                   atol=1e-5, rtol=1e-4)
        assert many.confidence(ckpt).words(many.output_pieces(ckpt)) == \
            alone.confidence(ckpt).words(alone.output_pieces(ckpt))


def test_a_trace_with_q_k_v_or_the_stream_is_not_cut():
    for recording in (Recording(qkv=True), Recording(stream=True)):
        with pytest.raises(ValueError, match="not Q/K/V or the stream"):
            Trace(recording).entry(0, 3, 3)
