"""Does the confidence flag catch the translations a reader calls wrong? Judged by hand.

Step 1 writes a sample of test sentences with the model's translation, the references and the
app's verdict (flagged or not) to a TSV whose `judgment` column is empty:

  .venv/bin/python -m benchmarks.confidence_sample sample --checkpoint checkpoints/multi30k-en-de \\
      --data ../shared/data/tatoeba-en-de:test --data ../shared/data/multi30k:test_2016_flickr \\
      --per-set 30 --out benchmarks/judged/en-de.tsv

A person then reads each row and writes `right` or `wrong` in `judgment` (meaning preserved and
grammatical enough that a reader would accept it: `right`; otherwise `wrong`), without looking at
the verdict column first. Step 2 counts:

  .venv/bin/python -m benchmarks.confidence_sample count benchmarks/judged/en-de.tsv

printing how many of the wrong ones were flagged and how many of the right ones were.
"""
from __future__ import annotations

import argparse
import csv
import random
import sys
from pathlib import Path

from model.commands.calibrate import split_spec
from model.inference.options import DecodeOptions
from model.inference.pipeline import explain
from model.storage.checkpoint import load_checkpoint
from model.training.data import group_references, read_parallel

COLUMNS = ("set", "source", "translation", "references", "p_wrong", "flagged", "judgment")


def sample(args: argparse.Namespace) -> int:
    ckpt = load_checkpoint(args.checkpoint)
    opts = DecodeOptions("beam", beam_size=4, alpha=ckpt.beam_alpha, record_steps=False)
    rows = []
    for directory, split in args.data:
        sources, refs = group_references(*read_parallel(directory, split, ckpt.src_lang, ckpt.tgt_lang))
        picked = random.Random(args.seed).sample(range(len(sources)), args.per_set)
        for i in picked:
            ex = explain(ckpt, sources[i], opts)
            conf = ex.confidence(ckpt)
            rows.append({"set": f"{Path(directory).name}:{split}", "source": sources[i], "translation": ex.output,
                         "references": " | ".join(refs[i]), "p_wrong": f"{conf.p_wrong:.3f}",
                         "flagged": "yes" if conf.flagged else "no", "judgment": ""})
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, COLUMNS, delimiter="\t")
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {len(rows)} rows to {args.out}; fill in the judgment column", file=sys.stderr)
    return 0


def count(args: argparse.Namespace) -> int:
    with open(args.tsv, encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    for name in [*dict.fromkeys(r["set"] for r in rows), "all"]:
        part = [r for r in rows if name in ("all", r["set"])]
        wrong = [r for r in part if r["judgment"] == "wrong"]
        right = [r for r in part if r["judgment"] == "right"]
        flagged_wrong = sum(r["flagged"] == "yes" for r in wrong)
        flagged_right = sum(r["flagged"] == "yes" for r in right)
        print(f"{name}: {len(part)} judged, {len(wrong)} wrong, {len(right)} right; flagged "
              f"{flagged_wrong} of {len(wrong)} wrong, {flagged_right} of {len(right)} right")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.confidence_sample", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample", help="write a sample to judge")
    s.add_argument("--checkpoint", required=True)
    s.add_argument("--data", type=split_spec, action="append", required=True, metavar="DIR:SPLIT")
    s.add_argument("--per-set", type=int, default=30)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", required=True)
    c = sub.add_parser("count", help="count flagged among the judged rows")
    c.add_argument("tsv")
    args = p.parse_args(argv)
    return sample(args) if args.command == "sample" else count(args)


if __name__ == "__main__":
    sys.exit(main())
