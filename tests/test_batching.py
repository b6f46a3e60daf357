"""Batching concurrent sessions' decodings: batches form under concurrency, each caller
gets its own result, a failing item fails only its caller, batches of a group never
overlap; and a sentence decoded in a batch explains exactly as one decoded alone."""
from __future__ import annotations

import threading
import time

import pytest
import torch

from model.inference.options import DecodeOptions
from model.inference.pipeline import decode_many, explain, explain_decoded, source_ids
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
