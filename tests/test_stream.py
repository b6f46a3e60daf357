"""The residual stream, Add & Norm, the FFN and the output layer, recorded through the
trace (opt-in) and read back by model/inference/stream.py."""
from __future__ import annotations

import torch

from model.inference.decoding import forced_decode, output_log_probs
from model.inference.stream import (
    add_and_norm_rebuilt,
    ffn_zeros,
    logit_lens,
    nearest_tokens,
    sublayer_names,
    token_ranks,
    update_ratios,
)
from model.network.trace import Recording, Trace
from tests.support import random_batch, tiny_model

SRC, TGT = random_batch(40, [7, 5], seed=11), random_batch(40, [6, 4], seed=12, bos=True)


def traced(model, stream: bool = True) -> tuple[Trace, torch.Tensor]:
    trace = Trace(Recording(stream=stream))
    return trace, model(SRC, TGT, trace)


def test_stream_recording_is_off_by_default_and_changes_nothing():
    model = tiny_model(40)
    plain, plain_logits = traced(model, stream=False)
    assert not any(n.endswith((".in", ".out", ".hidden")) or n == "output.logits" for n in plain.names())
    stream, logits = traced(model)
    assert torch.allclose(logits, plain_logits, atol=1e-6) and torch.allclose(logits, model(SRC, TGT), atol=1e-5)
    assert torch.equal(stream["output.logits"], logits)


def test_every_add_and_norm_rebuilds_from_its_recorded_pieces():
    model = tiny_model(40)
    trace, _ = traced(model)
    for stack in ("encoder", "decoder"):
        names = sublayer_names(trace, stack)
        assert len(names) == 2 and len(names[0]) == (2 if stack == "encoder" else 3)
        for layer in names:
            for sub in layer:
                assert torch.allclose(add_and_norm_rebuilt(trace, sub), trace[f"{sub}.out"], atol=1e-5), sub
        for a, b in zip(names[0], names[0][1:]):          # each sublayer reads what the previous one wrote
            assert torch.equal(trace[f"{b}.in"], trace[f"{a}.out"])
    assert torch.equal(trace["encoder.1.self_attn.in"], trace["encoder.0.feed_forward.out"])
    assert torch.allclose(trace["encoder.0.self_attn.in"], trace["source.input"])


def test_a_wrong_piece_breaks_the_rebuild():
    """The property above can fail: rebuilt with another layer's gamma it does not match."""
    model = tiny_model(40)
    with torch.no_grad():
        model.encoder.layers[1].norm1.weight.mul_(1.5)
    trace, _ = traced(model)
    trace.tensors["encoder.0.self_attn.norm.gamma"] = trace["encoder.1.self_attn.norm.gamma"]
    assert not torch.allclose(add_and_norm_rebuilt(trace, "encoder.0.self_attn"), trace["encoder.0.self_attn.out"],
                              atol=1e-3)


def test_the_last_layers_logit_lens_is_the_models_output_distribution():
    model = tiny_model(40)
    trace, logits = traced(model)
    lens = logit_lens(model, trace)                                     # (L, B, T, V)
    assert lens.shape == (2, 2, 6, 40)
    real = output_log_probs(model, model.decode(TGT, model.encode(SRC), model.src_mask(SRC)))
    assert torch.allclose(lens[-1], real, atol=1e-5)
    assert not torch.allclose(lens[0], real, atol=1e-3)
    assert torch.allclose(lens.exp().sum(-1), torch.ones(2, 2, 6), atol=1e-5)


def test_forced_decoding_records_the_logits_and_ranks_agree():
    model = tiny_model(40)
    trace = Trace(Recording(stream=True))
    reference = [5, 9, 7, 12]
    result = forced_decode(model, SRC[:1, :7], reference, trace)
    lens = logit_lens(model, trace)
    gold = torch.tensor([reference + [3]])
    assert token_ranks(lens[-1], gold)[0].tolist() == result.ranks
    assert trace["output.logits"].shape == (1, 5, 40)


def test_the_ffn_zeros_are_exactly_the_relus():
    model = tiny_model(40)
    trace, _ = traced(model)
    sub = "decoder.1.feed_forward"
    w_1 = model.decoder.layers[1].feed_forward.w_1
    pre = w_1(trace[f"{sub}.in"])                                        # x W1 + b1, before the ReLU
    assert torch.equal(ffn_zeros(trace, sub), (pre <= 0).sum(-1))
    assert torch.equal(trace[f"{sub}.hidden"], torch.relu(pre))
    assert 0 < int(ffn_zeros(trace, sub).float().mean()) < 64


def test_update_ratios_are_the_norms_of_update_over_stream():
    model = tiny_model(40)
    trace, _ = traced(model)
    ratios = update_ratios(trace, "decoder")                             # (L, 3, B, T)
    assert ratios.shape == (2, 3, 2, 6)
    x, u = trace["decoder.1.cross_attn.in"][1, 2], trace["decoder.1.cross_attn.update"][1, 2]
    assert torch.isclose(ratios[1, 1, 1, 2], u.norm() / x.norm())


def test_nearest_tokens_leave_the_token_out():
    emb = torch.randn(30, 8)
    emb[7] = emb[4] * 3                                                  # same direction as token 4
    near = nearest_tokens(emb, 4, k=5, exclude=(0, 1, 2, 3))
    assert near[0] == (7, near[0][1]) and abs(near[0][1] - 1.0) < 1e-5
    assert all(i not in (4, 0, 1, 2, 3) for i, _ in near) and len(near) == 5
    assert [v for _, v in near] == sorted((v for _, v in near), reverse=True)


def test_the_stream_is_exported_in_the_trace_json_only_when_recorded(tokenizer):
    from model.inference.pipeline import explain, explanation_json
    from model.storage.checkpoint import Checkpoint
    ckpt = Checkpoint(tiny_model(tokenizer.vocab_size), tokenizer, tokenizer)
    plain = explanation_json(explain(ckpt, "the dog runs"), ckpt, explain.__defaults__[0])
    assert "stream" not in plain
    ex = explain(ckpt, "the dog runs", recording=Recording(scores=True, stream=True))
    data = explanation_json(ex, ckpt, explain.__defaults__[0])
    s, t = len(data["source"]["tokens"]), len(data["target"]["tokens"])
    enc, dec = data["stream"]["encoder"], data["stream"]["decoder"]
    assert len(enc) == len(dec) == 2 and set(dec[0]) == {"self_attn", "cross_attn", "feed_forward"}
    assert len(enc[1]["feed_forward"]["out"]) == s and len(enc[1]["feed_forward"]["out"][0]) == 32
    assert len(dec[0]["feed_forward"]["hidden"]) == t and len(dec[0]["feed_forward"]["hidden"][0]) == 64
    assert len(dec[1]["cross_attn"]["norm.std"]) == t and len(dec[1]["cross_attn"]["norm.gamma"]) == 32
    assert len(data["stream"]["logits"]) == t and len(data["stream"]["logits"][0]) == tokenizer.vocab_size
    assert data["attention"] == plain["attention"]                       # recording more changes nothing
