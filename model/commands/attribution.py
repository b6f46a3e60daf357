"""What the model used for each token it generated, as JSON (format: docs/trace-format.md, "attribution").

  python -m model.attribution --text "A dog runs on the beach." --out attribution.json
  python -m model.attribution --checkpoint checkpoints/multi30k-de-en --input sentences.de --out de.json

Translates each sentence (greedy unless told otherwise), then scores every source token and
every earlier output token for every generated token by each method: raw attention (per layer
and averaged), rollout through cross-attention, attention x value size, ALTI+, gradient x input
and integrated gradients (--no-integrated skips the slow one). "source_share_alti" holds each
generated token's share from the source by ALTI+ (the rest came from the output so far; a low
share is a known sign of a hallucination). --text writes one object, --input a list, one per line.
Unusable lines (empty, too long) give an object with an "error" and no attribution.

Why this token and not that one (--text only):

  python -m model.attribution --text "The animal didn't cross the street because it was too tired." \
      --position 11 --contrast sie --out why-es.json

scores, for output position I (0: the first output token; the translation's tokens are in the JSON),
what made the model prefer its token to ALT (a piece such as "▁sie", or a word that is one piece)
by gradient x input, integrated gradients and erasure of the difference log p(chosen) - log p(ALT),
under "contrast" (model/analysis/attribution/contrast.py).
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from tqdm import tqdm

from model.analysis.attribution import Cost, attribute, attribution_json
from model.analysis.attribution.contrast import METHODS as CONTRAST_METHODS
from model.analysis.attribution.contrast import alternative_id, contrast, contrast_json
from model.commands import registry as command
from model.commands.shared import add_checkpoint_arg, add_decode_args, decode_options, fail, load_or_exit, write_json
from model.commands.translate import input_lines, read_input
from model.inference.options import DecodeOptions
from model.inference.pipeline import InputError, decode_many, source_ids
from model.storage.checkpoint import Checkpoint


def attribution_of(ckpt: Checkpoint, text: str, opts: DecodeOptions, upto: Cost) -> dict[str, Any]:
    """One sentence: its translation and every method's attribution (or the reason there is none)."""
    try:
        ids = source_ids(ckpt, text)
    except InputError as exc:
        return {"input": text, "error": str(exc)}
    output = decode_many(ckpt, [ids], opts)[0].tokens
    att = attribute(ckpt, ids, output, upto)
    part = attribution_json(att)
    alti = part["methods"].get("alti")
    return {"input": text, "output": ckpt.tgt_tokenizer.decode(output), "checkpoint": ckpt.name,
            "source_share_alti": None if alti is None else alti["source_share"], "attribution": part}


def contrast_of(ckpt: Checkpoint, text: str, opts: DecodeOptions, alternative: str, position: int,
                upto: Cost) -> dict[str, Any]:
    """Why the token at `position` and not `alternative` (exits with one line on unusable input)."""
    ids = source_ids(ckpt, text)
    output = decode_many(ckpt, [ids], opts)[0].tokens
    methods = tuple(m for m in CONTRAST_METHODS if upto >= Cost.INTEGRATED or m != "integrated_gradients")
    try:
        return contrast_json(contrast(ckpt, ids, output, position, alternative_id(ckpt, alternative), methods))
    except InputError as exc:
        fail(str(exc))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=command.prog("model.attribution"), description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_checkpoint_arg(p)
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", help="one sentence")
    source.add_argument("--input", help="a file with one sentence per line (or gzipped, .gz)")
    p.add_argument("--out", required=True, help="JSON file to write ('-' for standard output)")
    p.add_argument("--contrast", metavar="ALT", help="with --position: why the model's token and not ALT")
    p.add_argument("--position", type=int, metavar="I", help="the output position --contrast asks about (0: first)")
    p.add_argument("--no-integrated", action="store_true",
                   help="skip integrated gradients (about ten times slower than all the others together)")
    add_decode_args(p, default_method="greedy")
    args = p.parse_args(argv)
    ckpt = load_or_exit(args)
    opts = decode_options(args, ckpt)
    upto = Cost.GRADIENT if args.no_integrated else Cost.INTEGRATED
    if (args.contrast is None) != (args.position is None):
        fail("--contrast ALT and --position I go together: why the token at position I and not ALT")
    if args.contrast is not None and args.text is None:
        fail("--contrast asks about one sentence: give it with --text")
    if args.text is not None:
        result: Any = attribution_of(ckpt, args.text, opts, upto)
        if "error" in result:
            fail(result["error"])
        if args.contrast is not None:
            result["contrast"] = contrast_of(ckpt, args.text, opts, args.contrast, args.position, upto)
    else:
        try:
            lines = input_lines(read_input(args.input))
        except (OSError, UnicodeDecodeError) as exc:
            fail(f"{args.input}: cannot be read ({exc})")
        result = [attribution_of(ckpt, line, opts, upto)
                  for line in tqdm(lines, file=sys.stderr, desc="attributing", unit="sent")]
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
