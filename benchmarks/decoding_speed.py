"""Decoding benchmarks (issue: decoding you can step through).

Per-sentence latency on test sentences (one at a time) for greedy, beam 4 and beam 8,
with and without per-step records; and the key/value cache against re-running the
decoder over the whole prefix each step (`DecodeOptions(use_cache=False)`, the same
decode loop), timed alternately on the test sentences whose translation is 30+ tokens
long: one sentence at a time (greedy, beam 4) and as one batch. `--step-costs` adds the
decoder + output layer alone at fixed output lengths, for the trained model and for an
untrained one with the same operations at d_model 64 / vocabulary 100, whose time is
almost all fixed per-operation cost (Python, dispatch), the part the cache cannot save.

  .venv/bin/python -m benchmarks.decoding_speed --checkpoint checkpoints/multi30k-en-de
"""
from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import replace

import torch

from benchmarks.common import alternate, machine, ratio_line
from model.inference.decoding import decode, output_log_probs
from model.inference.options import DecodeOptions
from model.inference.pipeline import source_ids
from model.network.batch import Example, collate
from model.network.layers import DecoderCache
from model.network.transformer import Transformer
from model.storage.checkpoint import load_checkpoint
from model.training.data import read_parallel


def latency(model: Transformer, srcs: list[torch.Tensor]) -> None:
    """Per sentence, plain and recorded alternately."""
    for name, opts in (("greedy", DecodeOptions("greedy")), ("beam 4", DecodeOptions("beam", beam_size=4)),
                       ("beam 8", DecodeOptions("beam", beam_size=8))):
        times: dict[bool, list[float]] = {False: [], True: []}
        for src in srcs[:3]:
            decode(model, src, opts)
        for src in srcs:
            for rec in (False, True):
                start = time.perf_counter()
                decode(model, src, replace(opts, record_steps=rec))
                times[rec].append(time.perf_counter() - start)
        print(f"{name:7s} " + ratio_line("with records", times[True], "plain", times[False]))


def long_outputs(model: Transformer, srcs: list[torch.Tensor], min_tokens: int, limit: int) -> list[torch.Tensor]:
    """The sources whose greedy translation has at least min_tokens tokens."""
    lengths = [len(decode(model, s, DecodeOptions("greedy"))[0].tokens) for s in srcs]
    chosen = [(s, n) for s, n in zip(srcs, lengths) if n >= min_tokens][:limit]
    print(f"{len(chosen)} sentences with {min_tokens}+ output tokens (median "
          f"{statistics.median(n for _, n in chosen):.0f}, max {max(n for _, n in chosen)})")
    return [s for s, _ in chosen]


def _batch(srcs: list[torch.Tensor], pad_id: int) -> torch.Tensor:
    """One-sentence sources (1, S_i) -> one padded batch (B, S)."""
    return collate([Example(s[0].tolist(), [0]) for s in srcs], pad_id)[0]


def _int_list(text: str) -> list[int]:
    return [int(n) for n in text.split(",")]


def cache_vs_recompute(model: Transformer, srcs: list[torch.Tensor], pad_id: int) -> None:
    for name, opts in (("greedy", DecodeOptions("greedy")), ("beam 4", DecodeOptions("beam", beam_size=4))):
        full, cached = replace(opts, use_cache=False), opts
        ta, tb = [], []
        for src in srcs:
            assert decode(model, src, full)[0].tokens == decode(model, src, cached)[0].tokens
            x, y = alternate(lambda s=src, o=full: decode(model, s, o), lambda s=src, o=cached: decode(model, s, o),
                             rounds=1, warmup=0)
            ta += x
            tb += y
        print(f"{name}, one sentence at a time: " + ratio_line("full recompute", ta, "cached", tb))
    batch = _batch(srcs, pad_id)
    for name, opts in (("greedy", DecodeOptions("greedy")), ("beam 4", DecodeOptions("beam", beam_size=4))):
        ta, tb = alternate(lambda o=opts: decode(model, batch, replace(o, use_cache=False)),
                           lambda o=opts: decode(model, batch, o), rounds=3, warmup=1)
        print(f"{name}, one batch of {batch.size(0)}: " + ratio_line("full recompute", ta, "cached", tb))


@torch.inference_mode()
def _steps(model: Transformer, src: torch.Tensor, length: int, cached: bool,
           decoder: Callable[..., torch.Tensor] | None = None) -> None:
    """`length` decoding steps of one sentence, always feeding token 5: decoder and output
    layer only. decoder: a stand-in for `model.decode` (a compiled one)."""
    decoder = decoder or model.decode
    src_mask = model.src_mask(src)
    memory = model.encode(src, src_mask)
    cache = DecoderCache.empty(model.cfg.n_decoder_layers) if cached else None
    for t in range(1, length + 1):
        inputs = torch.full((1, 1 if cached else t), 5)
        output_log_probs(model, decoder(inputs, memory, src_mask, cache)[:, -1])


def step_costs(model: Transformer, src: torch.Tensor, lengths: list[int]) -> None:
    tiny = Transformer(model.cfg.replace(d_model=64, n_heads=2, d_ff=64, src_vocab_size=100,
                                         tgt_vocab_size=100)).eval()
    for name, m, s in (("trained", model, src), ("same operations at d_model 64", tiny, src.clamp(max=99))):
        for n in lengths:
            ta, tb = alternate(lambda m=m, s=s, n=n: _steps(m, s, n, False),
                               lambda m=m, s=s, n=n: _steps(m, s, n, True), rounds=5, warmup=1)
            ta, tb = [x / n for x in ta], [x / n for x in tb]
            print(f"{name}, {n} steps, per step: " + ratio_line("full recompute", ta, "cached", tb))


def greedy_by_batch_size(model: Transformer, srcs: list[torch.Tensor], pad_id: int, sizes: list[int]) -> None:
    """Cached vs recompute for greedy batches of k of the long sentences (k rows per step)."""
    for k in sizes:
        ta, tb = [], []
        for i in range(0, len(srcs) - k + 1, k):
            batch = _batch(srcs[i:i + k], pad_id)
            x, y = alternate(lambda b=batch: decode(model, b, DecodeOptions(use_cache=False)),
                             lambda b=batch: decode(model, b, DecodeOptions()), rounds=2, warmup=0)
            ta += x
            tb += y
        print(f"greedy, batches of {k}: " + ratio_line("full recompute", ta, "cached", tb))


def compiled_steps(model: Transformer, src: torch.Tensor, length: int) -> None:
    """Cached steps through `torch.compile(model.decode, dynamic=True)` vs eager."""
    compiled = torch.compile(model.decode, dynamic=True)
    start = time.perf_counter()
    _steps(model, src, length, True, compiled)
    print(f"torch.compile: first run (compiling) {time.perf_counter() - start:.1f} s")
    ta, tb = alternate(lambda: _steps(model, src, length, True), lambda: _steps(model, src, length, True, compiled),
                       rounds=5, warmup=1)
    print(f"{length} cached steps, per step: " + ratio_line("eager", [x / length for x in ta],
                                                            "compiled", [x / length for x in tb]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", default="checkpoints/multi30k-en-de")
    p.add_argument("--data", default="../shared/data/multi30k")
    p.add_argument("--sentences", type=int, default=100, help="test sentences for the latency table")
    p.add_argument("--min-tokens", type=int, default=30, help="output length for cached vs recompute")
    p.add_argument("--long", type=int, default=20, help="how many such sentences")
    p.add_argument("--skip-latency", action="store_true")
    p.add_argument("--step-costs", type=_int_list, default=[], metavar="N,N,..",
                   help="also time the decoder + output layer alone at these output lengths, e.g. 16,32,48,64")
    p.add_argument("--batch-sizes", type=_int_list, default=[], metavar="K,K,..",
                   help="also compare greedy cached vs recompute on batches of K of the long sentences, e.g. 1,2,4,7")
    p.add_argument("--compile", action="store_true",
                   help="also time 32 cached steps through torch.compile (takes a minute or more to compile)")
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    ckpt = load_checkpoint(a.checkpoint)
    texts = read_parallel(a.data, "test_2016_flickr", ckpt.src_lang, ckpt.tgt_lang)[0]
    srcs = [torch.tensor([source_ids(ckpt, t)]) for t in texts]
    print(f"machine: {machine()}")
    print(f"checkpoint: {a.checkpoint}, {ckpt.model.num_parameters() / 1e6:.2f} M parameters")
    if not a.skip_latency:
        print(f"latency: the first {a.sentences} test_2016_flickr sentences, one at a time")
        latency(ckpt.model, srcs[: a.sentences])
    longest = sorted(srcs, key=lambda s: -s.size(1))[: 4 * a.long]
    long = long_outputs(ckpt.model, longest, a.min_tokens, a.long)
    cache_vs_recompute(ckpt.model, long, ckpt.config.pad_id)
    if a.batch_sizes:
        greedy_by_batch_size(ckpt.model, long, ckpt.config.pad_id, a.batch_sizes)
    if a.step_costs:
        step_costs(ckpt.model, longest[0], a.step_costs)
    if a.compile:
        compiled_steps(ckpt.model, longest[0], 32)


if __name__ == "__main__":
    main()
