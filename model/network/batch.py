"""A batch as the network reads it: token ids of sentence pairs, padded into two tensors.

    src (B, S): source ids, then EOS, then padding
    tgt (B, T): BOS, target ids, EOS, then padding (the decoder reads tgt[:, :-1] and predicts tgt[:, 1:])
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class Example:
    src: list[int]  # source ids followed by eos
    tgt: list[int]  # bos, target ids, eos


def collate(examples: list[Example], pad: int) -> tuple[Tensor, Tensor]:
    """-> src (B, S), tgt (B, T) padded with pad."""
    s = max(len(e.src) for e in examples)
    t = max(len(e.tgt) for e in examples)
    src = torch.full((len(examples), s), pad, dtype=torch.long)
    tgt = torch.full((len(examples), t), pad, dtype=torch.long)
    for i, e in enumerate(examples):
        src[i, : len(e.src)] = torch.tensor(e.src)
        tgt[i, : len(e.tgt)] = torch.tensor(e.tgt)
    return src, tgt
