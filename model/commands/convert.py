"""Marian / OPUS-MT models in (from a folder or by hub name), ours out: the command of
model/storage/convert.py (which holds the conversion and its documentation).

  python -m model.convert from-hf Helsinki-NLP/opus-mt-en-de
  python -m model.convert to-hf checkpoints/multi30k-en-de --out exported/en-de
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from model.commands import registry as command
from model.storage import hub, places
from model.storage.convert import ConvertError, export_marian, import_marian
from model.storage.convert import __doc__ as CONVERT_DOC
from model.storage.hub import HubError


def source_and_out(source: str, out: str | None) -> tuple[Path, Path]:
    """The Marian directory to read (fetched first when `source` is a hub name) and the checkpoint to
    write (default: the model's name in the user's checkpoints). Raises HubError."""
    if hub.is_repo_id(source):
        directory, name = hub.fetch(source), hub.local_name(source)
    else:
        directory, name = Path(source), Path(source).resolve().name
        if not directory.is_dir():
            raise ConvertError(f"{source}: no such directory, and not a hub name (names look like "
                               "Helsinki-NLP/opus-mt-en-de)")
    return directory, Path(out) if out else places.user_dir() / name


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=command.prog("model.convert"), description=CONVERT_DOC,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("from-hf", help="a Marian model (a directory, or a hub name) -> our checkpoint")
    a.add_argument("directory", help="a Hugging Face Marian model directory (config.json, model.safetensors, "
                                     "source.spm, target.spm, vocab.json), or a hub name such as "
                                     "Helsinki-NLP/opus-mt-en-de")
    a.add_argument("--out", help="checkpoint directory to write (default: NAME in your checkpoints directory, "
                                 f"now {places.user_dir()})")
    a.add_argument("--src-lang", help="source language code (default: tokenizer_config.json's source_lang)")
    a.add_argument("--tgt-lang", help="target language code (default: tokenizer_config.json's target_lang)")
    b = sub.add_parser("to-hf", help="our checkpoint -> a directory MarianMTModel and MarianTokenizer load")
    b.add_argument("checkpoint", help="our checkpoint directory, e.g. checkpoints/multi30k-en-de")
    b.add_argument("--out", required=True, help="directory to write")
    args = p.parse_args(argv)
    try:
        if args.command == "from-hf":
            written = import_marian(*source_and_out(args.directory, args.out), args.src_lang, args.tgt_lang)
        else:
            written = export_marian(args.checkpoint, args.out)
    except (ConvertError, HubError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {written}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
