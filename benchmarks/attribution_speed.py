"""How long attribution takes on a checkpoint: every method but integrated gradients, then
integrated gradients, for sentences of about 20 source tokens (median of --repeat) and one of about 100.

  python -m benchmarks.attribution_speed --checkpoint checkpoints/multi30k-en-de --threads 2

Pause anything else that uses the cores while it runs (BENCHMARKS.md says what ran beside it).
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from model.analysis.attribution import Cost, attribute
from model.inference.options import DecodeOptions
from model.inference.pipeline import decode_many, source_ids
from model.storage.checkpoint import load_checkpoint

SENTENCES = [
    "A man in a blue shirt and a black hat is playing the guitar on a busy street corner.",
    "Two young children in red jackets are running through the snow towards their parents.",
    "A woman with long brown hair is reading a book while sitting on a wooden bench in the park.",
]
GERMAN = [
    "Ein Mann in einem blauen Hemd und einem schwarzen Hut spielt an einer belebten Straßenecke Gitarre.",
    "Zwei kleine Kinder in roten Jacken laufen durch den Schnee auf ihre Eltern zu.",
    "Eine Frau mit langen braunen Haaren liest ein Buch, während sie im Park auf einer Holzbank sitzt.",
]
LONG = ("A group of young men in colourful shirts and dark trousers are standing together in front of an old "
        "stone building while a woman in a long red dress walks past them with a small brown dog, and two children "
        "on bicycles ride down the narrow street towards the market where people are buying fresh fruit and bread, "
        "while an old man with a grey beard plays the accordion beside a fountain and a few tourists take photographs "
        "of the busy square in the warm morning sun.")


def timed(ckpt, text: str, repeat: int) -> dict[str, float]:
    ids = source_ids(ckpt, text)
    out = decode_many(ckpt, [ids], DecodeOptions())[0].tokens
    fast, ig, tokens = [], [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        attribute(ckpt, ids, out, upto=Cost.GRADIENT)
        t1 = time.perf_counter()
        att = attribute(ckpt, ids, out, upto=Cost.INTEGRATED)
        fast.append(t1 - t0)
        ig.append(att.seconds["integrated_gradients"])
        tokens.append(int(att.ig.steps.sum()))
    return {"source": len(ids), "generated": len(out) + 1, "fast_s": statistics.median(fast),
            "ig_s": statistics.median(ig), "ig_points": statistics.median(tokens)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", default="checkpoints/multi30k-en-de")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ckpt = load_checkpoint(args.checkpoint)
    attribute(ckpt, source_ids(ckpt, "A dog."), [5], upto=Cost.INTEGRATED)           # warm-up
    sentences = GERMAN if ckpt.src_lang == "de" else SENTENCES
    rows = [timed(ckpt, s, args.repeat) for s in sentences] + ([timed(ckpt, LONG, 1)] if ckpt.src_lang == "en" else [])
    print(f"{'source':>6} {'generated':>9} {'all but IG (s)':>15} {'IG (s)':>7} {'IG points':>9}")
    for r in rows:
        print(f"{r['source']:>6} {r['generated']:>9} {r['fast_s']:>15.3f} {r['ig_s']:>7.2f} {r['ig_points']:>9.0f}")
    short = rows[: len(sentences)]
    print("median of the ~20-token sentences: all but IG "
          f"{np.median([r['fast_s'] for r in short]):.3f} s, IG {np.median([r['ig_s'] for r in short]):.2f} s")


if __name__ == "__main__":
    main()
