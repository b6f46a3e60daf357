"""Shared fixtures: tiny models and tokenizers made on the spot (no data needed)."""
from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from model.config import preset
from model.tokenizer import Tokenizer
from model.transformer import Transformer

ROOT = Path(__file__).resolve().parent.parent
MULTI30K = ROOT.parent / "shared" / "data" / "multi30k"
WORDS = "a the dog cat man woman runs sits on in park street red blue ball big small child plays".split()


def tiny_model(vocab: int = 40, seed: int = 0, **overrides) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(preset("tiny", src_vocab_size=vocab, tgt_vocab_size=vocab, **overrides)).eval()


def random_batch(vocab: int, lengths: list[int], seed: int = 0, bos: bool = False) -> torch.Tensor:
    """Padded (B, max(lengths)) ids in 4..vocab-1; EOS (3) last, or BOS (2) first."""
    g = torch.Generator().manual_seed(seed)
    out = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    for i, n in enumerate(lengths):
        out[i, :n] = torch.randint(4, vocab, (n,), generator=g)
        if bos:
            out[i, 0] = 2
        else:
            out[i, n - 1] = 3
    return out


def sentences(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8))) for _ in range(n)]


@pytest.fixture(scope="session")
def tokenizer() -> Tokenizer:
    return Tokenizer.train(sentences(400), vocab_size=60)
