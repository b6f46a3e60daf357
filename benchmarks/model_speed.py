"""Model benchmarks (issue: the instrumented Transformer).

1. A training step of our model (no trace) vs torch.nn.Transformer with the same
   config, embeddings, output layer, batch and optimizer, timed alternately.
2. Inference (teacher-forced forward) with a full trace vs without.

  .venv/bin/python -m benchmarks.model_speed [--preset small] [--rounds 20]
"""
from __future__ import annotations

import argparse
import math
import statistics

import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.common import alternate, machine, ratio_line
from model import Recording, Trace
from model.network.config import preset
from model.network.transformer import Transformer


class TorchReference(nn.Module):
    """nn.Transformer with the same embeddings, positional encoding and output layer as ours."""

    def __init__(self, ours: Transformer) -> None:
        super().__init__()
        cfg = ours.cfg
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.src_vocab_size, cfg.d_model)
        self.register_buffer("pe", ours.positional.pe.clone())
        self.core = nn.Transformer(cfg.d_model, cfg.n_heads, cfg.n_encoder_layers, cfg.n_decoder_layers, cfg.d_ff,
                                   cfg.dropout, batch_first=True)
        self.generator = nn.Linear(cfg.d_model, cfg.tgt_vocab_size, bias=False)
        self.generator.weight = self.embed.weight

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        scale = math.sqrt(self.cfg.d_model)
        s = self.embed(src) * scale + self.pe[: src.size(1)]
        t = self.embed(tgt) * scale + self.pe[: tgt.size(1)]
        causal = nn.Transformer.generate_square_subsequent_mask(tgt.size(1), device=tgt.device, dtype=torch.bool)
        h = self.core(s, t, tgt_mask=causal, src_key_padding_mask=src == 0, tgt_key_padding_mask=tgt == 0,
                      memory_key_padding_mask=src == 0)
        return self.generator(h)


def batch(vocab: int, b: int, s: int, t: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, vocab, (b, s), generator=g)
    tgt = torch.randint(4, vocab, (b, t), generator=g)
    lengths = torch.randint(s // 2, s + 1, (b,), generator=g)
    src[torch.arange(s)[None, :] >= lengths[:, None]] = 0
    tgt[:, 0] = 2
    return src, tgt


def train_step(model: nn.Module, opt: torch.optim.Optimizer, src: torch.Tensor, tgt: torch.Tensor) -> None:
    model.train()
    logits = model(src, tgt[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt[:, 1:].reshape(-1), ignore_index=0,
                           label_smoothing=0.1)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


@torch.inference_mode()
def inference(model: Transformer, src: torch.Tensor, tgt: torch.Tensor, trace: Trace | None) -> None:
    model(src, tgt, trace)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="small")
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--batch", type=int, default=128, help="sentences per batch")
    p.add_argument("--src-len", type=int, default=20)
    p.add_argument("--tgt-len", type=int, default=20)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = preset(a.preset, src_vocab_size=a.vocab, tgt_vocab_size=a.vocab)
    ours = Transformer(cfg)
    ref = TorchReference(ours)
    opt_ours = torch.optim.Adam(ours.parameters(), lr=1e-4)
    opt_ref = torch.optim.Adam(ref.parameters(), lr=1e-4)
    src, tgt = batch(a.vocab, a.batch, a.src_len, a.tgt_len)
    print(f"machine: {machine()}")
    print(f"config: preset {a.preset}, {ours.num_parameters() / 1e6:.2f} M parameters; batch {a.batch} x "
          f"src {a.src_len} / tgt {a.tgt_len}")
    ta, tb = alternate(lambda: train_step(ours, opt_ours, src, tgt), lambda: train_step(ref, opt_ref, src, tgt),
                       a.rounds)
    print("training step  " + ratio_line("ours", ta, "nn.Transformer", tb))

    def bf16_step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            train_step(ours, opt_ours, src, tgt)

    ta, tb = alternate(lambda: train_step(ours, opt_ours, src, tgt), bf16_step, max(4, a.rounds // 2))
    tokens = int((tgt[:, 1:] != 0).sum())
    print("training step  " + ratio_line("fp32", ta, "bf16 autocast", tb))
    print(f"training tokens/s: fp32 {tokens / statistics.median(ta):,.0f}, bf16 autocast "
          f"{tokens / statistics.median(tb):,.0f} ({tokens} target tokens per batch)")

    ours.eval()
    for name, (b, seed, rounds) in {"1 sentence": (1, 1, a.rounds * 10), "batch of 32": (32, 2, a.rounds * 2)}.items():
        src_i, tgt_i = batch(a.vocab, b, a.src_len, a.tgt_len, seed=seed)
        ta, tb = alternate(lambda s=src_i, t=tgt_i: inference(ours, s, t, Trace(Recording(scores=True))),
                           lambda s=src_i, t=tgt_i: inference(ours, s, t, None), rounds, warmup=3)
        print(f"inference, {name}  " + ratio_line("full trace", ta, "no trace", tb))


if __name__ == "__main__":
    main()
