"""The model and its trace: attention properties, trace-free fast path, parity with
torch.nn's Transformer layers, positional encoding, thread safety."""
from __future__ import annotations

import threading

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import model.network.layers as layers
from model import Recording, Trace
from model.network.config import ModelConfig, preset
from model.network.masks import causal_mask, decoder_self_mask, padding_mask
from tests.support import random_batch, tiny_model

V = 40
SRC_LENGTHS, TGT_LENGTHS = [7, 4, 6], [5, 3, 6]


def run_traced(m, **trace_kw):
    src, tgt = random_batch(V, SRC_LENGTHS, 1), random_batch(V, TGT_LENGTHS, 2, bos=True)
    trace = Trace(Recording(**trace_kw))
    with torch.no_grad():
        logits = m(src, tgt, trace)
    return src, tgt, trace, logits


@pytest.fixture(params=[False, True], ids=["post-norm", "pre-norm"])
def traced(request):
    return run_traced(tiny_model(V, norm_first=request.param), scores=True)


@pytest.mark.parametrize("kind", ["encoder_self", "decoder_self", "cross"])
def test_rows_sum_to_one_and_blocked_entries_are_zero(traced, kind):
    src, tgt, trace, _ = traced
    attn = trace.attention(kind)                                # (L, B, H, Tq, Tk)
    L, B, H = 2, 3, 4
    assert attn.shape[:3] == (L, B, H)
    assert torch.allclose(attn.sum(-1), torch.ones(attn.shape[:-1]), atol=1e-5)
    blocked = ~trace.mask(kind)[None, :, None]                  # (1, B, 1, Tq, Tk)
    assert blocked.any()
    assert (attn.masked_select(blocked.expand_as(attn)) == 0).all()
    scores = trace.attention(kind, "scores")
    assert torch.isneginf(scores.masked_select(blocked.expand_as(scores))).all()


def test_decoder_self_attention_is_lower_triangular(traced):
    attn = traced[2].attention("decoder_self")
    T = attn.size(-1)
    upper = torch.ones(T, T, dtype=torch.bool).triu(1)
    assert (attn[..., upper] == 0).all()
    assert (attn[..., ~upper] > 0).any()


def test_padded_keys_get_zero_in_every_kind(traced):
    src, tgt, trace, _ = traced
    src_pad, tgt_pad = src == 0, tgt == 0                       # (B, S), (B, T)
    assert src_pad.any() and tgt_pad.any()
    for kind, pad in (("encoder_self", src_pad), ("cross", src_pad), ("decoder_self", tgt_pad)):
        attn = trace.attention(kind)                            # (L, B, H, Tq, Tk)
        assert (attn.permute(1, 4, 0, 2, 3)[pad] == 0).all(), kind


def test_masks_follow_the_one_convention():
    ids = torch.tensor([[5, 6, 0]])
    assert padding_mask(ids, 0).tolist() == [[[[True, True, False]]]]
    assert causal_mask(3)[0, 0].tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    # bottom-right alignment: the last query of 4 keys sees them all
    assert causal_mask(1, 4)[0, 0].tolist() == [[True, True, True, True]]
    assert decoder_self_mask(ids, 0)[0, 0, 2].tolist() == [True, True, False]


@pytest.mark.parametrize("norm_first", [False, True])
def test_trace_does_not_change_outputs(norm_first):
    m = tiny_model(V, norm_first=norm_first)
    src, tgt = random_batch(V, SRC_LENGTHS, 1), random_batch(V, TGT_LENGTHS, 2, bos=True)
    with torch.no_grad():
        plain = m(src, tgt)
        traced = m(src, tgt, Trace(Recording(scores=True, qkv=True)))
    assert torch.allclose(plain, traced, atol=1e-5)


def test_fast_path_is_used_only_without_a_trace(monkeypatch):
    calls = []
    real = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(layers.F, "scaled_dot_product_attention", spy)
    m = tiny_model(V)
    src, tgt = random_batch(V, SRC_LENGTHS, 1), random_batch(V, TGT_LENGTHS, 2, bos=True)
    with torch.no_grad():
        m(src, tgt)
        n_layers = m.cfg.n_encoder_layers + 2 * m.cfg.n_decoder_layers
        assert len(calls) == n_layers
        m(src, tgt, Trace())
    assert len(calls) == n_layers


def test_trace_shapes_and_tokens_axes(traced):
    src, tgt, trace, _ = traced
    L, B, H, S, T = 2, 3, 4, src.size(1), tgt.size(1)
    assert trace.attention("encoder_self").shape == (L, B, H, S, S)
    assert trace.attention("decoder_self").shape == (L, B, H, T, T)
    assert trace.attention("cross").shape == (L, B, H, T, S)      # rows: target queries, cols: source keys
    assert trace["source.positional"].shape == (S, 32)
    assert torch.allclose(trace["source.input"], trace["source.embedding"] + trace["source.positional"])
    d = trace.to_dict(1)
    s1, t1 = SRC_LENGTHS[1], TGT_LENGTHS[1]
    assert len(d["attention"]["cross"][0][0]) == t1 and len(d["attention"]["cross"][0][0][0]) == s1
    assert len(d["source"]["tokens"]) == s1 and len(d["target"]["tokens"]) == t1
    bv = trace.to_bertviz(0)
    assert bv["cross_attention"][0].shape == (1, H, TGT_LENGTHS[0], SRC_LENGTHS[0])


def test_parity_with_torch_nn_transformer_layers():
    """Copy our weights into nn.TransformerEncoder/Decoder layers and compare outputs."""
    m = tiny_model(V)
    cfg = m.cfg
    src, tgt = random_batch(V, SRC_LENGTHS, 1), random_batch(V, TGT_LENGTHS, 2, bos=True)
    trace = Trace()
    with torch.no_grad():
        src_mask = m.src_mask(src)
        memory = m.encode(src, src_mask, trace)
        ours = m.decode(tgt, memory, src_mask, trace=trace)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(cfg.d_model, cfg.n_heads, cfg.d_ff, 0.0,
                                                           batch_first=True), cfg.n_encoder_layers,
                                enable_nested_tensor=False).eval()
    dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(cfg.d_model, cfg.n_heads, cfg.d_ff, 0.0,
                                                           batch_first=True), cfg.n_decoder_layers).eval()
    with torch.no_grad():
        for ref, mine in zip(enc.layers, m.encoder.layers):
            _copy_attention(ref.self_attn, mine.self_attn)
            _copy_common(ref, mine, 2)
        for ref, mine in zip(dec.layers, m.decoder.layers):
            _copy_attention(ref.self_attn, mine.self_attn)
            _copy_attention(ref.multihead_attn, mine.cross_attn)
            _copy_common(ref, mine, 3)
        T = tgt.size(1)
        src_pad, tgt_pad = src == cfg.pad_id, tgt == cfg.pad_id          # nn: True = ignore
        ref_memory = enc(trace["source.input"], src_key_padding_mask=src_pad)
        ref_out = dec(trace["target.input"], ref_memory, tgt_mask=~causal_mask(T)[0, 0],
                      tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)
    assert torch.allclose(memory[~src_pad], ref_memory[~src_pad], atol=1e-4)
    assert torch.allclose(ours[~tgt_pad], ref_out[~tgt_pad], atol=1e-4)


def _copy_attention(ref: nn.MultiheadAttention, mine: layers.MultiHeadAttention) -> None:
    ref.in_proj_weight.copy_(torch.cat([mine.w_q.weight, mine.w_k.weight, mine.w_v.weight]))
    ref.in_proj_bias.copy_(torch.cat([mine.w_q.bias, mine.w_k.bias, mine.w_v.bias]))
    ref.out_proj.weight.copy_(mine.w_o.weight)
    ref.out_proj.bias.copy_(mine.w_o.bias)


def _copy_common(ref: nn.Module, mine: nn.Module, n_norms: int) -> None:
    ref.linear1.load_state_dict(mine.feed_forward.w_1.state_dict())
    ref.linear2.load_state_dict(mine.feed_forward.w_2.state_dict())
    for i in range(1, n_norms + 1):
        getattr(ref, f"norm{i}").load_state_dict(getattr(mine, f"norm{i}").state_dict())


def test_positional_encoding_equals_the_formula():
    d, P = 16, 50
    pe = layers.PositionalEncoding(d, P)(P)
    for pos in (0, 1, 7, 49):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert abs(pe[pos, 2 * i] - torch.tensor(angle).sin()) < 1e-6
            assert abs(pe[pos, 2 * i + 1] - torch.tensor(angle).cos()) < 1e-6


def test_pe_of_pos_plus_k_is_one_linear_map_of_pe_of_pos():
    """The paper's argument: for a fixed offset k, PE(pos+k) = PE(pos) M_k for every pos,
    M_k block-diagonal with one 2x2 rotation by k*w_i per frequency w_i (no pos in it)."""
    d, P = 16, 120
    pe = layers.PositionalEncoding(d, P)(P).double()                     # the model's buffer
    for k in (1, 5, 17):
        M = torch.zeros(d, d, dtype=torch.float64)
        for i in range(d // 2):
            a = torch.tensor(k / 10000 ** (2 * i / d), dtype=torch.float64)
            M[2 * i:2 * i + 2, 2 * i:2 * i + 2] = torch.stack([torch.stack([a.cos(), -a.sin()]),
                                                                torch.stack([a.sin(), a.cos()])])
        assert torch.allclose(pe[:-k] @ M, pe[k:], atol=1e-5), k
    # the check has teeth: the same M does not map a shuffled table onto itself shifted
    shuffled = pe[torch.randperm(P, generator=torch.Generator().manual_seed(0))]
    assert not torch.allclose(shuffled[:-k] @ M, shuffled[k:], atol=1e-2)


def test_embeddings_are_scaled_by_sqrt_d_model():
    m = tiny_model(V)
    ids = torch.tensor([[5, 6]])
    assert torch.allclose(m.src_embed(ids), m.src_embed.lut(ids) * (32 ** 0.5))


def test_two_threads_sharing_one_model_get_their_own_traces():
    m = tiny_model(V)
    inputs = [(random_batch(V, [7, 5], s), random_batch(V, [6, 4], s + 10, bos=True)) for s in (1, 2)]

    def traced_run(src, tgt):
        trace = Trace()
        with torch.no_grad():
            m(src, tgt, trace)
        return trace.attention("cross").clone()

    expected = [traced_run(*x) for x in inputs]
    errors: list[str] = []

    def worker(i: int) -> None:
        for _ in range(30):
            got = traced_run(*inputs[i])
            if got.shape != expected[i].shape or not torch.allclose(got, expected[i], atol=1e-6):
                errors.append(f"thread {i} saw a foreign trace")

    threads = [threading.Thread(target=worker, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_config_validation_and_presets():
    assert ModelConfig().d_model == 512 and ModelConfig().n_encoder_layers == 6
    with pytest.raises(ValueError, match="divisible"):
        ModelConfig(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="joint"):
        ModelConfig(src_vocab_size=10, tgt_vocab_size=12)
    assert preset("small").d_model == 256
    cfg = preset("tiny")
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg


def test_tied_embeddings_share_one_tensor():
    m = tiny_model(V)
    assert m.src_embed.lut.weight is m.tgt_embed.lut.weight is m.generator.weight
    untied = tiny_model(V, tie_embeddings=False)
    assert untied.src_embed.lut.weight is not untied.generator.weight


def test_head_knockout():
    m = tiny_model(V)
    src, tgt = random_batch(V, SRC_LENGTHS, 1), random_batch(V, TGT_LENGTHS, 2, bos=True)
    with torch.no_grad():
        base = m(src, tgt)
        assert torch.equal(m(src, tgt, knockout=frozenset({"encoder.9.self_attn.0"})), base)  # names nothing
        one = m(src, tgt, knockout=frozenset({"decoder.1.cross_attn.2"}))
        layer = frozenset(f"encoder.0.self_attn.{h}" for h in range(4))
        whole = m(src, tgt, knockout=layer)
        # with every head of a layer off, that sublayer adds only W^O's bias: equal to zeroing the heads by hand
        trace = Trace()
        traced = m(src, tgt, trace, knockout=layer)
    assert not torch.allclose(one, base, atol=1e-4) and not torch.allclose(whole, base, atol=1e-4)
    assert torch.allclose(traced, whole, atol=1e-5)             # the recording path agrees with the fast path
    attn_block = m.encoder.layers[0]._self_attn_block
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        out = attn_block(x, torch.ones(1, 1, 1, 5, dtype=torch.bool), None, "encoder.0", layer)
    assert torch.allclose(out, m.encoder.layers[0].self_attn.w_o.bias.expand_as(out))


def test_one_batched_pass_of_row_knockouts_equals_each_knockout_alone(tokenizer):
    """knockout_effects switches off a different head in every batch row (RowKnockout)."""
    from model.inference.pipeline import head_names, knockout_effects, log_probability
    from model.storage.checkpoint import Checkpoint
    ckpt = Checkpoint(tiny_model(tokenizer.vocab_size, seed=3), tokenizer, tokenizer)
    source, output = [5, 9, 14, 3], [7, 11, 8]
    effects = knockout_effects(ckpt, source, output, rows_per_pass=5)      # several passes, a ragged last one
    heads = head_names(ckpt)
    assert len(effects) == len(heads) + len(heads) // ckpt.config.n_heads
    base = log_probability(ckpt, source, output)
    for name in (heads[0], heads[-1], "decoder.1.cross_attn", "encoder.0.self_attn"):
        off = frozenset({name}) if name in heads else frozenset(h for h in heads if h.startswith(name + "."))
        assert abs(effects[name] - (base - log_probability(ckpt, source, output, off))) < 1e-4, name
    assert any(abs(v) > 1e-3 for v in effects.values())
