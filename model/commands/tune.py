"""Choose a checkpoint's beam length penalty on a validation split, and store it.

Beam search compares finished translations of different lengths by
log p / ((5 + length) / 6)^alpha (GNMT). Too small an alpha favours short outputs and
sacrebleu's brevity penalty costs BLEU; too large, long ones. This decodes the split
with beam search once per alpha, prints BLEU, the brevity penalty and the length ratio
for each, and with --write stores the best alpha in the checkpoint's config.json
("decoding"), where the translate and trace CLIs, model.evaluate and the app take it as
their default. Choose on `val`, never on a test split.

  python -m model.tune --checkpoint checkpoints/multi30k-en-de --split val --write
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from tqdm import tqdm

from model.commands import registry as command
from model.commands.shared import add_checkpoint_arg, add_split_args, fail, load_or_exit, read_split
from model.inference.options import ALPHAS, DecodeOptions
from model.inference.pipeline import translate
from model.storage.checkpoint import Checkpoint, write_decoding
from model.training.metrics import corpus_scores

DEFAULT_ALPHAS = (0.6, 1.0, 1.4, 1.8, 2.2, 2.6, 3.0, 3.4)


@dataclass(frozen=True)
class Trial:
    alpha: float
    bleu: float
    brevity: float          # sacrebleu's brevity penalty (1.0: not shorter than the references)
    length_ratio: float     # output length / reference length
    signature: str


def try_alpha(ckpt: Checkpoint, sources: list[str], refs: list[str], alpha: float, beam_size: int,
              on_progress=None) -> Trial:
    opts = DecodeOptions("beam", beam_size=beam_size, alpha=alpha)
    hyps = translate(ckpt, sources, opts, batch_size=64, on_progress=on_progress)
    s = corpus_scores(hyps, refs)
    return Trial(alpha, round(s.bleu, 2), round(s.brevity, 3), round(s.length_ratio, 3), s.bleu_signature)


def best(trials: list[Trial]) -> Trial:
    """The highest BLEU; on a tie the smaller alpha (the milder change)."""
    return max(trials, key=lambda t: (t.bleu, -t.alpha))


def _alphas(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from None
    if not values or not all(ALPHAS[0] <= a <= ALPHAS[1] for a in values):
        raise argparse.ArgumentTypeError(f"expected one or more alphas from {ALPHAS[0]:g} to {ALPHAS[1]:g}")
    return values


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=command.prog("model.tune"), description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_checkpoint_arg(p)
    add_split_args(p, "val")
    p.add_argument("--alphas", type=_alphas, default=list(DEFAULT_ALPHAS),
                   help=f"comma-separated alphas to try (default {','.join(map(str, DEFAULT_ALPHAS))})")
    p.add_argument("--beam-size", type=int, default=4, help="beam width (default 4)")
    p.add_argument("--write", action="store_true", help="store the best alpha in the checkpoint's config.json")
    args = p.parse_args(argv)
    if args.split.startswith("test") and args.write:
        fail(f"choose on a validation split, not {args.split!r}: the test set must stay unseen")
    ckpt = load_or_exit(args)
    sources, refs = read_split(args, ckpt)
    trials = []
    print(f"{ckpt.name} {ckpt.src_lang}->{ckpt.tgt_lang} {args.split}, beam {args.beam_size} "
          f"(now {ckpt.beam_alpha}):\n  alpha   BLEU   brevity  length ratio")
    for alpha in args.alphas:
        with tqdm(total=len(sources), file=sys.stderr, desc=f"alpha {alpha}", unit="sent", leave=False) as bar:
            t = try_alpha(ckpt, sources, refs, alpha, args.beam_size, bar.update)
        trials.append(t)
        print(f"  {t.alpha:5.2f}  {t.bleu:5.2f}  {t.brevity:7.3f}  {t.length_ratio:12.3f}", flush=True)
    chosen = best(trials)
    print(f"best: alpha {chosen.alpha} (BLEU {chosen.bleu}, {chosen.signature})")
    if len(trials) > 1 and chosen.alpha in (min(args.alphas), max(args.alphas)):
        print(f"note: {chosen.alpha} is at the edge of the alphas tried; try some beyond it with --alphas",
              file=sys.stderr)
    if args.write:
        path = write_decoding(args.checkpoint, {
            "alpha": chosen.alpha, "chosen_on": args.split, "beam_size": args.beam_size,
            "bleu_signature": chosen.signature,
            "tried": [{"alpha": t.alpha, "bleu": t.bleu, "brevity": t.brevity, "length_ratio": t.length_ratio}
                      for t in trials]})
        print(f"wrote {path} (decoding.alpha = {chosen.alpha}); run model.evaluate --write-card to refresh the card",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
