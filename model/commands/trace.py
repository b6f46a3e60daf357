"""Write the whole trace of one translation as JSON (format: docs/trace-format.md).

  python -m model.trace --text "A dog runs on the beach." --out trace.json
  python -m model.trace --text "Ein Hund." --checkpoint checkpoints/multi30k-de-en \\
      --reference "A dog." --decode beam --beam-size 4 --out trace.json
  python -m model.trace --text "The animal didn't cross the street." --prefix "Die" --out what-if.json

The JSON holds the source and target tokens, every layer's and head's attention
(encoder self, decoder self, cross), the positional encodings, the masks, and the
per-step decoding records (hypotheses, scores, parents, top-k). With --reference the
attention is that of the reference (teacher forcing), with each reference token's
probability and rank. Exit code 2 and one line on stderr for unusable input.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from model.commands import registry as command
from model.commands.shared import add_checkpoint_arg, add_decode_args, decode_options, fail, load_or_exit, write_json
from model.inference.pipeline import InputError, explain, explanation_json, forced_ids
from model.network.trace import Recording


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=command.prog("model.trace"), description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_checkpoint_arg(p)
    p.add_argument("--text", required=True, help="the sentence to translate")
    p.add_argument("--reference", help="a reference translation to force through the decoder")
    p.add_argument("--prefix", metavar="TEXT",
                   help="force the translation to start with TEXT (e.g. \"Eine Katze\"), then decode on; the JSON's "
                        "decoding.forced names the forced tokens")
    p.add_argument("--out", required=True, help="JSON file to write ('-' for standard output)")
    p.add_argument("--top-k-record", type=int, default=5, help="next-token candidates recorded per step")
    p.add_argument("--stream", action="store_true",
                   help="also record the residual stream, each Add & Norm, the FFN's hidden units and the logits "
                        "(large: the 'stream' key of docs/trace-format.md)")
    add_decode_args(p, default_method="greedy")
    args = p.parse_args(argv)
    ckpt = load_or_exit(args)
    opts = decode_options(args, ckpt, record_steps=True)
    opts = replace(opts, record_top_k=max(1, args.top_k_record))
    try:
        if args.prefix is not None:
            opts = replace(opts, prefix=forced_ids(ckpt, args.prefix))
        ex = explain(ckpt, args.text, opts, reference=args.reference,
                     recording=Recording(scores=True, stream=args.stream))
    except InputError as exc:
        fail(str(exc))
    write_json(args.out, explanation_json(ex, ckpt, opts), f": {ex.output!r}")
    return 0


if __name__ == "__main__":  # `python -m model.trace`
    sys.exit(main())
