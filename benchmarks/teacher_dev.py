"""Score checkpoints on the teacher's dev set (data/dev, issue 81) as the app decodes (beam 4, the card's
alpha): sacrebleu BLEU and chrF (cased, detokenized, signatures printed), BLEU by source length, BLEU of
the sentences with a rare word, and rare-word coverage (model/inference/lexicon.py: the share of source
content words with a lexicon entry whose translation, on stems, is in the output).

  python -m benchmarks.teacher_dev --checkpoint checkpoints/multi30k-en-de runs/c81-en-de
  python -m benchmarks.teacher_dev --checkpoint checkpoints/multi30k-de-en --direction de-en --save out.tsv.gz

Choose on this set; never train on it.
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

import torch

from model.inference.bulk import translate_corpus
from model.inference.lexicon import Lexicon, coverage
from model.inference.options import DecodeOptions
from model.storage.checkpoint import load_checkpoint
from model.training.metrics import corpus_scores

ROOT = Path(__file__).resolve().parents[1]
LEXICON = ROOT.parent / "shared" / "data" / "everyday-extra" / "lexicon.en-de.tsv.gz"
LENGTHS = ((6, 8), (9, 11), (12, 15))


def read_dev(direction: str) -> list[dict[str, str]]:
    lines = (ROOT / "data" / "dev" / f"teacher.{direction}.tsv").read_text(encoding="utf-8").splitlines()
    head = lines[0].split("\t")
    return [dict(zip(head, line.split("\t"))) for line in lines[1:]]


def score(ckpt_dir: str, rows: list[dict[str, str]], lexicon: Lexicon, beam: int, alpha: float | None = None) -> dict:
    ckpt = load_checkpoint(ckpt_dir)
    ckpt.model.eval()
    alpha = ckpt.beam_alpha if alpha is None else alpha
    t0 = time.time()
    with torch.inference_mode():
        outs = translate_corpus(ckpt, [r["source"] for r in rows], DecodeOptions("beam", beam_size=beam, alpha=alpha))
    seconds = time.time() - t0
    refs = [r["reference"] for r in rows]
    whole = corpus_scores(outs, refs)
    result = {"checkpoint": ckpt_dir, "sentences": len(rows), "beam": beam, "alpha": alpha,
              "bleu": round(whole.bleu, 2), "chrf": round(whole.chrf, 2), "signature": whole.bleu_signature,
              "ms_per_sentence": round(1000 * seconds / len(rows), 1)}
    for lo, hi in LENGTHS:
        picked = [i for i, r in enumerate(rows) if lo <= len(r["source"].split()) <= hi]
        result[f"bleu_{lo}-{hi}_words"] = round(corpus_scores([outs[i] for i in picked],
                                                              [refs[i] for i in picked]).bleu, 2)
    rare = [i for i, r in enumerate(rows) if r.get("rare")]
    result["bleu_rare_sentences"] = round(corpus_scores([outs[i] for i in rare], [refs[i] for i in rare]).bleu, 2)
    share, kept, known = coverage(lexicon, [r["source"] for r in rows], outs)
    result["coverage"] = round(100 * share, 1)
    result["coverage_words"] = f"{kept} of {known}"
    result["outputs"] = outs
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", nargs="+", required=True)
    p.add_argument("--direction", choices=("en-de", "de-en"), help="default: the first checkpoint's")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--alpha", type=float, help="GNMT length penalty (default: each checkpoint's own)")
    p.add_argument("--lexicon", default=str(LEXICON))
    p.add_argument("--save", help="write source, reference and each checkpoint's output here (.tsv or .tsv.gz)")
    p.add_argument("--threads", type=int)
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    if not Path(a.lexicon).is_file():
        sys.exit(f"error: {a.lexicon}: not found (the Ding lexicon of ../shared/data/everyday-extra)")
    direction = a.direction or "{src_lang}-{tgt_lang}".format(**load_checkpoint(a.checkpoint[0]).meta)
    rows = read_dev(direction)
    src, tgt = direction.split("-")
    lexicon = Lexicon.load(a.lexicon, src, tgt)
    results = [score(c, rows, lexicon, a.beam, a.alpha) for c in a.checkpoint]
    for r in results:
        print(json.dumps({k: v for k, v in r.items() if k != "outputs"}))
    if a.save:
        opener = gzip.open if a.save.endswith(".gz") else open
        with opener(a.save, "wt", encoding="utf-8") as f:
            f.write("\t".join(["source", "reference", *a.checkpoint]) + "\n")
            for i, row in enumerate(rows):
                f.write("\t".join([row["source"], row["reference"], *(r["outputs"][i] for r in results)]) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
