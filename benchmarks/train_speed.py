"""Training tokens per second: our Transformer against torch.nn.Transformer of the same shape (same
embeddings, positional encoding, output layer, batch and optimizer), steps timed alternately (A B A B)
with the device synchronised around each, medians reported. On a GPU with bf16 autocast and fused Adam,
as train.py trains there; the GPU visit (model/commands/visit.py) runs it.

  python -m benchmarks.train_speed --device cuda --preset base --amp bf16 --batch-tokens 24000
  python -m benchmarks.train_speed --device cpu --preset small           # this machine
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import torch

from benchmarks.model_speed import TorchReference, batch, train_step
from model.network.config import preset
from model.network.transformer import Transformer


def _timed(step, sync) -> float:
    sync()
    start = time.perf_counter()
    step()
    sync()
    return time.perf_counter() - start


def compare(device: str = "cuda", preset_name: str = "base", amp: str = "bf16", batch_tokens: int = 24_000,
            seconds: float = 20.0, length: int = 24, vocab: int = 8000) -> dict[str, Any]:
    """Median target tokens per second of a training step, ours and nn.Transformer's, for at most
    about `seconds` of timing (at least 3 rounds each after 2 warm-up steps)."""
    dev = torch.device(device)
    torch.manual_seed(0)
    cfg = preset(preset_name, src_vocab_size=vocab, tgt_vocab_size=vocab)
    ours = Transformer(cfg).to(dev)
    ref = TorchReference(Transformer(cfg)).to(dev)
    fused = dev.type == "cuda"
    opt_ours = torch.optim.Adam(ours.parameters(), lr=1e-4, fused=fused)
    opt_ref = torch.optim.Adam(ref.parameters(), lr=1e-4, fused=fused)
    src, tgt = (t.to(dev) for t in batch(vocab, max(1, batch_tokens // length), length, length))
    tokens = int((tgt[:, 1:] != 0).sum())
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    def step(model, opt):
        def go() -> None:
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=amp == "bf16"):
                train_step(model, opt, src, tgt)
        return go

    a, b = step(ours, opt_ours), step(ref, opt_ref)
    for _ in range(2):
        a(), b()
    ta, tb = [], []
    stop = time.time() + seconds
    while len(ta) < 3 or (time.time() < stop and len(ta) < 50):
        ta.append(_timed(a, sync))
        tb.append(_timed(b, sync))
    ma, mb = statistics.median(ta), statistics.median(tb)
    return {"device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu", "preset": preset_name,
            "parameters": ours.num_parameters(), "amp": amp, "batch": list(src.shape), "target_tokens": tokens,
            "rounds": len(ta), "ours_tokens_per_s": round(tokens / ma),
            "nn_transformer_tokens_per_s": round(tokens / mb),
            "ours_over_nn_time": round(statistics.median(x / y for x, y in zip(ta, tb)), 3)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--preset", default="base")
    p.add_argument("--amp", default="bf16", choices=["bf16", "off"])
    p.add_argument("--batch-tokens", type=int, default=24_000)
    p.add_argument("--seconds", type=float, default=20.0)
    a = p.parse_args()
    print(json.dumps(compare(a.device, a.preset, a.amp, a.batch_tokens, a.seconds), indent=1))


if __name__ == "__main__":
    main()
