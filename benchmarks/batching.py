"""Decoding a class's sentences one by one vs batched (app/batching.py), in one process.

N threads (students) ask at the same moment for their own sentence's explanation, as the
app's first pages do: beam 4 with per-step records, then the explanation read from them
(`pipeline.WEIGHTS`; a teacher-forced pass before session 51).
"alone": each decodes by itself (max batch 1); "batched": through one Batcher (max batch 16,
20 ms window), as `app/resources.get_explanation` does. Reported: the wall time until every
student has theirs, and the per-student latency p50 / p95; rounds alternate A B A B.

  .venv/bin/python -m benchmarks.batching --students 15 --rounds 3 --threads 1
"""
from __future__ import annotations

import argparse
import statistics
import threading
import time

import torch

from benchmarks.class_load import SENTENCES
from model.inference.options import DecodeOptions
from model.inference.pipeline import WEIGHTS, decode_many, explain_decoded, source_ids
from model.storage.checkpoint import load_checkpoint
from serving.batching import Batcher


def one_round(ckpt, texts: list[str], opts: DecodeOptions, max_batch: int) -> tuple[float, list[float]]:
    batcher = Batcher(lambda group, ids: decode_many(ckpt, ids, opts), max_batch=max_batch,
                      window=0.02 if max_batch > 1 else 0.0)
    latencies: list[float] = []
    start = time.perf_counter()

    def student(text: str) -> None:
        ids = source_ids(ckpt, text)
        explain_decoded(ckpt, text, ids, batcher("g", ids), recording=WEIGHTS)
        latencies.append(time.perf_counter() - start)
    threads = [threading.Thread(target=student, args=(t,)) for t in texts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    return time.perf_counter() - start, sorted(latencies)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", default="checkpoints/multi30k-en-de")
    p.add_argument("--students", type=int, default=15, help="concurrent sentences (one app process's share)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="torch threads (deploy/serve.py gives each process 1 of 2)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    ckpt = load_checkpoint(args.checkpoint)
    opts = DecodeOptions("beam", beam_size=4, alpha=ckpt.beam_alpha, record_steps=True, record_top_k=8)
    texts = [SENTENCES[i % len(SENTENCES)] for i in range(args.students)]
    one_round(ckpt, texts[:2], opts, 16)                                  # warm-up
    rows = {"alone": [], "batched": []}
    for _ in range(args.rounds):
        for name, max_batch in (("alone", 1), ("batched", 16)):
            rows[name].append(one_round(ckpt, texts, opts, max_batch))
    print(f"{args.students} students, {args.checkpoint}, beam 4 with records, {args.threads} torch thread(s):")
    for name, runs in rows.items():
        walls = [w for w, _ in runs]
        p50 = [statistics.median(lat) for _, lat in runs]
        p95 = [lat[min(len(lat) - 1, int(0.95 * len(lat)))] for _, lat in runs]
        print(f"  {name:8s} all done {statistics.median(walls):.2f} s (rounds {', '.join(f'{w:.2f}' for w in walls)}); "
              f"latency p50 {statistics.median(p50):.2f} s, p95 {statistics.median(p95):.2f} s")
    ratio = statistics.median(w for w, _ in rows["alone"]) / statistics.median(w for w, _ in rows["batched"])
    print(f"  batched is {ratio:.1f}x faster to serve them all")


if __name__ == "__main__":
    main()
