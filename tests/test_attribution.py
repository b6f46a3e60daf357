"""Attribution (model/analysis/attribution): each method is what it says it is.

Exact decompositions (value norms, ALTI+), shares that sum to 1, completeness of integrated
gradients on the shipped model, agreement with Captum, and a model built by hand to copy one
source token, where every method must point at that token."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from model.analysis.attribution import RECORDING, Cost, attribute, attribution_json, traced_pass
from model.analysis.attribution.alti import AltiUnavailable, alti_plus, contributions, decompose
from model.analysis.attribution.attention import (
    head_agreement,
    raw_attention,
    value_norm,
    value_vectors,
    weighted_terms,
)
from model.analysis.attribution.faithfulness import comprehensiveness, erased_log_probs, random_ranking
from model.analysis.attribution.gradients import Pass, gauss_legendre, gradient_x_input, integrated_gradients
from model.inference.pipeline import explain, source_ids
from model.network import names
from model.network.config import ModelConfig
from model.network.trace import Trace
from model.network.transformer import Transformer
from model.storage.checkpoint import Checkpoint, load_checkpoint
from model.training.tasks import word_tokenizer
from serving.once import tensor_bytes
from tests.support import ROOT, tiny_model

SHIPPED = ROOT / "checkpoints" / "multi30k-en-de"


@pytest.fixture(scope="module")
def shipped() -> Checkpoint:
    return load_checkpoint(SHIPPED)


@pytest.fixture(scope="module")
def tiny(tokenizer) -> Checkpoint:
    return Checkpoint(tiny_model(tokenizer.vocab_size, seed=3), tokenizer, tokenizer)


def _ids(ckpt: Checkpoint, text: str) -> tuple[list[int], list[int]]:
    ids = source_ids(ckpt, text)
    return ids, explain(ckpt, text).result.tokens


# ---- the attention methods ---------------------------------------------------------------------
def test_value_norm_terms_sum_to_each_heads_output_exactly(tiny):
    src, out = _ids(tiny, "the dog runs in the park")
    trace, _ = traced_pass(tiny, src, out)
    for kind_name, layer in (("cross_attn", tiny.model.decoder.layers[1]), ("self_attn", tiny.model.encoder.layers[0])):
        stack = "decoder" if layer in list(tiny.model.decoder.layers) else "encoder"
        i = list(getattr(tiny.model, stack).layers).index(layer)
        name = names.sublayer(stack, i, kind_name)
        module = getattr(layer, kind_name)
        alpha, v = trace[name][0], trace[names.part(name, "v")][0]                    # (H, Tq, Tk), (H, Tk, d)
        heads = alpha @ v                                                              # (H, Tq, d)
        d = v.size(-1)
        w_o = module.w_o.weight.view(-1, v.size(0), d)                                # (D, H, d)
        for h in range(v.size(0)):
            per_key = alpha[h][..., None] * value_vectors(trace, module, name)[h][None]  # (Tq, Tk, D)
            torch.testing.assert_close(per_key.sum(1), heads[h] @ w_o[:, h].T, atol=1e-5, rtol=1e-5)
        # summed over heads and keys, plus W_O's bias: the sublayer's update, as the model computed it
        update = trace[names.part(name, "update")][0]
        torch.testing.assert_close(weighted_terms(trace, module, name).sum(1) + module.w_o.bias, update,
                                   atol=1e-5, rtol=1e-5)


def test_value_norm_of_a_head_is_its_weight_times_the_value_size(tiny):
    src, out = _ids(tiny, "a red ball")
    trace, _ = traced_pass(tiny, src, out)
    s = value_norm(trace, tiny.model, layer=0, head=1)
    alpha = trace[names.sublayer("decoder", 0, "cross_attn")][0, 1]
    sizes = value_vectors(trace, tiny.model.decoder.layers[0].cross_attn, names.sublayer("decoder", 0, "cross_attn"))
    np.testing.assert_allclose(s.source, (alpha * sizes[1].norm(dim=-1)).numpy(), rtol=1e-5, atol=1e-6)
    assert s.method == "value_norm.layer0.head1" and not s.joint


def test_raw_attention_rows_sum_to_one_and_match_the_trace(tiny):
    src, out = _ids(tiny, "the cat sits on the street")
    trace, _ = traced_pass(tiny, src, out)
    s = raw_attention(trace, layer=1, head=2)
    np.testing.assert_allclose(s.source, trace[names.sublayer("decoder", 1, "cross_attn")][0, 2].numpy())
    np.testing.assert_allclose(raw_attention(trace).source.sum(-1), 1.0, atol=1e-5)
    assert np.all(np.triu(raw_attention(trace).prefix, 1) == 0)        # the causal mask: no later token


# ---- ALTI+ -------------------------------------------------------------------------------------
@pytest.mark.parametrize("stack,i,sub", [("encoder", 0, "self_attn"), ("decoder", 1, "self_attn"),
                                         ("decoder", 0, "cross_attn")])
def test_alti_decomposition_is_exact(tiny, stack, i, sub):
    src, out = _ids(tiny, "a child plays with a big ball")
    trace, _ = traced_pass(tiny, src, out)
    parts, bias = decompose(trace, tiny.model, stack, i, sub)
    recorded = trace[names.part(names.sublayer(stack, i, sub), "out")][0]
    torch.testing.assert_close(parts.sum(1) + bias, recorded, atol=1e-5, rtol=1e-4)


def test_alti_shares_are_non_negative_and_sum_to_one(shipped):
    src, out = _ids(shipped, "A man in a blue shirt is playing the guitar.")
    trace, _ = traced_pass(shipped, src, out)
    s = alti_plus(trace, shipped.model)
    assert s.source.min() >= 0 and s.prefix.min() >= 0
    np.testing.assert_allclose(s.source.sum(-1) + s.prefix.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(s.source_share() + s.prefix.sum(-1), 1.0, atol=1e-5)
    assert np.all(np.triu(s.prefix, 1) == 0)
    c = contributions(decompose(trace, shipped.model, "decoder", 2, "cross_attn")[0])
    assert c.min() >= 0 and torch.allclose(c.sum(-1), torch.ones(c.size(0)), atol=1e-5)


def test_alti_says_why_not_for_a_pre_norm_model(tokenizer):
    ckpt = Checkpoint(tiny_model(tokenizer.vocab_size, norm_first=True), tokenizer, tokenizer)
    src, out = _ids(ckpt, "the dog")
    with pytest.raises(AltiUnavailable, match="post-norm"):
        alti_plus(traced_pass(ckpt, src, out)[0], ckpt.model)
    att = attribute(ckpt, src, out, upto=Cost.GRADIENT)
    assert "alti" not in att.scores and "post-norm" in att.unavailable["alti"]
    assert "rollout" in att.scores and "value_norm" in att.scores


def test_rollout_rows_are_distributions(shipped):
    src, out = _ids(shipped, "Two dogs run through the snow.")
    s = attribute(shipped, src, out, upto=Cost.GRADIENT).scores["rollout"]
    assert s.source.min() >= 0 and s.prefix.min() >= 0
    np.testing.assert_allclose(s.source.sum(-1) + s.prefix.sum(-1), 1.0, atol=1e-9)


# ---- gradients ---------------------------------------------------------------------------------
def test_integrated_gradients_complete_within_one_percent_on_the_shipped_model(shipped):
    for text in ("I love pizza.", "A woman in a red dress walks down the street."):
        src, out = _ids(shipped, text)
        ig = integrated_gradients(shipped.model, Pass.of(shipped.model, src, out))
        assert ig.completeness_error.max() <= 0.01, (text, ig.completeness_error)
        total = ig.scores.source.sum(-1) + ig.scores.prefix.sum(-1)
        np.testing.assert_allclose(total, ig.log_probs - ig.baseline_log_probs, rtol=0.0101)


def test_ig_end_points_are_the_models_own_log_probs(shipped):
    src, out = _ids(shipped, "A dog.")
    att = attribute(shipped, src, out)
    np.testing.assert_allclose(att.ig.log_probs, att.log_probs, atol=1e-4)


def test_gradients_equal_captum(shipped):
    captum_attr = pytest.importorskip("captum.attr", reason="Captum (pip install -e '.[captum]') checks the gradients")
    model = copy.deepcopy(shipped.model).double()
    src, out = _ids(shipped, "A girl plays in the park.")
    p = Pass.of(model, src, out)
    src_emb, tgt_emb = p.embeddings(model)
    ours_gxi = gradient_x_input(model, p)
    steps = 12
    ours_ig = integrated_gradients(model, p, steps=steps, adaptive=False)
    from model.analysis.attribution.gradients import token_log_probs
    for t in (0, len(out) // 2, len(out)):
        def forward(s_emb, t_emb, t=t):
            return token_log_probs(model, p, s_emb, t_emb, torch.full((s_emb.size(0),), t))
        inputs = (src_emb[None].clone(), tgt_emb[None, : t + 1].clone())
        gxi = captum_attr.InputXGradient(forward).attribute(inputs)
        np.testing.assert_allclose(gxi[0][0].sum(-1).detach().numpy(), ours_gxi.source[t], atol=1e-5)
        np.testing.assert_allclose(gxi[1][0].sum(-1).detach().numpy(), ours_gxi.prefix[t, : t + 1], atol=1e-5)
        ig = captum_attr.IntegratedGradients(forward).attribute(
            inputs, baselines=tuple(torch.zeros_like(x) for x in inputs), n_steps=steps, method="gausslegendre")
        np.testing.assert_allclose(ig[0][0].sum(-1).detach().numpy(), ours_ig.scores.source[t], atol=1e-5)
        np.testing.assert_allclose(ig[1][0].sum(-1).detach().numpy(), ours_ig.scores.prefix[t, : t + 1], atol=1e-5)
    assert len(gauss_legendre(steps)[0]) == steps


# ---- a model built by hand to copy source token k -----------------------------------------------
WORDS = ["f", "a", "b", "c", "d", "e"]          # ids 4..9: f fills, a..e are payloads


def copy_model() -> Checkpoint:
    """Copies the one payload token of its source whatever the filler around it: cross-attention
    finds it by a flag dimension of its embedding and carries its identity to the output; the
    encoder and the decoder's self-attention mix nothing (their output maps are zero)."""
    tok = word_tokenizer(WORDS)
    v, d = tok.vocab_size, 16
    cfg = ModelConfig(src_vocab_size=v, tgt_vocab_size=v, d_model=d, n_heads=1, n_encoder_layers=1,
                      n_decoder_layers=1, d_ff=4, dropout=0.0, max_positions=32, tie_embeddings=False,
                      positional_encoding=False, scale_embedding=False)
    torch.manual_seed(0)
    m = Transformer(cfg).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.zero_()
        for norm in (mod for mod in m.modules() if isinstance(mod, torch.nn.LayerNorm)):
            norm.weight.fill_(1.0)
        src = m.src_embed.lut.weight
        for k in range(5):
            src[5 + k, k], src[5 + k, 8] = 4.0, 4.0      # payload: its identity (dims 0-4) and a flag (dim 8)
        src[4, 9] = src[3, 10] = 4.0                    # filler, EOS
        m.tgt_embed.lut.weight[:, 12] = 4.0             # every decoder input looks the same
        m.encoder.layers[0].self_attn.w_o.bias[14] = 4.0  # a constant beside each token: the LayerNorm that
        #   follows is no longer blind to an embedding's scale, so gradients along it are not all 0
        cross = m.decoder.layers[0].cross_attn
        cross.w_q.bias[0] = 20.0                        # one query, whatever the position ...
        cross.w_k.weight[0, 8] = 1.0                    # ... that matches the payload flag
        for k in range(5):
            cross.w_v.weight[k, k] = 1.0
            cross.w_o.weight[k, k] = 6.0
            m.generator.weight[5 + k, k] = 1.0          # the carried identity names the output token
    return Checkpoint(m, tok, tok)


@pytest.mark.parametrize("position", [0, 2, 4])
def test_every_method_points_at_the_copied_token(position):
    ckpt = copy_model()
    words = ["f"] * 5
    words[position] = "c"
    src = source_ids(ckpt, " ".join(words))
    payload = ckpt.src_tokenizer.encode("c")[0]
    assert src[position] == payload
    out = explain(ckpt, " ".join(words)).result.tokens[:2]
    assert out == [payload, payload]                 # it does copy
    att = attribute(ckpt, src, out)
    for key, s in att.scores.items():
        mags = s.magnitudes()[0]
        for t in range(len(out)):                    # the copied tokens (not the EOS that follows)
            assert int(np.argmax(mags[t])) == position, (key, t, mags[t])
            assert mags[t, position] >= 0.5 * mags[t].sum(), (key, t, mags[t])


# ---- faithfulness and the bundle ----------------------------------------------------------------
def test_erasing_nothing_changes_nothing_and_erasing_changes_something(shipped):
    src, out = _ids(shipped, "A man rides a bike.")
    p = Pass.of(shipped.model, src, out)
    _, lp = traced_pass(shipped, src, out)
    t = len(out) + 1
    none = erased_log_probs(shipped.model, p, np.zeros((t, len(src)), dtype=bool), np.arange(t))
    np.testing.assert_allclose(none, lp, atol=1e-4)
    result = comprehensiveness(shipped.model, p, lp, {"random": random_ranking(t, len(src), np.random.default_rng(0))})
    assert set(result["random"]) == {1, 3} and result["random"][3] != 0.0


def test_copy_model_erasing_the_top_token_costs_most():
    ckpt = copy_model()
    src = source_ids(ckpt, "f f b f")
    out = [src[2]]
    att = attribute(ckpt, src, out, upto=Cost.GRADIENT)
    p = Pass.of(ckpt.model, src, out)
    for key in ("alti", "grad_x_input", "attention"):
        top, last = att.scores[key].ranking()[0, 0], att.scores[key].ranking()[0, -1]
        removed = np.zeros((2, len(src)), dtype=bool)
        removed[0, top] = removed[1, last] = True
        erased = erased_log_probs(ckpt.model, p, removed, np.array([0, 0]))
        assert att.log_probs[0] - erased[0] > 0.5 > abs(att.log_probs[0] - erased[1]), key


def test_attribution_json_and_the_command_line(shipped, tmp_path, capsys):
    from model.commands.attribution import main
    out = tmp_path / "a.json"
    assert main(["--checkpoint", str(SHIPPED), "--text", "I love pizza.", "--out", str(out), "--no-integrated"]) == 0
    d = json.loads(out.read_text())
    assert d["output"] == "Ich liebe Pizza."
    part = d["attribution"]
    assert part["format"] == "transformer-attribution/1"
    t, s = len(part["generated_tokens"]), len(part["source_tokens"])
    assert np.array(part["methods"]["alti"]["source"]).shape == (t, s)
    assert d["source_share_alti"] == part["methods"]["alti"]["source_share"] and len(d["source_share_alti"]) == t
    assert part["methods"]["attention"]["source_share"] is None
    assert "integrated_gradients" in part["unavailable"]
    lines = tmp_path / "in.txt"
    lines.write_text("A dog.\n\n")
    assert main(["--checkpoint", str(SHIPPED), "--input", str(lines), "--out", str(out), "--no-integrated"]) == 0
    both = json.loads(out.read_text())
    assert len(both) == 2 and "attribution" in both[0] and "empty" in both[1]["error"]


def test_bad_inputs_give_attribution_not_tracebacks(shipped, tokenizer):
    one = source_ids(shipped, "Hi")                              # a one-token source
    att = attribute(shipped, one[-2:], [], upto=Cost.INTEGRATED)      # and an empty translation (EOS only)
    assert att.scores["alti"].source.shape == (1, 2)
    long = source_ids(shipped, " ".join(["dog"] * 100))[:100]
    att = attribute(shipped, long, explain(shipped, "dog " * 30).result.tokens[:5], upto=Cost.GRADIENT)
    assert att.scores["alti"].source.shape[1] == 100
    lab = Checkpoint(tiny_model(tokenizer.vocab_size, residual=False, positional_encoding=False, causal_mask=False,
                                scale_attention=False), tokenizer, tokenizer)
    src, out = _ids(lab, "the dog runs")
    att = attribute(lab, src, out[:4])
    assert set(att.scores) >= {"alti", "rollout", "integrated_gradients"}
    np.testing.assert_allclose(att.scores["alti"].source.sum(-1) + att.scores["alti"].prefix.sum(-1), 1.0, atol=1e-5)


def test_recording_for_attribution_leaves_the_output_unchanged(shipped):
    src, out = _ids(shipped, "A dog runs.")
    s = torch.tensor([src])
    tgt = torch.tensor([[shipped.config.bos_id] + out])
    with torch.inference_mode():
        plain = shipped.model(s, tgt)
        traced = shipped.model(s, tgt, Trace(RECORDING))
    torch.testing.assert_close(plain, traced, atol=1e-5, rtol=1e-5)
    json.dumps(attribution_json(attribute(shipped, src, out, upto=Cost.GRADIENT)))      # plain JSON


def test_an_attribution_keeps_a_tenth_of_its_pass_and_reads_the_same_from_it(shipped):
    """A page keeps one Attribution per sentence (app/resources.py's cache): it holds the decoder's attention and
    values, not the whole recording, and a head's pictures and the heads' agreement read the same from it."""
    src, out = _ids(shipped, "A man in a blue shirt is standing on a ladder cleaning windows.")
    att = attribute(shipped, src, out, upto=Cost.TRACE)
    full, _ = traced_pass(shipped, src, out)
    assert tensor_bytes(att) < 0.1 * tensor_bytes(full), (tensor_bytes(att), tensor_bytes(full))   # as the cache counts
    cfg = shipped.config
    for layer, head in ((0, 0), (cfg.n_decoder_layers - 1, cfg.n_heads - 1)):
        for kept, whole in ((raw_attention(att.trace, layer, head), raw_attention(full, layer, head)),
                            (value_norm(att.trace, shipped.model, layer, head),
                             value_norm(full, shipped.model, layer, head))):
            np.testing.assert_array_equal(kept.source, whole.source)
            np.testing.assert_array_equal(kept.prefix, whole.prefix)
    agreement = att.head_agreement("alti")
    assert agreement.shape == (cfg.n_decoder_layers, cfg.n_heads)
    np.testing.assert_array_equal(agreement, head_agreement(full, att.scores["alti"]))


def test_the_cli_is_named_in_the_readme():
    assert "python -m model.attribution" in Path(ROOT / "README.md").read_text()


def test_faithfulness_summary_is_the_same_with_threads(tiny):
    from model.analysis.attribution.faithfulness import RANDOM, evaluate
    texts = ["the dog runs", "", "a red ball in the park", "the man sits"]
    one, two = evaluate(tiny, texts, workers=1), evaluate(tiny, texts, workers=2)
    assert one.sentences == 3 and one.tokens == two.tokens
    assert one.mean == two.mean and set(one.mean) >= {RANDOM, "alti", "integrated_gradients", "attention.layer0"}
    assert one.ig_completeness_within_1pct > 0.5


def test_the_quadrature_knows_each_cells_error_and_refines_where_it_is():
    """f(a) = log p along a path with a sudden step near a = 0.7 (a logistic), its derivative as the
    one attribution column: each cell's error is exactly width x f'(mid) - (f(right) - f(left)), and
    splitting the worst cells reaches 1 % with far fewer points than splitting every cell."""
    from model.analysis.attribution.gradients import adaptive_edges, on_scan
    f = lambda a: 6.0 / (1.0 + np.exp(-(a - 0.7) * 80.0))                 # noqa: E731
    df = lambda a: 80.0 * f(a) * (1.0 - f(a) / 6.0)                      # noqa: E731
    path = f(np.linspace(0.0, 1.0, 65))
    q = on_scan(path, 8)
    assert set(np.round(q.edges * 64, 9)) <= set(range(65)) and np.allclose(q.f, f(q.edges))
    q.source, q.prefix = df(q.midpoints)[:, None], np.zeros((len(q.midpoints), 1))
    assert np.allclose(q.cell_errors(), q.widths * df(q.midpoints) - np.diff(f(q.edges)))
    delta, n_local = path[-1] - path[0], len(q.midpoints)
    while abs(q.estimate()[0].sum() - delta) > 0.01 * abs(delta):
        cells = q.worst(0.5, 100)
        edges, mids = q.thirds(cells)
        q = q.split(cells, f(edges), df(mids)[:, None], np.zeros((len(mids), 1)))
        assert np.allclose(q.f, f(q.edges)) and np.all(np.diff(q.edges) > 0)
        assert np.allclose(q.source[:, 0], df(q.midpoints))                 # every midpoint kept in its place
        n_local = len(q.midpoints)
    everywhere = on_scan(path, 8).edges
    while True:                                                              # the same start, every cell split
        mids = 0.5 * (everywhere[1:] + everywhere[:-1])
        if abs(np.diff(everywhere) @ df(mids) - delta) <= 0.01 * abs(delta):
            break
        everywhere = np.unique(np.concatenate([everywhere, everywhere[:-1] + np.diff(everywhere) / 3,
                                               everywhere[:-1] + 2 * np.diff(everywhere) / 3]))
    assert n_local < len(everywhere) - 1
    assert adaptive_edges(path, 8)[0] == 0.0


def test_the_trace_format_documents_every_registered_method():
    from model.analysis.attribution import REGISTRY
    doc = (ROOT / "docs" / "trace-format.md").read_text()
    missing = [spec.key for spec in REGISTRY if f"`{spec.key}`" not in doc]
    assert not missing, f"docs/trace-format.md does not name {missing}"
    assert {spec.key for spec in REGISTRY if spec.joint} == {"rollout", "alti", "grad_x_input", "integrated_gradients"}
