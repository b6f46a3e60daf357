"""A translation's trace read from the search's own records (model/inference/replay.py) is the trace a
teacher-forced pass records, and a batch's trace cut to one entry is that sentence's own."""
from __future__ import annotations

import dataclasses
from dataclasses import replace

import pytest
import torch

from model.inference.decoding import decode, forced_decode
from model.inference.options import DecodeOptions
from model.inference.pipeline import (
    WEIGHTS,
    decode_many,
    explain_decoded,
    explain_from_search,
    forced_ids,
    source_ids,
)
from model.inference.precision import FP32, available, quantized
from model.inference.replay import best_path, read_search
from model.network.trace import Recording, Trace
from model.storage.checkpoint import load_checkpoint
from tests.support import ROOT, random_batch, tiny_model

SENTENCES = ["A man in a blue shirt is cooking dinner.", "Two girls are reading a book in the park.",
             "She forgot her umbrella at home.", "The old man feeds the birds.", "We need more milk and bread.",
             "My brother works in a big hospital and comes home late every evening."]


@pytest.fixture(scope="module")
def shipped():
    path = ROOT / "checkpoints" / "multi30k-en-de"
    if not (path / "config.json").is_file():
        pytest.skip("the shipped checkpoints are not here")
    return load_checkpoint(path)


def teacher_forced(ckpt, ids: list[int], tokens: list[int]) -> tuple[Trace, list[float]]:
    """The pass the reading stands in for: its trace (token strings set as the pipeline does) and probabilities."""
    trace = Trace(WEIGHTS)
    with torch.inference_mode():
        probs = forced_decode(ckpt.model, torch.tensor([ids]), tokens, trace).probs
    trace.source_tokens = [ckpt.src_tokenizer.pieces(ids)]
    trace.target_tokens = [ckpt.tgt_tokenizer.pieces([ckpt.config.bos_id] + tokens)]
    return trace, probs


def assert_same_trace(read: Trace, traced: Trace) -> None:
    assert read.recording == traced.recording == WEIGHTS
    assert read.names() == traced.names()                       # the same tensors, in the pass's order
    for name in traced.names():
        a, b = read[name], traced[name]
        assert a.shape == b.shape and a.dtype == b.dtype, name
        assert torch.allclose(a.float(), b.float(), atol=1e-5), (name, (a.float() - b.float()).abs().max())
    assert read.source_tokens == traced.source_tokens and read.target_tokens == traced.target_tokens


@pytest.mark.parametrize("opts", [DecodeOptions("beam", 4, alpha=2.6), DecodeOptions("greedy"),
                                  DecodeOptions("sample", temperature=0.8, seed=5),
                                  DecodeOptions("beam", 3, no_repeat_ngram=2)],
                         ids=["beam", "greedy", "sample", "no-repeat"])
def test_a_batchs_search_gives_each_sentence_the_trace_and_probabilities_of_its_teacher_forced_pass(shipped, opts):
    opts = replace(opts, record_steps=True, record_top_k=8)
    ids = [source_ids(shipped, s) for s in SENTENCES]
    for text, i, result in zip(SENTENCES, ids, decode_many(shipped, ids, opts)):   # one padded batch
        read = explain_from_search(shipped, text, i, result)
        assert read is not None, text
        trace, probs = teacher_forced(shipped, i, result.tokens)
        assert read.target_ids == [shipped.config.bos_id] + result.tokens and read.forced is None
        assert_same_trace(read.trace, trace)
        assert read.output_probs == pytest.approx(probs, abs=1e-5)
        for kind in ("encoder_self", "decoder_self", "cross"):   # rows of weights sum to 1
            assert torch.allclose(read.trace.attention(kind).sum(-1), torch.ones(()), atol=1e-5)


def test_a_forced_start_is_read_from_its_search_too(shipped):
    text = SENTENCES[0]
    ids = source_ids(shipped, text)
    opts = DecodeOptions("beam", 4, record_steps=True, prefix=forced_ids(shipped, "Eine Frau"))
    result = decode_many(shipped, [ids], opts)[0]
    read = explain_from_search(shipped, text, ids, result)
    assert read is not None and read.output.startswith("Eine Frau")
    assert_same_trace(read.trace, teacher_forced(shipped, ids, result.tokens)[0])


def test_the_served_copy_reads_what_its_pass_records(shipped):
    """What the app computes with (config.json "precision"): the same reading of its own search."""
    if shipped.precision == FP32 or not available(shipped.precision):
        pytest.skip("served as fp32 here")
    served = dataclasses.replace(shipped, model=quantized(shipped.model, shipped.precision))
    opts = DecodeOptions("beam", 4, alpha=served.beam_alpha, record_steps=True)
    ids = [source_ids(served, s) for s in SENTENCES[:3]]
    for text, i, result in zip(SENTENCES, ids, decode_many(served, ids, opts)):
        read = explain_from_search(served, text, i, result)
        assert_same_trace(read.trace, teacher_forced(served, i, result.tokens)[0])


def test_reading_runs_no_layer_and_the_app_s_recording_is_read(shipped):
    ids = source_ids(shipped, SENTENCES[1])
    result = decode_many(shipped, [ids], DecodeOptions("beam", 4, record_steps=True))[0]
    calls = []
    hooks = [m.register_forward_hook(lambda *_: calls.append(1))
             for m in (*shipped.model.encoder.layers, *shipped.model.decoder.layers, shipped.model.generator)]
    try:
        ex = explain_decoded(shipped, SENTENCES[1], ids, result, recording=WEIGHTS)
        assert calls == [] and ex.trace.recording == WEIGHTS
        explain_decoded(shipped, SENTENCES[1], ids, result)          # the scores: a teacher-forced pass
        assert calls
    finally:
        for h in hooks:
            h.remove()


def test_no_reading_without_the_whole_path():
    """No steps recorded, a best hypothesis cut at the length limit, a model without the causal mask: None
    (the caller runs its pass)."""
    src = random_batch(40, [6], seed=4)
    source = src[0].tolist()
    opts = DecodeOptions("greedy", record_steps=True)
    for causal in (True, False):
        model = tiny_model(40, seed=3, logits_bias=True, causal_mask=causal)
        plain = decode(model, src, replace(opts, record_steps=False))[0]
        assert plain.encoder is None and best_path(plain) is None and read_search(model, source, plain) is None
        cut = decode(model, src, replace(opts, max_len_a=0.0, max_len_b=2))[0]
        assert not cut.hypotheses[0].finished and read_search(model, source, cut) is None
        with torch.no_grad():
            model.generator.bias[3] = 50.0             # EOS the likeliest after two tokens are forced
        finished = decode(model, src, replace(opts, prefix=(5, 6)))[0]
        assert finished.hypotheses[0].tokens == [5, 6] and finished.hypotheses[0].finished
        assert (read_search(model, source, finished) is not None) == causal   # unmasked: later keys unseen


def test_a_batch_entry_is_the_trace_of_its_sentence_alone():
    """Trace.entry cuts every kind of tensor (weights, scores, Q/K/V, the stream, logits) to one sentence."""
    model = tiny_model(40, seed=2)
    lengths, targets = [6, 3, 8], [5, 7, 2]
    src = random_batch(40, lengths, seed=1)
    tgt = random_batch(40, targets, seed=2, bos=True)
    everything = Recording(scores=True, qkv=True, stream=True)
    batch = Trace(everything)
    with torch.inference_mode():
        model(src, tgt, batch)
    for i, (s, t) in enumerate(zip(lengths, targets)):
        alone = Trace(everything)
        with torch.inference_mode():
            model(src[i:i + 1, :s], tgt[i:i + 1, :t], alone)
        cut = batch.entry(i, s, t)
        assert cut.names() == alone.names()
        for name in alone.names():
            a, b = cut[name], alone[name]
            assert a.shape == b.shape, name
            assert torch.allclose(a.float(), b.float(), atol=1e-5, equal_nan=True), name
