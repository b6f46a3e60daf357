"""The CUDA path (`pytest -m gpu`): each test skips without a GPU. The GPU visit
(model/commands/visit.py) runs this module there with `--noconftest` (the machine has no Streamlit,
plotly or Redis), so it builds its tiny models itself and imports nothing from tests/support.

Tolerances, stated once: CPU and CUDA float32 differ by summation order only, so a loss agrees to 1e-5
relative and gradients to 1e-4 (relative norm); one Adam step moves each weight by about lr x sign, so a
near-zero gradient may flip its sign on the other device: the update agrees to 1e-2 (relative norm).
bf16 autocast keeps about 3 significant digits: its loss is within 2 % of float32's.
"""
from __future__ import annotations

import pytest
import torch

from model.inference.bulk import beam_batch
from model.inference.decoding import decode
from model.inference.options import DecodeOptions
from model.network.config import preset
from model.network.tokenizer import Tokenizer
from model.network.trace import Recording, Trace
from model.network.transformer import Transformer
from model.storage.checkpoint import load_checkpoint, save_checkpoint
from model.training.loop import StepSettings, train_step

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (run on the lent GPU: "
                                                                         "python -m model.commands.visit)")]
VOCAB = 64
CUDA = torch.device("cuda")


def model(seed: int = 0, dropout: float = 0.0) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(preset("tiny", src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, dropout=dropout))


def batch(b: int = 8, s: int = 11, t: int = 9, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """src (b, s) ending in EOS, tgt (b, t) = BOS ... EOS, both padded (0) at random lengths."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, VOCAB, (b, s), generator=g)
    tgt = torch.randint(4, VOCAB, (b, t), generator=g)
    for row, (n, m) in enumerate(zip(torch.randint(2, s + 1, (b,), generator=g), torch.randint(3, t + 1, (b,),
                                                                                                 generator=g))):
        src[row, n - 1], src[row, n:] = 3, 0
        tgt[row, 0], tgt[row, m - 1], tgt[row, m:] = 2, 3, 0
    return src, tgt


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double().cpu() - b.double().cpu()).norm() / b.double().cpu().norm().clamp(min=1e-30))


def one_step(device: torch.device, amp: str = "off") -> tuple[float, list[torch.Tensor], list[torch.Tensor]]:
    """Loss, gradients (in parameter order) and weight updates of one Adam step on `device`, from the
    same start. The gradients are caught by a hook per parameter, keyed by name: autograd finishes them
    in an order that differs between devices (seen on an H200: compared in arrival order, they did not
    match)."""
    m = model().to(device)
    named = dict(m.named_parameters())                 # tied weights once
    before = {n: p.detach().clone() for n, p in named.items()}
    opt = torch.optim.Adam(m.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9, fused=device.type == "cuda")
    grads: dict[str, torch.Tensor] = {}
    hooks = [p.register_post_accumulate_grad_hook(lambda p, n=n: grads.__setitem__(n, p.grad.detach().clone()))
             for n, p in named.items()]
    loss, _ = train_step(m, opt, [batch()], 1e-3, StepSettings(clip=0.0, amp=amp), pad_id=0)
    for h in hooks:
        h.remove()
    assert set(grads) == set(named)
    return float(loss), [grads[n] for n in named], [named[n].detach() - before[n] for n in named]


def test_a_training_step_on_cuda_matches_the_cpu():
    loss_cpu, grads_cpu, moved_cpu = one_step(torch.device("cpu"))
    loss_gpu, grads_gpu, moved_gpu = one_step(CUDA)
    assert abs(loss_gpu - loss_cpu) <= 1e-5 * abs(loss_cpu)
    assert len(grads_cpu) == len(grads_gpu) > 0
    assert max(rel(g, c) for g, c in zip(grads_gpu, grads_cpu)) < 1e-4
    flat_gpu, flat_cpu = torch.cat([d.flatten().cpu() for d in moved_gpu]), torch.cat([d.flatten() for d in moved_cpu])
    assert rel(flat_gpu, flat_cpu) < 1e-2


def test_bf16_autocast_trains_within_two_percent_of_float32():
    loss32, _, _ = one_step(CUDA)
    loss16, _, moved = one_step(CUDA, amp="bf16")
    assert torch.isfinite(torch.tensor(loss16)) and abs(loss16 - loss32) <= 0.02 * loss32
    assert all(torch.isfinite(d).all() for d in moved)


def test_recording_a_trace_on_cuda_changes_no_output():
    m = model(1).to(CUDA).eval()
    src, tgt = (t.to(CUDA) for t in batch(seed=1))
    with torch.inference_mode():
        plain = m(src, tgt)
        trace = Trace(Recording(scores=True))
        traced = m(src, tgt, trace)
    assert torch.allclose(plain, traced, atol=1e-4, rtol=1e-4)
    weights = trace.attention("cross")                                     # (L, B, H, T, S)
    rows = weights.sum(-1)[..., (tgt != 0)[None, :, None, :].expand_as(weights.sum(-1))]
    assert torch.allclose(rows, torch.ones_like(rows), atol=1e-5)


def test_cached_beam_search_on_cuda_equals_the_cpus():
    m = model(2).eval()
    with torch.no_grad():
        m.generator.weight[3] *= 3          # EOS likelier: hypotheses finish at different steps
    src, _ = batch(b=12, seed=2)
    opts = DecodeOptions("beam", beam_size=4, alpha=1.0)
    on_cpu = [r.tokens for r in decode(m, src, opts)]
    m.to(CUDA)
    on_gpu = [r.tokens for r in decode(m, src.to(CUDA), opts)]
    bulk = beam_batch(m, src.to(CUDA), opts)
    assert on_gpu == on_cpu
    assert bulk == on_cpu
    assert len({len(t) for t in on_cpu}) > 1


def test_a_checkpoint_written_on_the_gpu_loads_on_the_cpu(tmp_path):
    words = "the a cat dog sat ran on under mat tree big small red house".split()
    tok = Tokenizer.train([" ".join(words[i:] + words[:i]) for i in range(len(words))] * 20, vocab_size=40)
    m = Transformer(preset("tiny", src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size,
                           **tok.special_ids)).to(CUDA).eval()
    src, tgt = batch(seed=3)
    src, tgt = src.clamp(max=tok.vocab_size - 1), tgt.clamp(max=tok.vocab_size - 1)
    with torch.inference_mode():
        expected = m(src.to(CUDA), tgt.to(CUDA)).cpu()
    save_checkpoint(tmp_path / "gpu-made", m, tok, tok)
    loaded = load_checkpoint(tmp_path / "gpu-made")
    assert next(loaded.model.parameters()).device.type == "cpu"
    with torch.inference_mode():
        assert torch.allclose(loaded.model(src, tgt), expected, atol=1e-4, rtol=1e-4)
