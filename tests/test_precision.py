"""Fast copies of a model (model/inference/precision.py: oneDNN fp32, fp16 weights, int8) and the command that
measures them."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from model.commands.translate import main as translate_main
from model.inference.decoding import decode
from model.inference.options import DecodeOptions
from model.inference.precision import (
    FP16W,
    FP16W_DEC,
    HALF_WEIGHTS,
    ONEDNN,
    ONEDNN_OUT,
    SCHEMES,
    Fp16WeightLinear,
    Int8WeightLinear,
    PackedLinear,
    available,
    linears,
    quantized,
)
from model.storage.checkpoint import save_checkpoint
from tests.support import random_batch, tiny_model


def _logits(model, src):
    tgt = src[:, :5]
    with torch.inference_mode():
        return model(src, tgt)


def test_a_quantized_copy_leaves_the_model_untouched_and_stays_close():
    model = tiny_model(seed=3).eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    src = random_batch(40, [9, 7], seed=1)
    want = _logits(model, src)
    for scheme in SCHEMES:
        got = _logits(quantized(model, scheme), src)
        assert got.shape == want.shape
        assert (got - want).abs().max() < 0.1 * want.abs().max(), scheme          # close, not equal
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_each_scheme_quantizes_the_linears_it_names_and_no_other():
    model = tiny_model(seed=0).eval()
    every = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    assert linears(model, "int8") == every and linears(model, "int8w") == every
    ffn = linears(model, "int8-ffn1")
    assert ffn and all(n.endswith(("w_1", "w_2")) for n in ffn)
    q = quantized(model, "int8-ffn1")
    still = {n for n, m in q.named_modules() if type(m) is nn.Linear}
    assert still == set(every) - set(ffn)
    w = quantized(model, "int8w")
    assert {n for n, m in w.named_modules() if isinstance(m, Int8WeightLinear)} == set(every)


def test_an_int8_weight_linear_is_within_its_rounding_of_the_fp32_one():
    torch.manual_seed(0)
    linear = nn.Linear(32, 48)
    q = Int8WeightLinear(linear)
    x = torch.randn(5, 3, 32)
    bound = x.abs().sum(-1, keepdim=True) * q.scale / 2 + 1e-5                   # half a step per weight
    assert ((q(x) - linear(x)).abs() <= bound).all()


def test_an_unknown_scheme_is_refused():
    with pytest.raises(ValueError, match="unknown precision"):
        quantized(tiny_model(), "int4")


def test_the_command_refuses_to_choose_on_a_test_set(capsys):
    from model.commands import precision
    with pytest.raises(SystemExit):
        precision.main(["--checkpoint", "multi30k-en-de", "--set", "../shared/data/multi30k:test_2016_flickr",
                        "--write"])
    assert "not a test set" in capsys.readouterr().err


def test_the_choice_is_the_fastest_passing_scheme_and_only_if_faster_than_fp32():
    from model.commands.precision import choose

    def timed(name: str, fp32: float, fast: float, ok: bool = True) -> dict:
        return {name: {"one_sentence_s": {"fp32": fp32, name: fast}, "passes": ok}}
    results = timed("a", 0.08, 0.06) | timed("b", 0.07, 0.05) | timed("c", 0.08, 0.01, ok=False)
    assert choose(results) == "b"                  # 0.71 of fp32 timed beside it, against a's 0.75; c does not pass
    assert choose(timed("a", 0.08, 0.09)) == "fp32"                                   # slower than fp32 here
    assert choose(timed("a", 0.100, 0.099)) == "fp32"             # 1 % faster: not worth the copy's memory
    assert choose(timed("c", 0.08, 0.01, ok=False)) == "fp32"
    big, small = timed("big", 0.10, 0.040), timed("small", 0.10, 0.044)
    big["big"]["added_mb"], small["small"]["added_mb"] = 44.0, 25.0
    assert choose(big | small) == "small"                     # 0.44 against 0.40 of fp32: the smaller copy
    small["small"]["one_sentence_s"]["small"] = 0.050
    assert choose(big | small) == "big"                       # 0.50: no longer as fast


def _fp16_valued(model: nn.Module) -> nn.Module:
    """The model with every weight rounded to fp16's nearest (as a checkpoint stored in fp16 loads), in fp32."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.half().float())
    return model


@pytest.mark.parametrize("scheme", [ONEDNN, ONEDNN_OUT, FP16W, FP16W_DEC])
def test_the_fast_fp32_copy_is_fp32_to_its_last_digits_and_decodes_as_fp32_does(scheme):
    """The served fast paths (issues 43, 53): every linear (onednn), or the output layer alone (onednn-out),
    replaced by oneDNN's laid-out fp32 weights; or FBGEMM's fp16-held weights with fp32 arithmetic, every linear
    (fp16w) or the decoder's and output layer's (fp16w-dec), on a model whose weights fp16 holds exactly (the
    shipped checkpoints store fp16). Logits within fp32's rounding, the same beam search, the same attention rows;
    the fp32 model untouched."""
    if not available(scheme):
        pytest.skip(f"this PyTorch cannot run {scheme}")
    model = _fp16_valued(tiny_model(seed=5)).eval()
    fast = quantized(model, scheme)
    kind = Fp16WeightLinear if scheme in HALF_WEIGHTS else PackedLinear
    laid_out = {n for n, m in fast.named_modules() if isinstance(m, kind)}
    assert laid_out == set(linears(model, scheme)) and laid_out
    assert {n for n, m in fast.named_modules() if type(m) is nn.Linear} == \
        {n for n, m in model.named_modules() if type(m) is nn.Linear} - laid_out
    assert scheme != ONEDNN_OUT or laid_out == {"generator"}
    assert scheme != FP16W_DEC or laid_out == {n for n in linears(model, FP16W) if not n.startswith("encoder.")}
    assert all(type(model.get_submodule(n)) is nn.Linear for n in linears(model, scheme))       # untouched
    src = random_batch(40, [9, 7, 5], seed=2)
    want, got = _logits(model, src), _logits(fast, src)
    assert (got - want).abs().max() < 1e-4
    opts = DecodeOptions("beam", beam_size=4, record_steps=True)
    for a, b in zip(decode(model, src, opts), decode(fast, src, opts)):
        assert a.tokens == b.tokens
        rows = [(ha.cross_attn, hb.cross_attn) for sa, sb in zip(a.steps, b.steps)
                for ha, hb in zip(sa.hypotheses, sb.hypotheses)]
        assert rows and all((x - y).abs().max() < 1e-5 for x, y in rows)


def test_translate_computes_at_the_checkpoints_served_precision_or_the_one_asked(tokenizer, tmp_path, capsys):
    save_checkpoint(tmp_path / "m", tiny_model(tokenizer.vocab_size, seed=1), tokenizer, tokenizer,
                    meta={"src_lang": "en", "tgt_lang": "de", "precision": {"scheme": ONEDNN}})
    (tmp_path / "in.txt").write_text("the dog runs\na man in the park\n")
    args = ["--checkpoint", str(tmp_path / "m"), "--input", str(tmp_path / "in.txt"), "--no-progress"]
    outputs = {}
    for precision in ("served", "fp32", ONEDNN):
        assert translate_main([*args, "--precision", precision]) == 0
        outputs[precision] = capsys.readouterr().out
    assert outputs["served"] == outputs["fp32"] == outputs[ONEDNN] and outputs["fp32"].count("\n") == 2
    with pytest.raises(SystemExit):
        translate_main([*args, "--precision", "int4"])


def test_a_fast_copy_shares_what_it_does_not_replace():
    """fp16w-dec replaces the decoder's and the output layer's linears: the encoder's weights, the embeddings and
    the norms are the fp32 model's own tensors (no second copy in memory), the replaced ones are not."""
    if not available(FP16W_DEC):
        pytest.skip("this PyTorch has no FBGEMM")
    model = tiny_model(seed=2).eval()
    fast = quantized(model, FP16W_DEC)
    theirs = {n: p.data_ptr() for n, p in model.named_parameters()}
    ours = {n: p.data_ptr() for n, p in fast.named_parameters()}
    replaced = tuple(f"{n}." for n in linears(model, FP16W_DEC))
    assert ours and all(theirs[n] == ptr for n, ptr in ours.items())
    assert not any(n.startswith(replaced) for n in ours)
    assert any(n.startswith("encoder.") for n in ours) and any("norm" in n for n in ours)
