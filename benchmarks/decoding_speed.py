"""Decoding benchmarks (issue: decoding you can step through).

Per-sentence latency on test sentences (one at a time) for greedy, beam 4 and beam 8,
with and without per-step records; and cached vs full-prefix-recompute greedy decoding
at a fixed 32 and 48 output tokens, timed alternately.

  .venv/bin/python -m benchmarks.decoding_speed --checkpoint checkpoints/multi30k-en-de
"""
from __future__ import annotations

import argparse
import time

import torch

from benchmarks.common import alternate, machine, ratio_line
from model.checkpoint import load_checkpoint
from model.data import Example, collate, read_parallel
from model.decoding import DecodeOptions, decode
from model.layers import DecoderCache
from model.pipeline import source_ids
from model.transformer import Transformer


@torch.inference_mode()
def greedy_fixed(model: Transformer, src: torch.Tensor, steps: int, cached: bool) -> list[int]:
    """Greedy for exactly `steps` tokens (EOS ignored), with the key/value cache or by
    re-running the decoder over the whole prefix each step."""
    src_mask = model.src_mask(src)
    memory = model.encode(src, src_mask)
    cache = DecoderCache.empty(model.cfg.n_decoder_layers) if cached else None
    ys = torch.full((src.size(0), 1), model.cfg.bos_id)
    for _ in range(steps):
        inp = ys[:, -1:] if cached else ys
        logits = model.generator(model.decode(inp, memory, src_mask, cache)[:, -1])
        logits[:, model.cfg.eos_id] = float("-inf")
        ys = torch.cat([ys, logits.argmax(-1, keepdim=True)], dim=1)
    return ys[:, 1:].tolist()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", default="checkpoints/multi30k-en-de")
    p.add_argument("--data", default="../shared/data/multi30k")
    p.add_argument("--sentences", type=int, default=100)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    ckpt = load_checkpoint(a.checkpoint)
    texts = read_parallel(a.data, "test_2016_flickr", ckpt.src_lang, ckpt.tgt_lang)[0][: a.sentences]
    srcs = [torch.tensor([source_ids(ckpt, t)]) for t in texts]
    print(f"machine: {machine()}")
    print(f"checkpoint: {a.checkpoint}, {ckpt.model.num_parameters() / 1e6:.2f} M parameters, "
          f"{len(srcs)} test_2016_flickr sentences, one at a time")
    for name, opts in (("greedy", DecodeOptions("greedy")), ("beam 4", DecodeOptions("beam", beam_size=4)),
                       ("beam 8", DecodeOptions("beam", beam_size=8))):
        times = {False: [], True: []}
        for src in srcs[:3]:
            decode(ckpt.model, src, opts)
        for src in srcs:                                   # alternate plain / recorded per sentence
            for rec in (False, True):
                o = DecodeOptions(**{**opts.__dict__, "record_steps": rec})
                start = time.perf_counter()
                decode(ckpt.model, src, o)
                times[rec].append(time.perf_counter() - start)
        print(f"{name:7s} " + ratio_line("with records", times[True], "plain", times[False]))
    for steps in (32, 48):
        ta, tb = [], []
        for src in srcs[:30]:
            x, y = alternate(lambda s=src, n=steps: greedy_fixed(ckpt.model, s, n, False),
                             lambda s=src, n=steps: greedy_fixed(ckpt.model, s, n, True), rounds=1, warmup=0)
            ta += x
            tb += y
        assert greedy_fixed(ckpt.model, srcs[0], steps, False) == greedy_fixed(ckpt.model, srcs[0], steps, True)
        print(f"{steps} output tokens, 30 sentences: " + ratio_line("full recompute", ta, "cached", tb))
    batch = collate([Example(ids[0].tolist(), [ckpt.config.bos_id]) for ids in srcs[:16]], ckpt.config.pad_id)[0]
    for steps in (32, 48):
        ta, tb = alternate(lambda n=steps: greedy_fixed(ckpt.model, batch, n, False),
                           lambda n=steps: greedy_fixed(ckpt.model, batch, n, True), rounds=5, warmup=1)
        print(f"{steps} output tokens, one batch of 16 sentences: " + ratio_line("full recompute", ta, "cached", tb))

if __name__ == "__main__":
    main()
