"""Several trained models decoded as one: each step's next-token distribution is the
average of the members' probabilities (the usual ensemble of NMT, e.g. fairseq's).

    ensemble = Ensemble([a.model, b.model])          # same vocabulary and special ids
    decode(ensemble, src, DecodeOptions("beam"))     # greedy and beam search as for one model

`Ensemble` offers what `model.decoding.decode` asks of a Transformer: `cfg`, `src_mask`,
`encode`, `decode` (with a `DecoderCache`) and `project`. The members' encoder outputs and
decoder states travel side by side along the last dimension, and the cache holds every
member's decoder layers one after the other, so beam search reorders them all at once.
`project` returns the log of the averaged probabilities; `output_log_probs` then hides the
padding and start symbols and renormalises, as for one model.

Used for sequence-level distillation (`python -m model.translate --ensemble`): an ensemble
translates the training sources, and one model trains on its outputs. It cannot be traced
or have heads knocked out: those show one model's attention.
"""
from __future__ import annotations

import math
from dataclasses import replace

import torch
from torch import Tensor, nn

from model.network.layers import DecoderCache
from model.network.trace import Trace
from model.network.transformer import Transformer

# What every member must share for their distributions to be averaged token by token.
SHARED_FIELDS = ("src_vocab_size", "tgt_vocab_size", "pad_id", "unk_id", "bos_id", "eos_id")


class Ensemble(nn.Module):
    def __init__(self, members: list[Transformer]) -> None:
        super().__init__()
        if not members:
            raise ValueError("an ensemble needs at least one model")
        first = members[0].cfg
        for m in members[1:]:
            differ = [f for f in SHARED_FIELDS if getattr(m.cfg, f) != getattr(first, f)]
            if differ:
                raise ValueError(f"ensemble members differ in {', '.join(differ)}: they must share one vocabulary")
        self.members = nn.ModuleList(members)
        self._widths = [m.cfg.d_model for m in members]
        self._layers = [m.cfg.n_decoder_layers for m in members]
        # decode() sizes its DecoderCache by cfg.n_decoder_layers: room for every member's layers
        self.cfg = replace(first, n_decoder_layers=sum(self._layers),
                           max_positions=min(m.cfg.max_positions for m in members))

    def src_mask(self, src: Tensor) -> Tensor:
        return self.members[0].src_mask(src)                                  # (B, 1, 1, S)

    def encode(self, src: Tensor, src_mask: Tensor | None = None, trace: Trace | None = None,
               knockout: frozenset[str] = frozenset()) -> Tensor:
        """src (B, S) -> the members' memories side by side (B, S, sum of d_model)."""
        _untraced(trace, knockout)
        src_mask = self.src_mask(src) if src_mask is None else src_mask
        return torch.cat([m.encode(src, src_mask) for m in self.members], dim=-1)

    def decode(self, tgt: Tensor, memory: Tensor, src_mask: Tensor, cache: DecoderCache | None = None,
               trace: Trace | None = None, knockout: frozenset[str] = frozenset()) -> Tensor:
        """tgt (B, T), memory (B, S, sum d_model) -> the members' decoder states side by side (B, T, sum d_model)."""
        _untraced(trace, knockout)
        memories = memory.split(self._widths, dim=-1)
        caches = self._member_caches(cache)
        return torch.cat([m.decode(tgt, mem, src_mask, c) for m, mem, c in zip(self.members, memories, caches)],
                         dim=-1)

    def project(self, hidden: Tensor, trace: Trace | None = None) -> Tensor:
        """(..., sum d_model) -> log of the members' mean next-token probabilities (..., V)."""
        _untraced(trace, frozenset())
        log_probs = [m.project(h).float().log_softmax(-1)
                     for m, h in zip(self.members, hidden.split(self._widths, dim=-1))]
        return torch.stack(log_probs).logsumexp(0) - math.log(len(log_probs))

    def _member_caches(self, cache: DecoderCache | None) -> list[DecoderCache | None]:
        """Each member's slice of the cache (the same KVCache objects, so reordering the
        whole cache reorders every member's)."""
        if cache is None:
            return [None] * len(self.members)
        out, start = [], 0
        for n in self._layers:
            out.append(DecoderCache(cache.self_attn[start:start + n], cache.cross_attn[start:start + n]))
            start += n
        return out


def _untraced(trace: Trace | None, knockout: frozenset[str]) -> None:
    if trace is not None or knockout:
        raise ValueError("an ensemble cannot be traced or have heads knocked out; use one of its models")
