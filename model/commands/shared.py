"""Pieces shared by the command-line tools: decoding flags, checkpoint loading, errors."""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys

import torch

from model.inference.ensemble import Ensemble
from model.inference.options import BEAM_SIZES, LENGTH_PENALTIES, METHODS, DecodeOptions
from model.inference.precision import FP32, PRECISIONS, available, quantized
from model.storage import places
from model.storage.checkpoint import Checkpoint, CheckpointError, load_checkpoint
from model.training.data import DataError, group_references, read_parallel

DEFAULT_CHECKPOINT = places.DEFAULT_CHECKPOINT


def add_checkpoint_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT,
                   help=f"checkpoint directory, or the name of one among the shipped and your own "
                        f"(model/storage/places.py; default {DEFAULT_CHECKPOINT})")
    p.add_argument("--threads", type=int, help="CPU threads for torch (default: torch's choice)")


def add_ensemble_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ensemble", nargs="+", metavar="DIR", default=[],
                   help="more checkpoints decoded together with --checkpoint (the mean of their next-token "
                        "probabilities; same vocabulary); --checkpoint gives the tokenizer and the alpha")


def add_precision_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--precision", choices=("served", *PRECISIONS), default="served",
                   help="how the model computes: fp32, or a faster scheme of model/inference/precision.py; "
                        "default: the checkpoint's own choice (config.json \"precision\", from `python -m "
                        "model.precision --write`), as the app serves it. An --ensemble computes in fp32")


def with_precision(args: argparse.Namespace, ckpt: Checkpoint) -> Checkpoint:
    """The checkpoint whose model computes at --precision (a copy; the fp32 model is untouched)."""
    chosen = ckpt.precision if args.precision == "served" else args.precision
    if chosen == FP32 or getattr(args, "ensemble", None):
        return ckpt
    if not available(chosen):
        fail(f"--precision {chosen}: this PyTorch has no oneDNN (torch.backends.mkldnn); use --precision fp32")
    return dataclasses.replace(ckpt, model=quantized(ckpt.model, chosen))


def add_split_args(p: argparse.ArgumentParser, default_split: str) -> None:
    """--data, --split and --limit: the parallel sentences a tool scores on."""
    p.add_argument("--data", default="../shared/data/multi30k", help="Multi30K-style directory")
    p.add_argument("--split", default=default_split, help=f"split name (default {default_split})")
    p.add_argument("--limit", type=int, help="only the first N sentences")


def read_split(args: argparse.Namespace, ckpt: Checkpoint) -> tuple[list[str], list[str]]:
    """The sources and references of --split in the checkpoint's languages (exits on a data error)."""
    try:
        sources, refs = read_parallel(args.data, args.split, ckpt.src_lang, ckpt.tgt_lang)
    except DataError as exc:
        fail(str(exc))
    return sources[: args.limit], refs[: args.limit]


def add_references_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--references", choices=("all", "line"), default="all",
                   help="all: lines that share a source are one sentence, translated once and scored against "
                        "all their targets (Tatoeba has several translations per sentence); line: every line "
                        "on its own, against its own target (default all; the same when no source repeats)")


def read_split_references(args: argparse.Namespace, ckpt: Checkpoint) -> tuple[list[str], list[list[str]]]:
    """read_split, grouped by source when --references all (--limit counts lines before grouping)."""
    sources, refs = read_split(args, ckpt)
    if args.references == "all":
        return group_references(sources, refs)
    return sources, [[r] for r in refs]


def add_decode_args(p: argparse.ArgumentParser, default_method: str = "beam") -> None:
    """Decoding flags; choices and defaults are DecodeOptions' own."""
    d = DecodeOptions()
    g = p.add_argument_group("decoding")
    g.add_argument("--decode", default=default_method, choices=METHODS,
                   help=f"search method (default {default_method})")
    g.add_argument("--beam-size", type=int, default=d.beam_size,
                   help=f"beam width, {BEAM_SIZES[0]}-{BEAM_SIZES[1]} (default {d.beam_size})")
    g.add_argument("--length-penalty", default=d.length_penalty, choices=LENGTH_PENALTIES,
                   help=f"beam score normalisation: gnmt = logp / ((5+n)/6)^alpha, "
                        f"average = logp / n, none = logp (default {d.length_penalty})")
    g.add_argument("--alpha", type=float,
                   help=f"GNMT length penalty exponent (default: the checkpoint's, chosen on val by "
                        f"model.tune; {d.alpha} for a checkpoint without one)")
    g.add_argument("--no-repeat-ngram", type=int, default=d.no_repeat_ngram, metavar="N",
                   help="forbid any N subword tokens in a row from occurring twice in an output (default 0: off)")
    g.add_argument("--temperature", type=float, default=d.temperature,
                   help=f"sampling temperature (default {d.temperature})")
    g.add_argument("--top-k", type=int, default=d.top_k, help="sampling: only the k likeliest tokens (0: all)")
    g.add_argument("--top-p", type=float, default=d.top_p,
                   help=f"sampling: nucleus probability mass (default {d.top_p})")
    g.add_argument("--seed", type=int, default=d.seed, help=f"sampling seed (default {d.seed})")


def decode_options(args: argparse.Namespace, ckpt: Checkpoint, record_steps: bool = False) -> DecodeOptions:
    """The decoding flags as DecodeOptions; --alpha not given: the checkpoint's own."""
    try:
        return DecodeOptions(method=args.decode, beam_size=args.beam_size, length_penalty=args.length_penalty,
                             alpha=ckpt.beam_alpha if args.alpha is None else args.alpha,
                             no_repeat_ngram=args.no_repeat_ngram, temperature=args.temperature, top_k=args.top_k,
                             top_p=args.top_p, seed=args.seed, record_steps=record_steps)
    except ValueError as exc:
        fail(str(exc))


def load_or_exit(args: argparse.Namespace) -> Checkpoint:
    """--checkpoint, or with --ensemble (tools that offer it) all of them as one Ensemble."""
    if args.threads:
        torch.set_num_threads(args.threads)
    args.checkpoint = str(places.resolve(args.checkpoint))
    try:
        ckpt = load_checkpoint(args.checkpoint)
        others = [load_checkpoint(places.resolve(d)) for d in getattr(args, "ensemble", [])]
    except CheckpointError as exc:
        known = ", ".join(places.known_names())
        fail(f"{exc} (known checkpoints: {known or 'none'})")
    if not others:
        return ckpt
    for d, other in zip(args.ensemble, others):
        if _tokenizer_protos(other) != _tokenizer_protos(ckpt):
            fail(f"{d}: its tokenizer differs from {args.checkpoint}'s; an ensemble needs one vocabulary")
    try:
        model = Ensemble([ckpt.model] + [o.model for o in others])
    except ValueError as exc:
        fail(str(exc))
    return dataclasses.replace(ckpt, model=model)


def _tokenizer_protos(ckpt: Checkpoint) -> tuple[bytes, bytes]:
    return ckpt.src_tokenizer.proto, ckpt.tgt_tokenizer.proto


def write_json(out: str, value: object, said: str = "") -> None:
    """Write `value` as JSON to the file `out` ('-': standard output); exits with one line if it
    cannot be written; then "wrote OUT" (and `said`) on stderr."""
    text = json.dumps(value, ensure_ascii=False)
    if out == "-":
        sys.stdout.write(text + "\n")
        return
    try:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        fail(f"{out}: cannot be written ({exc})")
    print(f"wrote {out}{said}", file=sys.stderr)


def fail(message: str) -> "NoReturn":  # noqa: F821
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)
