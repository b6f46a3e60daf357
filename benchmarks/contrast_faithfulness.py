"""Does a contrastive method's top source token carry the preference? ("why this token and not that one",
model/analysis/attribution/contrast.py)

For each sentence of a set (default: Multi30K test2016's first --limit sources), at a random output position
(seeded), against the runner-up token there: hide each method's top source token, and a random other one, and
compare how much of log p(chosen) - log p(runner-up) each hiding takes away (erasure). Prints, per method, the
share of sentences where the top token's hiding took more, and the seconds per sentence.

  python -m benchmarks.contrast_faithfulness --limit 100 --threads 2

Pause anything else that uses the cores while it runs (BENCHMARKS.md says what ran beside it).
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from model.analysis.attribution.contrast import contrast, runner_up
from model.inference.options import DecodeOptions
from model.inference.pipeline import InputError, decode_many, source_ids
from model.storage.checkpoint import load_checkpoint
from model.training.data import read_parallel

METHODS = ("grad_x_input", "integrated_gradients")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", default="checkpoints/multi30k-en-de")
    p.add_argument("--data", default="../shared/data/multi30k")
    p.add_argument("--split", default="test_2016_flickr")
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int)
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    ckpt = load_checkpoint(args.checkpoint)
    sources, _ = read_parallel(args.data, args.split, ckpt.src_lang, ckpt.tgt_lang)
    rng = np.random.default_rng(args.seed)
    wins, done, seconds = dict.fromkeys(METHODS, 0), 0, []
    for text in sources[: args.limit]:
        try:
            ids = source_ids(ckpt, text)
        except InputError:
            continue
        output = decode_many(ckpt, [ids], DecodeOptions("greedy"))[0].tokens
        t = int(rng.integers(0, len(output) + 1))
        start = time.perf_counter()
        c = contrast(ckpt, ids, output, t, runner_up(ckpt, ids, output, t))
        seconds.append(time.perf_counter() - start)
        taken = c.scores["erasure"][0]
        for m in METHODS:
            top = c.top_source(m)
            other = int(rng.choice([i for i in range(len(ids)) if i != top]))
            wins[m] += bool(taken[top] > taken[other])
        done += 1
    print(f"{ckpt.name}, {args.split}, {done} sentences, one random position each, against the runner-up token")
    for m in METHODS:
        print(f"  {m:<22} top token's hiding takes more of the preference than a random one's: "
              f"{wins[m]}/{done} = {wins[m] / done:.0%}")
    print(f"  seconds per sentence (all three methods): median {np.median(seconds):.2f}, max {max(seconds):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
