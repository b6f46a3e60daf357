"""A first page's model work in one process (issue 53): a batch of new sentences decoded as the app decodes them
(beam 4 with step records, the served copy, one torch thread), then each sentence's explanation as the app makes it.

  .venv/bin/python -m benchmarks.first_page_model --build before=/tmp/old-worktree --build now=. --rounds 2

Each build is measured in a process of its own, its code imported from its directory, rounds alternating A B A B.
A child decodes --batches batches of --batch sentences (benchmarks/sentences/distinct-en.txt, every batch new ones,
after one batch of warm-up) and times, on its CPU clock, the decoding and then the explanations: read from the
search's records where the build can (`pipeline.WEIGHTS`, session 51), else a teacher-forced pass with the scores
(what the app did before). Printed per build: the median over batches of each, in ms a sentence. Nothing else
should run meanwhile.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SENTENCES = ROOT / "benchmarks" / "sentences" / "distinct-en.txt"


def measure(build: Path, checkpoint: str, batch: int, batches: int) -> dict:
    """In a child process: the build's own code on the build's own checkpoint."""
    sys.path.insert(0, str(build))
    import torch

    from model.inference import pipeline
    from model.inference.options import DecodeOptions
    from model.inference.precision import FP32, available, quantized
    from model.storage.checkpoint import load_checkpoint
    torch.set_num_threads(1)
    ckpt = load_checkpoint(build / "checkpoints" / checkpoint)
    if ckpt.precision != FP32 and available(ckpt.precision):
        ckpt = dataclasses.replace(ckpt, model=quantized(ckpt.model, ckpt.precision))
    recording = getattr(pipeline, "WEIGHTS", pipeline.SCORES)
    opts = DecodeOptions("beam", 4, alpha=ckpt.beam_alpha, record_steps=True, record_top_k=8)
    texts = SENTENCES.read_text().splitlines()
    if len(texts) < (batches + 1) * batch:
        raise SystemExit(f"{SENTENCES} has {len(texts)} sentences: fewer than {(batches + 1) * batch}")
    decode, explain = [], []
    for i in range(batches + 1):                    # the first batch warms up
        chunk = texts[i * batch:(i + 1) * batch]
        ids = [pipeline.source_ids(ckpt, t) for t in chunk]
        start = time.process_time()
        results = pipeline.decode_many(ckpt, ids, opts)
        mid = time.process_time()
        for text, one, result in zip(chunk, ids, results):
            pipeline.explain_decoded(ckpt, text, one, result, recording=recording)
        end = time.process_time()
        if i:
            decode.append((mid - start) / batch * 1000)
            explain.append((end - mid) / batch * 1000)
    return {"decode": statistics.median(decode), "explain": statistics.median(explain),
            "read": recording != pipeline.SCORES}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", action="append", required=True, metavar="NAME=DIR",
                   help="a build to measure: a name and its checkout (repeat; e.g. before=/tmp/old now=.)")
    p.add_argument("--rounds", type=int, default=2, help="rounds; each measures every build once (default 2)")
    p.add_argument("--batch", type=int, default=16, help="sentences a batch (default 16, the app's largest)")
    p.add_argument("--batches", type=int, default=8, help="batches measured a round (default 8)")
    p.add_argument("--checkpoint", default="multi30k-en-de")
    p.add_argument("--measure", metavar="DIR", help=argparse.SUPPRESS)     # a child's own work
    args = p.parse_args()
    if args.measure:
        print(json.dumps(measure(Path(args.measure).resolve(), args.checkpoint, args.batch, args.batches)))
        return
    builds = dict(b.split("=", 1) for b in args.build)
    got: dict[str, list[dict]] = {name: [] for name in builds}
    for r in range(args.rounds):
        order = list(builds) if r % 2 == 0 else list(builds)[::-1]
        for name in order:
            out = subprocess.run([sys.executable, "-m", "benchmarks.first_page_model", "--build", "x=.",
                                  "--measure", builds[name], "--batch", str(args.batch), "--batches",
                                  str(args.batches), "--checkpoint", args.checkpoint],
                                 cwd=ROOT, capture_output=True, text=True, check=True)
            got[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"round {r + 1} {name}: {got[name][-1]}", flush=True)
    print(f"ms a sentence, batches of {args.batch}, medians of {args.rounds} rounds of {args.batches} batches:")
    print("| build | beam 4 with records | the explanation | together |\n|---|---|---|---|")
    for name, runs in got.items():
        d, e = (statistics.median(x[k] for x in runs) for k in ("decode", "explain"))
        how = "read from the search" if runs[0]["read"] else "a teacher-forced pass"
        print(f"| {name} | {d:.1f} | {e:.1f} ({how}) | {d + e:.1f} |")


if __name__ == "__main__":
    main()
