"""What a training run is made of, before its first step: the device and processes (CPU, CUDA,
torchrun), the tokenizers, the corpus as token ids, the model's shape. train.py's pieces
(model/commands/train.py parses the arguments; model/training/run.py runs the loop)."""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from model.network.batch import Example
from model.network.config import ModelConfig, preset
from model.network.tokenizer import Tokenizer
from model.network.transformer import Transformer
from model.storage.checkpoint import (
    load_checkpoint,
)
from model.training.data import DataError, make_examples, read_kinds, read_parallel, tagged


# ---- distributed / device --------------------------------------------------------------
@dataclass
class Runtime:
    device: torch.device
    rank: int = 0
    world: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0


def setup_runtime(args: argparse.Namespace) -> Runtime:
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available()):
        device = torch.device("cuda")
    else:
        device = torch.device("cpu")
    if device.type == "cpu" and args.amp == "bf16" and cpu_has_native_bf16() is False:
        print("warning: this CPU has no native bfloat16 (no avx512_bf16 / amx_bf16 in /proc/cpuinfo): "
              "--amp bf16 is emulated here and was measured ~30x slower on such a machine (38 s per step "
              "instead of 1.2 s); --amp off is the fast choice", file=sys.stderr)
    if "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1:
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend)
        rank, world = dist.get_rank(), dist.get_world_size()
        if device.type == "cuda":
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
            torch.cuda.set_device(device)
        return Runtime(device, rank, world)
    return Runtime(device)


def cpu_has_native_bf16(cpuinfo: str | Path = "/proc/cpuinfo") -> bool | None:
    """Whether the CPU computes bfloat16 natively (None: cannot tell, e.g. not Linux)."""
    try:
        flags = Path(cpuinfo).read_text()
    except OSError:
        return None
    return any(f in flags.split() for f in ("avx512_bf16", "amx_bf16"))


# ---- data ----------------------------------------------------------------------------
@dataclass
class Corpus:
    train: list[Example]
    val_src: list[str]
    val_tgt: list[str]
    val: list[Example]
    train_src: list[str] = field(default_factory=list)     # the text, for --subword-alpha's draws
    train_tgt: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)         # sentence | lexicon | back, per pair

    @property
    def lexicon(self) -> set[int]:
        return {i for i, k in enumerate(self.kinds) if k == "lexicon"}


def train_examples(src_tok: Tokenizer, tgt_tok: Tokenizer, cfg: ModelConfig, src: list[str], tgt: list[str],
                   kinds: list[str], max_len: int, alpha: float = 0.0, seed: int = 0) -> list[Example]:
    """The training pairs as ids, each source tagged with its kind; with alpha > 0, every *source* split
    into pieces by sentencepiece's sampling (BPE-dropout: each merge skipped with probability alpha), a new
    split for each seed; the targets keep their best split (sampled target splits raised the shipped
    model's loss from 1.64 to 4.06 nats a token, sampled sources to 2.07: README, "On two cores")."""
    if alpha > 0:
        src_ids, tgt_ids = src_tok.encode_sampled(src, alpha, seed), tgt_tok.encode_many(tgt)
    else:
        src_ids, tgt_ids = src_tok.encode_many(src), tgt_tok.encode_many(tgt)
    return make_examples(tagged(src_ids, kinds, cfg.bos_id, cfg.eos_id), tgt_ids, cfg.bos_id, cfg.eos_id, max_len)


def build_tokenizers(
    args: argparse.Namespace, train_src: list[str], train_tgt: list[str]
) -> tuple[Tokenizer, Tokenizer]:
    if args.tokenizer_from:
        ckpt = load_checkpoint(args.tokenizer_from)
        return ckpt.src_tokenizer, ckpt.tgt_tokenizer
    if args.separate_vocab:
        return Tokenizer.train(train_src, args.vocab_size), Tokenizer.train(train_tgt, args.vocab_size)
    joint = Tokenizer.train(train_src + train_tgt, args.vocab_size)
    return joint, joint


def load_corpus(args: argparse.Namespace, src_tok: Tokenizer, tgt_tok: Tokenizer, cfg: ModelConfig,
                train_src: list[str], train_tgt: list[str]) -> Corpus:
    val_src, val_tgt = read_parallel(args.data, "val", args.src, args.tgt)
    kinds = read_kinds(args.data, "train", len(train_src))
    kept = [i for i, (s, t) in enumerate(zip(train_src, train_tgt)) if s and t]   # make_examples' rule
    train_src, train_tgt, kinds = ([xs[i] for i in kept] for xs in (train_src, train_tgt, kinds))
    train = train_examples(src_tok, tgt_tok, cfg, train_src, train_tgt, kinds, args.max_len)
    val = make_examples(val_tok(src_tok, val_src), val_tok(tgt_tok, val_tgt), cfg.bos_id, cfg.eos_id, args.max_len)
    return Corpus(train, val_src, val_tgt, val, train_src, train_tgt, kinds)


def val_tok(tok: Tokenizer, lines: list[str]) -> list[list[int]]:
    return tok.encode_many(lines)


def model_config(args: argparse.Namespace, src_tok: Tokenizer, tgt_tok: Tokenizer) -> ModelConfig:
    overrides: dict[str, Any] = {k: getattr(args, k) for k in ("d_model", "n_heads", "n_encoder_layers",
                                                               "n_decoder_layers", "d_ff", "dropout")
                                 if getattr(args, k) is not None}
    if src_tok.special_ids != tgt_tok.special_ids:
        raise DataError(f"the source and target tokenizers disagree on special ids: "
                        f"{src_tok.special_ids} vs {tgt_tok.special_ids}")
    return preset(args.preset, src_vocab_size=src_tok.vocab_size, tgt_vocab_size=tgt_tok.vocab_size,
                  tie_embeddings=src_tok.proto == tgt_tok.proto, norm_first=args.norm_first,
                  max_positions=max(256, args.max_len + 2), **src_tok.special_ids, **overrides)


def with_dropout(model: Transformer, dropout: float) -> Transformer:
    """The same weights in a model whose dropout rate is `dropout` (the only setting of the
    shape that --init-from may change: it has no weights of its own)."""
    if dropout == model.cfg.dropout:
        return model
    changed = Transformer(replace(model.cfg, dropout=dropout))
    changed.load_state_dict(model.state_dict())          # strict: same shapes
    return changed


