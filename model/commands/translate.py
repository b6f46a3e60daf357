"""Translate sentences with a trained checkpoint: one line in, one line out.

  echo "A man rides a bike." | python -m model.translate
  python -m model.translate --checkpoint checkpoints/multi30k-de-en --input de.txt > en.txt

N lines in give N lines out, always: an empty or unusable line gives an empty output
line and a warning on stderr.
"""
from __future__ import annotations

import argparse
import gzip
import sys

from tqdm import tqdm

from model.commands import registry as command
from model.commands.shared import (
    add_checkpoint_arg,
    add_decode_args,
    add_ensemble_arg,
    add_precision_arg,
    decode_options,
    fail,
    load_or_exit,
    with_precision,
)
from model.inference.pipeline import translate


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=command.prog("model.translate"), description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_checkpoint_arg(p)
    add_ensemble_arg(p)
    add_precision_arg(p)
    p.add_argument("--input", help="file with one sentence per line, or gzipped (.gz) (default: standard input)")
    p.add_argument("--batch-size", type=int, default=32, help="sentences decoded together (default 32)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    add_decode_args(p)
    args = p.parse_args(argv)
    if args.batch_size < 1:
        fail("--batch-size must be at least 1")
    ckpt = with_precision(args, load_or_exit(args))
    opts = decode_options(args, ckpt)
    try:
        text = read_input(args.input) if args.input else sys.stdin.read()
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        fail(f"{args.input}: cannot be read ({exc})")

    lines = input_lines(text)

    def warn(i: int, message: str) -> None:
        tqdm.write(f"warning: line {i + 1}: {message}; writing an empty line", file=sys.stderr)

    show = not args.no_progress and len(lines) >= 50
    with tqdm(total=len(lines), disable=not show, file=sys.stderr, unit="sent", desc="translating") as bar:
        outputs = translate(ckpt, lines, opts, args.batch_size, on_error=warn, on_progress=bar.update)
    sys.stdout.write("".join(o + "\n" for o in outputs))
    return 0


def read_input(path: str) -> str:
    """A text file, or a gzipped one (name ending in .gz, as Multi30K and Tatoeba ship)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return f.read()


def input_lines(text: str) -> list[str]:
    """Lines as `wc -l` counts them: split on newline only (str.splitlines would also
    split on form feeds and Unicode separators and shift the output)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]


if __name__ == "__main__":
    sys.exit(main())
