"""One sentence as the app decodes it, two checkpoints against each other (A B, B A, A B in one sitting).

  .venv/bin/python -m benchmarks.sentence_speed --a OLD_CHECKPOINT --b checkpoints/multi30k-de-en

`explain` as the explorer calls it: beam 4 at each checkpoint's own α, step records, the traced teacher-forced
pass. Per set (the first --sentences sources of Multi30K test2016 and distinct sources of Tatoeba test, in the
checkpoints' source language) the median time per sentence of each round, and B/A of the medians. One thread
by default, as one app process serves one student at a time.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from benchmarks.common import machine
from model.inference.options import DecodeOptions
from model.inference.pipeline import explain
from model.storage.checkpoint import Checkpoint, load_checkpoint
from model.training.data import read_lines, split_file

SETS = {"Multi30K test2016": ("multi30k", "test_2016_flickr"), "Tatoeba test": ("tatoeba-en-de", "test")}


def sources(data_root: str, lang: str, n: int) -> dict[str, list[str]]:
    """The first n distinct sources of each set."""
    out = {}
    for name, (folder, split) in SETS.items():
        lines = read_lines(split_file(f"{data_root}/{folder}", split, lang))
        out[name] = list(dict.fromkeys(line.strip() for line in lines if line.strip()))[:n]
    return out


def median_ms(ckpt: Checkpoint, texts: list[str]) -> float:
    opts = DecodeOptions("beam", beam_size=4, alpha=ckpt.beam_alpha, record_steps=True)
    times = []
    for text in texts:
        start = time.perf_counter()
        explain(ckpt, text, opts)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sentence_speed", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", required=True, help="the reference checkpoint (before)")
    p.add_argument("--b", required=True, help="the checkpoint compared with it (after)")
    p.add_argument("--data", default="../shared/data", help="folder holding multi30k/ and tatoeba-en-de/")
    p.add_argument("--sentences", type=int, default=40, help="sentences per set (default 40)")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    models = {"A": load_checkpoint(args.a), "B": load_checkpoint(args.b)}
    sets = sources(args.data, models["A"].src_lang, args.sentences)
    for ckpt in models.values():
        median_ms(ckpt, ["Warm."])
    times: dict[tuple[str, str], list[float]] = {(m, s): [] for m in models for s in sets}
    for order in ("AB", "BA", "AB"):
        for m in order:
            for s, texts in sets.items():
                times[(m, s)].append(median_ms(models[m], texts))
    print(f"{machine()}, {args.threads} thread(s); medians per sentence, rounds A B, B A, A B")
    for s in sets:
        a, b = times[("A", s)], times[("B", s)]
        print(f"{s}: A {', '.join(f'{x:.1f}' for x in a)} ms; B {', '.join(f'{x:.1f}' for x in b)} ms; "
              f"B/A {statistics.median(b) / statistics.median(a):.2f}")


if __name__ == "__main__":
    main()
