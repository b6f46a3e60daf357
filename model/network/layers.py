"""Building blocks of the paper's figure 1: positional encoding, scaled dot-product
attention, multi-head attention, position-wise FFN, encoder and decoder layers.

Masks follow the one convention of model/network/masks.py (True = may attend).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from model.network import names
from model.network.config import ModelConfig
from model.network.trace import Trace


class PositionalEncoding(nn.Module):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)).

    Held as a (max_positions, d_model) buffer, so it can be plotted as it is. Layout
    "halves" (Marian) holds the same values with the sines in the first half of the
    dimensions and the cosines in the second.
    """

    def __init__(self, d_model: int, max_positions: int, layout: str = "interleaved") -> None:
        super().__init__()
        self.register_buffer("pe", sinusoid_table(max_positions, d_model, layout), persistent=False)

    def forward(self, length: int, offset: int = 0) -> Tensor:
        """-> (length, d_model): the encodings of positions offset .. offset+length-1."""
        if offset + length > self.pe.size(0):
            raise ValueError(f"sequence of {offset + length} positions exceeds max_positions={self.pe.size(0)}")
        return self.pe[offset:offset + length]


def sinusoid_table(positions: int, d_model: int, layout: str = "interleaved") -> Tensor:
    pos = torch.arange(positions, dtype=torch.float64)[:, None]          # (P, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)             # (D/2,)
    angle = pos / torch.pow(10000.0, two_i / d_model)                    # (P, D/2)
    pe = torch.zeros(positions, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe[:, halves_order(d_model)].float() if layout == "halves" else pe.float()


def halves_order(d_model: int) -> Tensor:
    """Dimension order that turns the interleaved layout into the halves layout:
    halves[:, j] = interleaved[:, order[j]] (even dimensions first, then odd)."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


class Embeddings(nn.Module):
    """Token embedding multiplied by sqrt(d_model) (section 3.4; `scale=False` for
    models trained without it)."""

    def __init__(self, vocab_size: int, d_model: int, scale: bool = True) -> None:
        super().__init__()
        self.lut = nn.Embedding(vocab_size, d_model)
        self.scale = math.sqrt(d_model) if scale else 1.0

    def forward(self, ids: Tensor) -> Tensor:
        return self.lut(ids) * self.scale  # (B, T, D)


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float,
              need_weights: bool, scaled: bool = True) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """Scaled dot-product attention, softmax(q k^T / sqrt(d_k)) v (scaled=False: without
    the 1/sqrt(d_k), an experiment of the training lab).

    q (B, H, Tq, d), k and v (B, H, Tk, d), mask broadcastable to (B, H, Tq, Tk).
    Returns (output (B, H, Tq, d), weights before dropout or None, scores or None).
    Without need_weights the fused `F.scaled_dot_product_attention` runs.
    """
    scale = 1.0 / math.sqrt(q.size(-1)) if scaled else 1.0
    if not need_weights:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale)
        return out, None, None
    scores = q @ k.transpose(-2, -1) * scale                            # (B, H, Tq, Tk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)                                    # (B, H, Tq, Tk)
    out = F.dropout(weights, dropout_p) @ v if dropout_p > 0 else weights @ v
    return out, weights, scores


@dataclass
class KVCache:
    """Keys and values of one attention module, kept across decoding steps."""
    k: Tensor | None = None  # (B, H, Tk, d)
    v: Tensor | None = None

    def reorder(self, index: Tensor) -> None:
        if self.k is not None:
            self.k, self.v = self.k.index_select(0, index), self.v.index_select(0, index)


@dataclass
class DecoderCache:
    """Per-call decoding state: for each decoder layer, its self-attention K/V (growing
    by one position per step) and its cross-attention K/V (computed once from the
    encoder memory). Created by the caller; the model never keeps it."""
    self_attn: list[KVCache] = field(default_factory=list)
    cross_attn: list[KVCache] = field(default_factory=list)

    @classmethod
    def empty(cls, n_layers: int) -> "DecoderCache":
        return cls([KVCache() for _ in range(n_layers)], [KVCache() for _ in range(n_layers)])

    @property
    def length(self) -> int:
        k = self.self_attn[0].k if self.self_attn else None
        return 0 if k is None else k.size(2)

    def reorder(self, index: Tensor, cross: bool = True) -> None:
        """Keep batch rows `index` (beam search: follow each survivor's parent). cross=False leaves the
        cross-attention's K/V as they are: right where every row still holds the same sentence as before (its
        hypotheses share their sentence's memory), which saves gathering them again."""
        for c in self.self_attn + (self.cross_attn if cross else []):
            c.reorder(index)


class RowKnockout(frozenset):
    """Knockouts that differ per batch row: row r switches off the heads rows[r] (e.g. every
    head alone, in one batched pass). As a frozenset it holds every head off in any row."""

    rows: tuple[frozenset[str], ...]

    def __new__(cls, rows: list[frozenset[str]]) -> "RowKnockout":
        self = super().__new__(cls, frozenset().union(*rows))
        self.rows = tuple(frozenset(r) for r in rows)
        return self


def head_keep(knockout: frozenset[str], name: str, n_heads: int, out: Tensor) -> Tensor:
    """1 for the heads of module `name` that stay on, 0 for those switched off, shaped to
    multiply out (B, H, Tq, d): (1, H, 1, 1), or (B, H, 1, 1) for a RowKnockout."""
    rows = knockout.rows if isinstance(knockout, RowKnockout) else (knockout,)
    keep = [[names.head(name, h) not in off for h in range(n_heads)] for off in rows]
    return torch.tensor(keep, dtype=out.dtype, device=out.device)[:, :, None, None]


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)."""

    def __init__(self, d_model: int, n_heads: int, dropout: float, scaled: bool = True) -> None:
        super().__init__()
        self.n_heads, self.d_head, self.dropout, self.scaled = n_heads, d_model // n_heads, dropout, scaled
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)

    def _split(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.n_heads, self.d_head).transpose(1, 2)   # (B, H, T, d)

    def _keys_values(self, kv_input: Tensor, cache: KVCache | None, static: bool) -> tuple[Tensor, Tensor]:
        if cache is not None and static and cache.k is not None:
            return cache.k, cache.v                                     # cross-attn: memory K/V reused
        k, v = self._split(self.w_k(kv_input)), self._split(self.w_v(kv_input))
        if cache is not None:
            if not static and cache.k is not None:                      # self-attn: append new positions
                k, v = torch.cat([cache.k, k], dim=2), torch.cat([cache.v, v], dim=2)
            cache.k, cache.v = k, v
        return k, v

    def forward(self, query: Tensor, kv_input: Tensor, mask: Tensor | None,
                trace: Trace | None = None, name: str = "", cache: KVCache | None = None,
                static_kv: bool = False, knockout: frozenset[str] = frozenset()) -> Tensor:
        """query (B, Tq, D), kv_input (B, Tk, D) -> (B, Tq, D).

        static_kv: the keys/values come from a fixed memory (cross-attention) and
        are computed once per cache; otherwise new positions are appended to it.
        knockout: head names "{name}.{h}" whose output is zeroed before W^O.
        """
        q = self._split(self.w_q(query))                                # (B, H, Tq, d)
        k, v = self._keys_values(kv_input, cache, static_kv)            # (B, H, Tk, d)
        dropout_p = self.dropout if self.training else 0.0
        out, weights, scores = attention(q, k, v, mask, dropout_p, need_weights=trace is not None,
                                        scaled=self.scaled)
        if trace is not None:
            trace.record(name, weights)
            if trace.record_scores:
                trace.record(names.part(name, "scores"), scores)
            if trace.record_qkv:
                for label, t in (("q", q), ("k", k), ("v", v)):
                    trace.record(names.part(name, label), t)
        if knockout:
            out = out * head_keep(knockout, name, self.n_heads, out)
        b, _, tq, _ = out.shape
        return self.w_o(out.transpose(1, 2).reshape(b, tq, -1))        # (B, Tq, D)


ACTIVATION_FUNCTIONS = {"relu": F.relu, "gelu": F.gelu, "swish": F.silu}


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2 (the ReLU may be configured as gelu or swish)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float, activation: str = "relu") -> None:
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.activation = ACTIVATION_FUNCTIONS[activation]

    def forward(self, x: Tensor, trace: Trace | None = None, name: str = "") -> Tensor:
        hidden = self.activation(self.w_1(x))                               # (B, T, d_ff)
        if trace is not None and trace.record_stream:
            trace.record(names.part(name, "hidden"), hidden)
        return self.w_2(self.dropout(hidden))


class Residual(nn.Module):
    """The residual connection around a sublayer: x + Sublayer(x), or, with the paper's
    residual switched off (a training-lab experiment), Sublayer(x) alone."""

    def __init__(self, on: bool = True) -> None:
        super().__init__()
        self.on = on

    def forward(self, x: Tensor, update: Tensor) -> Tensor:
        return x + update if self.on else update


def add_and_norm(add: Residual, norm: nn.LayerNorm, x: Tensor, update: Tensor, trace: Trace | None,
                 name: str) -> Tensor:
    """Post-norm "Add & Norm": LayerNorm(x + Sublayer(x)). With a trace that records the
    stream, also what went in and out and the LayerNorm's steps (see model/network/trace)."""
    summed = add(x, update)
    out = norm(summed)
    if trace is not None and trace.record_stream:
        var, mean = torch.var_mean(summed, dim=-1, unbiased=False)         # (B, T)
        for part, t in (("in", x), ("update", update), ("sum", summed), ("out", out), ("norm.mean", mean),
                        ("norm.std", torch.sqrt(var + norm.eps)), ("norm.gamma", norm.weight),
                        ("norm.beta", norm.bias)):
            trace.record(names.part(name, part), t)
    return out


class _Layer(nn.Module):
    """What both layers hold: self-attention, the FFN, and one LayerNorm (norm1, norm2, ...) and
    one dropout (dropout1, ...) per sublayer, named as in torch.nn.Transformer's layers."""

    def __init__(self, cfg: ModelConfig, cross: bool) -> None:
        super().__init__()
        self.norm_first = cfg.norm_first
        self.add = Residual(cfg.residual)
        # built in the paper's order (the random initialisation draws in this order)
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.dropout, cfg.scale_attention)
        if cross:
            self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.dropout, cfg.scale_attention)
        self.feed_forward = FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout, cfg.activation)
        for kind, make in (("norm", lambda: nn.LayerNorm(cfg.d_model)), ("dropout", lambda: nn.Dropout(cfg.dropout))):
            for i in range(1, 4 if cross else 3):
                self.add_module(f"{kind}{i}", make())


class EncoderLayer(_Layer):
    """Self-attention, then FFN; each wrapped in residual + LayerNorm."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg, cross=False)

    def forward(self, x: Tensor, mask: Tensor, trace: Trace | None, name: str,
                knockout: frozenset[str] = frozenset()) -> Tensor:
        add = self.add
        if self.norm_first:
            x = add(x, self._self_attn_block(self.norm1(x), mask, trace, name, knockout))
            return add(x, self._ff_block(self.norm2(x), trace, name))
        x = add_and_norm(add, self.norm1, x, self._self_attn_block(x, mask, trace, name, knockout), trace,
                         names.part(name, "self_attn"))
        return add_and_norm(add, self.norm2, x, self._ff_block(x, trace, name), trace, names.part(name, "feed_forward"))

    def _self_attn_block(self, x: Tensor, mask: Tensor, trace: Trace | None, name: str,
                         knockout: frozenset[str]) -> Tensor:
        return self.dropout1(self.self_attn(x, x, mask, trace, names.part(name, "self_attn"), knockout=knockout))

    def _ff_block(self, x: Tensor, trace: Trace | None = None, name: str = "") -> Tensor:
        return self.dropout2(self.feed_forward(x, trace, names.part(name, "feed_forward")))


class DecoderLayer(_Layer):
    """Masked self-attention, cross-attention over the encoder memory, then FFN."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg, cross=True)

    def forward(self, x: Tensor, memory: Tensor, self_mask: Tensor | None, cross_mask: Tensor,
                trace: Trace | None, name: str, cache: tuple[KVCache, KVCache] | None = None,
                knockout: frozenset[str] = frozenset()) -> Tensor:
        self_cache, cross_cache = cache if cache is not None else (None, None)
        add = self.add
        if self.norm_first:
            x = add(x, self._self_attn_block(self.norm1(x), self_mask, trace, name, self_cache, knockout))
            x = add(x, self._cross_attn_block(self.norm2(x), memory, cross_mask, trace, name, cross_cache, knockout))
            return add(x, self._ff_block(self.norm3(x), trace, name))
        x = add_and_norm(add, self.norm1, x, self._self_attn_block(x, self_mask, trace, name, self_cache, knockout),
                         trace, names.part(name, "self_attn"))
        x = add_and_norm(add, self.norm2, x,
                         self._cross_attn_block(x, memory, cross_mask, trace, name, cross_cache, knockout), trace,
                         names.part(name, "cross_attn"))
        return add_and_norm(add, self.norm3, x, self._ff_block(x, trace, name), trace, names.part(name, "feed_forward"))

    def _self_attn_block(self, x: Tensor, mask: Tensor | None, trace: Trace | None, name: str,
                         cache: KVCache | None, knockout: frozenset[str]) -> Tensor:
        return self.dropout1(self.self_attn(x, x, mask, trace, names.part(name, "self_attn"), cache, knockout=knockout))

    def _cross_attn_block(self, x: Tensor, memory: Tensor, mask: Tensor, trace: Trace | None, name: str,
                          cache: KVCache | None, knockout: frozenset[str]) -> Tensor:
        out = self.cross_attn(x, memory, mask, trace, names.part(name, "cross_attn"), cache, static_kv=True,
                              knockout=knockout)
        return self.dropout2(out)

    def _ff_block(self, x: Tensor, trace: Trace | None = None, name: str = "") -> Tensor:
        return self.dropout3(self.feed_forward(x, trace, names.part(name, "feed_forward")))
