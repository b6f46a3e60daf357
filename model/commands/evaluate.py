"""Score a checkpoint on a test split with sacrebleu (detokenized, cased), greedy and beam.

  python -m model.evaluate --checkpoint checkpoints/multi30k-en-de \\
      --data ../shared/data/multi30k --split test_2016_flickr --beam-size 4
  python -m model.evaluate --checkpoint checkpoints/multi30k-en-de \\
      --data ../shared/data/tatoeba-en-de --split test        # all references of each sentence

Prints cased BLEU (the score), lowercased BLEU, chrF and sentences per second for each search, and
BLEU by the source's length in words (1-5, 6-10, 11-15, 16+), which the model card charts.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from tqdm import tqdm

from model.commands import registry as command
from model.commands.shared import (
    add_checkpoint_arg,
    add_ensemble_arg,
    add_references_arg,
    add_split_args,
    fail,
    load_or_exit,
    read_split_references,
)
from model.inference.options import DecodeOptions
from model.inference.pipeline import translate
from model.storage.card import add_eval_report, write_card
from model.training.metrics import corpus_scores, scores_by_length


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=command.prog("model.evaluate"), description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_checkpoint_arg(p)
    add_ensemble_arg(p)
    add_split_args(p, "test_2016_flickr")
    add_references_arg(p)
    p.add_argument("--beam-size", type=int, default=4, help="beam width scored besides greedy (default 4)")
    p.add_argument("--alpha", type=float,
                   help="GNMT length penalty for beam (default: the checkpoint's, chosen on val by model.tune)")
    p.add_argument("--json", help="also write the scores to this JSON file")
    p.add_argument("--write-card", action="store_true",
                   help="store the scores in the checkpoint (eval_results.json: one report per data and split, "
                        "replacing an older one of the same) and rewrite its README.md")
    args = p.parse_args(argv)
    ckpt = load_or_exit(args)
    src_lang, tgt_lang = ckpt.src_lang, ckpt.tgt_lang
    sources, refs = read_split_references(args, ckpt)
    n_refs = sum(len(r) for r in refs)
    print(f"{args.split}: {len(sources)} sentences, {n_refs} references", file=sys.stderr)
    runs = {"greedy": DecodeOptions("greedy")}
    if args.beam_size > 1:
        alpha = ckpt.beam_alpha if args.alpha is None else args.alpha
        try:
            runs[f"beam {args.beam_size}"] = DecodeOptions("beam", beam_size=args.beam_size, alpha=alpha)
        except ValueError as exc:
            fail(str(exc))
    table = {}
    for name, opts in runs.items():
        start = time.time()
        with tqdm(total=len(sources), file=sys.stderr, desc=name, unit="sent") as bar:
            hyps = translate(ckpt, sources, opts, batch_size=64, on_progress=bar.update)
        seconds = time.time() - start
        scores = corpus_scores(hyps, refs, lowercase_too=True)
        table[name] = {"bleu": round(scores.bleu, 2), "bleu_lowercase": round(scores.bleu_lowercase, 2),
                       "chrf": round(scores.chrf, 2),
                       **({"alpha": opts.alpha} if opts.method == "beam" else {}),
                       "bleu_signature": scores.bleu_signature, "chrf_signature": scores.chrf_signature,
                       "seconds": round(seconds, 1), "sentences_per_second": round(len(sources) / seconds, 1),
                       "by_length": scores_by_length(sources, hyps, refs)}
        print(f"{ckpt.name} {src_lang}->{tgt_lang} {args.split} {name}: {scores}  "
              f"{len(sources) / seconds:.1f} sentences/s")
        print("  BLEU by source length: " + ", ".join(
            f"{row['words']} words {'-' if row['bleu'] is None else row['bleu']} ({row['sentences']})"
            for row in table[name]["by_length"]))
    report = {"checkpoint": ckpt.name, "data": args.data, "split": args.split, "references": args.references,
              "sentences": len(sources), "reference_count": n_refs, "results": table,
              "command": "python -m model.evaluate " + " ".join(argv if argv is not None else sys.argv[1:])}
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    if args.write_card:
        add_eval_report(args.checkpoint, report)
        print(f"wrote {write_card(args.checkpoint)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
