"""Where a training step of the real loop spends its time, against the same step on one fixed-shape batch.

On the first GPU visit (2026-11-27, an H200) a base-size teacher trained at 57-73k target tokens/s a
process (two processes at once) while `benchmarks.train_speed` measured 406-415k for one process on a
fixed 1000 x 24 batch. This runs, in one process, the project's own `train_step` on
(a) real token-bucketed batches of the corpus (every shape different, as train.py gives them),
(b) one fixed-shape batch of the same token count, and (c) real batches with the host running ahead
(sync=False, as train.py does on a GPU), then profiles a few real steps (torch.profiler, the top
operators by device and by host time). Run it with and without
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (the visit does both) to see whether the allocator's
handling of ever-changing shapes is the gap.

  python -m benchmarks.train_loop --bundle gpu-bundle --device cuda --steps 20
  python -m benchmarks.train_loop --bundle gpu-bundle --device cpu --preset tiny --steps 3 --batch-tokens 2000
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from model.network.batch import collate
from model.network.config import preset
from model.network.transformer import Transformer
from model.storage.checkpoint import load_checkpoint
from model.training.data import make_examples, token_batches
from model.training.loop import StepSettings, train_step

ROOT = Path(__file__).resolve().parent.parent


def _lines(path: Path, n: int) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.strip() for _, line in zip(range(n), f)]


def measure(bundle: Path, device: str, preset_name: str, batch_tokens: int, steps: int,
            pairs: int = 100_000, profile: bool = True,
            tokenizer_from: Path = ROOT / "checkpoints" / "multi30k-en-de") -> dict[str, Any]:
    dev = torch.device(device)
    tok = load_checkpoint(tokenizer_from).src_tokenizer
    en, de = _lines(bundle / "tatoeba.train.en.gz", pairs), _lines(bundle / "tatoeba.train.de.gz", pairs)
    cfg = preset(preset_name, src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, norm_first=True,
                 **tok.special_ids)
    examples = make_examples(tok.encode_many(en), tok.encode_many(de), cfg.bos_id, cfg.eos_id, 100)
    real = [collate([examples[i] for i in b], cfg.pad_id) for b in token_batches(examples, batch_tokens, seed=1)]
    real = ([b for b in real if b[0].numel() > batch_tokens // 4] or real)[: steps * 3]    # full batches first
    length = 24
    fixed_examples = [e for e in examples if len(e.src) <= length and len(e.tgt) <= length][: batch_tokens // length]
    fixed = collate(fixed_examples, cfg.pad_id)
    fixed = (torch.nn.functional.pad(fixed[0], (0, length - fixed[0].size(1))),
             torch.nn.functional.pad(fixed[1], (0, length - fixed[1].size(1))))
    torch.manual_seed(0)
    model = Transformer(cfg).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=dev.type == "cuda")
    settings = StepSettings(amp="bf16" if dev.type == "cuda" else "off")
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    def tokens(b: tuple[torch.Tensor, torch.Tensor]) -> int:
        return int((b[1][:, 1:] != cfg.pad_id).sum())

    def timed(batches: list, host_ahead: bool = False) -> tuple[float, int]:
        sync()
        start = time.perf_counter()
        n = 0
        for b in batches:
            train_step(model, opt, [b], 1e-4, settings, cfg.pad_id, sync=not host_ahead)
            n += tokens(b)
        sync()
        return time.perf_counter() - start, n

    timed(real[:3])
    timed([fixed] * 3)                                          # warm-up: both kinds of shape
    runs: dict[str, list[float]] = {"real": [], "fixed": [], "real_host_ahead": []}
    for r in range(3):
        chunk = real[r * steps:(r + 1) * steps] or real[:steps]
        for name, batches, ahead in (("real", chunk, False), ("fixed", [fixed] * len(chunk), False),
                                     ("real_host_ahead", chunk, True)):
            seconds, n = timed(batches, ahead)
            runs[name].append(n / seconds)
    out: dict[str, Any] = {"device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
                           "preset": preset_name, "parameters": model.num_parameters(), "batch_tokens": batch_tokens,
                           "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
                           "real_batch_shapes": [list(b[1].shape) for b in real[:5]],
                           "fixed_batch_shape": list(fixed[1].shape)}
    for name, rates in runs.items():
        out[f"{name}_tokens_per_s"] = round(statistics.median(rates))
    if profile:
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as torch_profile
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
        with torch_profile(activities=activities) as prof:
            timed(real[:5])
        key = "self_cuda_time_total" if dev.type == "cuda" else "self_cpu_time_total"
        out["profile_by_device"] = prof.key_averages().table(sort_by=key, row_limit=14)
        out["profile_by_host"] = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bundle", type=Path, default=ROOT / "gpu-bundle", help="the visit's data bundle")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--preset", default="base")
    p.add_argument("--batch-tokens", type=int, default=24_000)
    p.add_argument("--steps", type=int, default=20, help="steps per timed run (three runs of each kind)")
    p.add_argument("--pairs", type=int, default=100_000, help="Tatoeba pairs to batch")
    p.add_argument("--no-profile", action="store_true")
    p.add_argument("--tokenizer-from", type=Path, default=ROOT / "checkpoints" / "multi30k-en-de",
                   help="the checkpoint whose tokenizer batches the corpus")
    a = p.parse_args()
    result = measure(a.bundle, a.device, a.preset, a.batch_tokens, a.steps, a.pairs, not a.no_profile,
                     a.tokenizer_from)
    tables = {k: result.pop(k) for k in ("profile_by_device", "profile_by_host") if k in result}
    print(json.dumps(result), flush=True)
    for name, table in tables.items():
        print(f"--- {name}\n{table}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
