"""Checkpoint directories.

    config.json          {"format", "model": ModelConfig, "tokenizer": {...}, "src_lang", "tgt_lang", ...}
    model.safetensors    weights (tied embeddings stored once); never a pickle
    spm.model            sentencepiece model (joint vocabulary), or spm.src.model + spm.tgt.model
    vocab.json           (optional) piece -> id, shared by both sentencepiece models (imported Marian models)
    config.json "decoding"  (optional) {"alpha": ...}: the beam length penalty chosen on val (model/commands/tune.py)
    config.json "confidence"  (optional) when to distrust a translation, fitted on val (model/commands/calibrate.py)
    familiar_words.txt   (optional) the words of the training sources (model/inference/confidence.py)
    training_log.jsonl   one JSON line per epoch (written by train.py)
    README.md            model card
    attention_snapshots.json  (optional) attention of a few fixed sentences per epoch

Where checkpoints are found: model/storage/places.py. Every problem with a checkpoint is raised as
`CheckpointError` with one line that names the file.
"""
from __future__ import annotations

import copy
import errno
import functools
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_model, save_model

from model.inference.confidence import Calibration, read_familiar_words
from model.inference.lexicon import LEXICON_FILE, Lexicon
from model.inference.options import DecodeOptions
from model.network.config import ModelConfig
from model.network.tokenizer import Tokenizer
from model.network.transformer import Transformer

FORMAT = "transformer-checkpoint/1"
DEFAULT_ALPHA = DecodeOptions.alpha     # for a checkpoint with no "decoding" entry
WEIGHTS = "model.safetensors"
CONFIG = "config.json"
VOCAB = "vocab.json"


class CheckpointError(Exception):
    """A checkpoint that cannot be used; the message is one line naming the file."""


@dataclass
class Checkpoint:
    model: Transformer
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    path: Path | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def config(self) -> ModelConfig:
        return self.model.cfg

    @property
    def name(self) -> str:
        return self.path.name if self.path else "(unsaved)"

    @property
    def src_lang(self) -> str:
        return self.meta.get("src_lang", "src")

    @property
    def tgt_lang(self) -> str:
        return self.meta.get("tgt_lang", "tgt")

    familiar_words: frozenset[str] | None = None   # familiar_words.txt, read once at load

    @functools.cached_property
    def calibration(self) -> Calibration | None:
        """When to flag a translation (config.json "confidence", from `python -m model.calibrate`);
        read once: every translation the app shows asks for it."""
        entry = self.meta.get("confidence")
        return Calibration.from_dict(entry) if entry else None

    @property
    def lexicon(self) -> Lexicon | None:
        """The source words' translations (`lexicon.tsv.gz`, issue 81) the notice checks the output
        against; read once per process and file, on first use (~1-3 s; the app's loader reads it while
        warming up), shared by copies of the checkpoint; None when the checkpoint has none."""
        path = self.path / LEXICON_FILE if self.path else None
        return _lexicon_at(str(path)) if path is not None and path.is_file() else None

    @property
    def precision(self) -> str:
        """How the app serves this checkpoint (config.json "precision", written by `python -m model.precision
        --write`): "fp32" or a scheme of model/inference/precision.py."""
        return str(self.meta.get("precision", {}).get("scheme", "fp32"))

    @property
    def beam_alpha(self) -> float:
        """The beam's GNMT length-penalty exponent this checkpoint was tuned for
        (config.json "decoding", written by `python -m model.tune`), else DecodeOptions' default."""
        return float(self.meta.get("decoding", {}).get("alpha", DEFAULT_ALPHA))


@functools.lru_cache(maxsize=8)
def _lexicon_at(path: str) -> Lexicon:
    return Lexicon.read(path)


def write_decoding(directory: str | Path, decoding: dict[str, Any]) -> Path:
    """Store decoding defaults (e.g. {"alpha": 1.5, "chosen_on": "val", ...}) in a
    checkpoint's config.json, written atomically."""
    return write_config_entry(directory, "decoding", decoding)


def write_config_entry(directory: str | Path, key: str, value: Any) -> Path:
    """Set one top-level entry of a checkpoint's config.json, written atomically."""
    config = read_config(directory)
    config[key] = value
    path = Path(directory) / CONFIG
    tmp = path.with_name(f".{CONFIG}.{os.getpid()}")
    tmp.write_text(json.dumps(config, indent=2) + "\n")
    tmp.replace(path)
    return path


def save_checkpoint(directory: str | Path, model: Transformer, src_tokenizer: Tokenizer,
                    tgt_tokenizer: Tokenizer, meta: dict[str, Any] | None = None,
                    half: bool = False, extra_files: dict[str, str] | None = None) -> Path:
    """Write the checkpoint atomically: into a sibling temporary directory, then rename.

    half: store the weights as float16 (they are loaded back as float32).
    extra_files: name -> text content (training log, model card, snapshots).
    """
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    tmp.chmod(0o755)                                   # mkdtemp makes it private
    try:
        _write(tmp, model, src_tokenizer, tgt_tokenizer, meta, half, extra_files)
    except SafetensorError as exc:         # a full disk, say: an OSError like any other write's
        shutil.rmtree(tmp, ignore_errors=True)
        code = errno.ENOSPC if "os error 28" in str(exc) else errno.EIO
        raise OSError(code, os.strerror(code), str(directory)) from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)     # nothing half-written is left beside the checkpoints
        raise
    _replace_dir(tmp, directory)
    return directory


def _write(tmp: Path, model: Transformer, src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer,
           meta: dict[str, Any] | None, half: bool, extra_files: dict[str, str] | None) -> None:
    """A checkpoint's files into the directory tmp."""
    joint = src_tokenizer.proto == tgt_tokenizer.proto
    tok_files = {"src": "spm.model", "tgt": "spm.model"} if joint else {"src": "spm.src.model", "tgt": "spm.tgt.model"}
    if src_tokenizer.vocab != tgt_tokenizer.vocab:
        raise ValueError("the source and target tokenizers must share one vocabulary (or both have none)")
    if src_tokenizer.vocab is not None:
        tok_files["vocab"] = VOCAB
        (tmp / VOCAB).write_text(json.dumps(src_tokenizer.vocab, ensure_ascii=False) + "\n")
    config = {"format": FORMAT, **(meta or {}), "model": model.cfg.to_dict(),
              "tokenizer": {"joint": joint, **tok_files}, "weights_dtype": "float16" if half else "float32"}
    (tmp / CONFIG).write_text(json.dumps(config, indent=2) + "\n")
    src_tokenizer.save(tmp / tok_files["src"])
    tgt_tokenizer.save(tmp / tok_files["tgt"])
    to_save = copy.deepcopy(model).half() if half else model
    save_model(to_save, str(tmp / WEIGHTS), metadata={"format": FORMAT})
    for name, text in (extra_files or {}).items():
        (tmp / name).write_text(text)


def save_weights(path: str | Path, model: Transformer) -> Path:
    """Only the weights (e.g. one epoch's, for averaging), tied tensors stored once."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_model(model, str(path), metadata={"format": FORMAT})
    return path


def load_weights(path: str | Path, cfg: ModelConfig) -> Transformer:
    """A model of shape cfg with the weights of `path`, loaded strictly (every tensor
    present, none extra). Raises CheckpointError."""
    model = Transformer(cfg)
    try:
        load_model(model, str(path), strict=True)
    except (SafetensorError, RuntimeError, OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: cannot be loaded ({_one_line(exc)})") from None
    return model.float().eval()


def _replace_dir(tmp: Path, directory: Path) -> None:
    old = None
    if directory.exists():
        old = directory.with_name(f".{directory.name}.old.{os.getpid()}")
        directory.rename(old)
    tmp.rename(directory)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def read_config(directory: str | Path) -> dict[str, Any]:
    path = Path(directory) / CONFIG
    if not Path(directory).is_dir():
        raise CheckpointError(f"{directory}: no such checkpoint directory")
    if not path.is_file():
        raise CheckpointError(f"{path}: missing (not a checkpoint directory?)")
    try:
        config = json.loads(path.read_text())
        ModelConfig.from_dict(config["model"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{path}: not a valid checkpoint config ({_one_line(exc)})") from None
    return config


def load_checkpoint(directory: str | Path, device: str | torch.device = "cpu") -> Checkpoint:
    """Load a checkpoint directory in eval mode. Raises CheckpointError."""
    directory = Path(directory)
    config = read_config(directory)
    cfg = ModelConfig.from_dict(config["model"])
    tok = config.get("tokenizer", {})
    vocab = _load_vocab(directory / tok["vocab"]) if "vocab" in tok else None
    src_tok = _load_tokenizer(directory / tok.get("src", "spm.model"), vocab)
    tgt_tok = src_tok if tok.get("joint", True) else _load_tokenizer(directory / tok.get("tgt", "spm.model"), vocab)
    for side, t, size in (("source", src_tok, cfg.src_vocab_size), ("target", tgt_tok, cfg.tgt_vocab_size)):
        if t.vocab_size != size:
            raise CheckpointError(f"{directory / tok.get('src' if side == 'source' else 'tgt', 'spm.model')}: "
                                  f"{side} tokenizer has {t.vocab_size} pieces, config.json says {size}")
    weights = directory / WEIGHTS
    if not weights.is_file():
        raise CheckpointError(f"{weights}: missing")
    model = load_weights(weights, cfg).to(device)
    meta = {k: v for k, v in config.items() if k not in ("model", "tokenizer")}
    return Checkpoint(model, src_tok, tgt_tok, directory, meta, read_familiar_words(directory))


def _load_vocab(path: Path) -> dict[str, int]:
    try:
        vocab = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: not a readable vocabulary ({_one_line(exc)})") from None
    if not isinstance(vocab, dict) or not all(isinstance(v, int) for v in vocab.values()):
        raise CheckpointError(f"{path}: expected a JSON object of piece -> id")
    return vocab


def _load_tokenizer(path: Path, vocab: dict[str, int] | None = None) -> Tokenizer:
    if not path.is_file():
        raise CheckpointError(f"{path}: missing tokenizer model")
    try:
        return Tokenizer.load(path, vocab)
    except (RuntimeError, OSError) as exc:
        raise CheckpointError(f"{path}: not a sentencepiece model ({_one_line(exc)})") from None


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
