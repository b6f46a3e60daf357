"""The end of a run: which weights to ship. The best epoch on val against the mean of the last
epochs' weights, each translated greedily on val; the higher BLEU is written to OUT with its
log, its attention snapshots and a model card."""
from __future__ import annotations

import sys
from pathlib import Path

import torch

from model.inference.bulk import translate_corpus
from model.inference.options import DecodeOptions
from model.network.config import ModelConfig
from model.network.tokenizer import Tokenizer
from model.network.transformer import Transformer
from model.storage.checkpoint import (
    Checkpoint,
    load_checkpoint,
    load_weights,
)
from model.training.metrics import Scores, corpus_scores


def average_epochs(cfg: ModelConfig, work: Path, last_epoch: int, n: int) -> Transformer | None:
    """The mean of the last n epochs' weights (each loaded strictly), or None."""
    paths = [work / f"epoch-{e}.safetensors" for e in range(last_epoch - n + 1, last_epoch + 1)]
    if n < 2 or not all(p.is_file() for p in paths):
        return None
    states = [load_weights(p, cfg).state_dict() for p in paths]
    model = Transformer(cfg)
    model.load_state_dict({k: sum(s[k] for s in states) / n for k in states[0]})   # strict
    return model.eval()


def as_checkpoint(model: Transformer, src_tok: Tokenizer, tgt_tok: Tokenizer) -> Checkpoint:
    return Checkpoint(model.eval(), src_tok, tgt_tok)


def translate_greedy(ckpt: Checkpoint, texts: list[str]) -> list[str]:
    """Greedy translations in input order, all on the model's device (model/inference/bulk.py: the same
    choices as the library's `translate`, without its per-sentence records)."""
    return translate_corpus(ckpt, texts, DecodeOptions("beam", beam_size=1))


def candidate_weights(work: Path, cfg: ModelConfig, last_epoch: int, n: int) -> dict[str, Transformer]:
    """The best epoch's weights and, when the last n epochs were all kept, their mean."""
    candidates = {"best epoch": load_checkpoint(work / "best").model}
    averaged = average_epochs(cfg, work, last_epoch, n)
    if averaged is not None:
        candidates[f"average of last {n} epochs"] = averaged
    return candidates


def choose(candidates: dict[str, Transformer], src_tok: Tokenizer, tgt_tok: Tokenizer, val_src: list[str],
           val_tgt: list[str], device: torch.device) -> tuple[str, dict[str, Scores]]:
    """The candidate with the highest greedy BLEU on val, and every candidate's scores."""
    results = {}
    for name, m in candidates.items():
        hyps = translate_greedy(as_checkpoint(m.to(device), src_tok, tgt_tok), val_src)
        results[name] = corpus_scores(hyps, val_tgt)
        print(f"val {name}: {results[name]}", file=sys.stderr)
    return max(results, key=lambda k: results[k].bleu), results
