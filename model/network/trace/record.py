"""The record of one run: every attention matrix, the masks, the positional encodings.

A `Trace` is created by the caller and passed to `Transformer.encode / decode /
forward`; the model writes into it and keeps nothing. One model object can
therefore serve many threads, each with its own trace.

Recorded names (B batch, H heads, S source length, T target length, D d_model,
d = d_model / H):

    source.embedding        (B, S, D)  token embedding * sqrt(d_model)
    source.positional       (S, D)     sinusoidal PE added to it
    source.input            (B, S, D)  their sum, what encoder layer 0 receives
    target.embedding / target.positional / target.input   likewise, length T
    encoder.{i}.self_attn   (B, H, S, S)  softmax weights, before dropout
    decoder.{i}.self_attn   (B, H, T, T)  masked (causal) self-attention
    decoder.{i}.cross_attn  (B, H, T, S)  queries: target, keys: source
    <attn>.scores           same shape: q.k / sqrt(d), blocked entries -inf
                            (only with Recording(scores=True))
    <attn>.q / .k / .v      (B, H, Tq|Tk, d) per-head projections
                            (only with Recording(qkv=True))
    masks.encoder_self      (B, S, S)  bool, True = may attend (see model/network/masks.py)
    masks.decoder_self      (B, T, T)
    masks.cross             (B, T, S)

With Recording(stream=True) (the residual stream and what each sublayer does to it; post-norm
layers), for each sublayer <sub> = {stack}.{i}.self_attn | decoder.{i}.cross_attn |
{stack}.{i}.feed_forward:

    <sub>.in                (B, T, D)  the stream entering the sublayer, x
    <sub>.update            (B, T, D)  Sublayer(x)
    <sub>.sum               (B, T, D)  x + Sublayer(x) (Sublayer(x) alone without residuals)
    <sub>.norm.mean / .norm.std  (B, T)  LayerNorm's statistics of the sum (std includes eps)
    <sub>.norm.gamma / .norm.beta  (D,)  its learned scale and shift
    <sub>.out               (B, T, D)  (sum - mean) / std * gamma + beta: the stream leaving
    {stack}.{i}.feed_forward.hidden  (B, T, d_ff)  max(0, x W1 + b1), the FFN's hidden units
    output.logits           (B, T, V)  the final linear layer's output (before softmax)

Rows are queries, columns are keys, everywhere. Which stack, module and mask each
kind of attention uses is described once, in `model/network/kinds.py`. The command-line tool
`python -m model.trace` lives in `model/commands/trace.py`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from model.network import names
from model.network.kinds import kind as attention_kind
from model.network.kinds import of_module


@dataclass(frozen=True)
class Recording:
    """What a trace records beyond the attention weights, masks and positional encodings; the
    one description of it (hashable: the app's caches use it as a key).

    scores: each attention's scores before the softmax (<attn>.scores)
    qkv:    each head's Q, K, V (<attn>.q / .k / .v)
    stream: the residual stream, each Add & Norm, the FFN's hidden units, the logits
    """
    scores: bool = False
    qkv: bool = False
    stream: bool = False


@dataclass
class Trace:
    recording: Recording = field(default_factory=Recording)
    tensors: dict[str, Tensor] = field(default_factory=dict)
    # Token strings aligned with the matrix axes, one list per batch entry (set by callers
    # that own a tokenizer; the model only sees ids).
    source_tokens: list[list[str]] | None = None
    target_tokens: list[list[str]] | None = None

    @property
    def record_scores(self) -> bool:
        return self.recording.scores

    @property
    def record_qkv(self) -> bool:
        return self.recording.qkv

    @property
    def record_stream(self) -> bool:
        return self.recording.stream

    def record(self, name: str, tensor: Tensor) -> None:
        self.tensors[name] = tensor.detach()

    def __getitem__(self, name: str) -> Tensor:
        return self.tensors[name]

    def __contains__(self, name: str) -> bool:
        return name in self.tensors

    def names(self) -> list[str]:
        return list(self.tensors)

    def keeping(self, names: list[str]) -> Trace:
        """A trace with only these of its tensors (shared, not copied) and the same tokens: what a reader
        keeps of a large recording once it has read the rest."""
        return Trace(self.recording, {n: self.tensors[n] for n in names if n in self.tensors},
                     self.source_tokens, self.target_tokens)

    def entry(self, index: int, source_length: int, target_length: int = 0) -> Trace:
        """Batch entry `index` as a trace of its own (batch axis 1), padding cut off: what recording that
        sentence alone gives (up to float rounding). Copies, so the batch's tensors can be let go."""
        lengths = {"source": source_length, "target": target_length, "encoder": source_length,
                   "decoder": target_length}
        out = Trace(self.recording, source_tokens=_one(self.source_tokens, index),
                    target_tokens=_one(self.target_tokens, index))
        for name, tensor in self.tensors.items():
            out.tensors[name] = _cut(name, tensor, index, lengths).clone()
        return out

    def tokens(self, side: str, index: int = 0) -> list[str]:
        """The tokens along one side ("source" or "target") of batch entry `index`."""
        return (self.source_tokens if side == "source" else self.target_tokens)[index]

    def num_layers(self, stack: str) -> int:
        return sum(1 for n in self.tensors if n.startswith(f"{stack}.") and n.endswith(".self_attn"))

    def attention(self, kind: str, what: str = "") -> Tensor:
        """Stack one attention kind over layers: (L, B, H, Tq, Tk).

        kind: "encoder_self", "decoder_self" or "cross"; what: "" (weights),
        "scores", "q", "k" or "v".
        """
        k = attention_kind(kind)
        suffix = f".{what}" if what else ""
        n = self.num_layers(k.stack)
        if n == 0:
            raise KeyError(f"the trace holds no {k.stack} attention")
        return torch.stack([self.tensors[f"{k.layer_name(i)}{suffix}"] for i in range(n)])

    def mask(self, kind: str) -> Tensor:
        """(B, Tq, Tk) bool, True = may attend."""
        return self.tensors[attention_kind(kind).mask]

    def stack_output(self, stack: str) -> Tensor:
        """(B, S|T, D): the encoder's memory, or the decoder's last vectors (before the output layer)."""
        return self.tensors[names.stack_output(stack, self.num_layers(stack))]

    # ---- lengths and export -------------------------------------------------------
    def source_length(self, index: int = 0) -> int:
        return int(self.tensors["masks.encoder_self"][index, 0].sum())

    def target_length(self, index: int = 0) -> int:
        return int(self.tensors["masks.decoder_self"][index, -1].sum())

    def has_decoder(self) -> bool:
        return "masks.decoder_self" in self.tensors

    def to_dict(self, index: int = 0) -> dict[str, Any]:
        """One batch entry as plain lists, padding cut off. Format: docs/trace-format.md."""
        s = self.source_length(index)
        out: dict[str, Any] = {
            "format": "transformer-trace/1",
            "source": {"tokens": _tokens(self.source_tokens, index, s)},
            "attention": {"encoder_self": _rows(self.attention("encoder_self")[:, index, :, :s, :s])},
            "positional_encoding": {"source": _rows(self.tensors["source.positional"][:s])},
            "masks": {"encoder_self": _rows(self.mask("encoder_self")[index, :s, :s].int())},
        }
        if self.record_scores:
            out["scores"] = {"encoder_self": _rows(self.attention("encoder_self", "scores")[:, index, :, :s, :s])}
        if self.has_decoder():
            t = self.target_length(index)
            out["target"] = {"tokens": _tokens(self.target_tokens, index, t)}
            out["attention"]["decoder_self"] = _rows(self.attention("decoder_self")[:, index, :, :t, :t])
            out["attention"]["cross"] = _rows(self.attention("cross")[:, index, :, :t, :s])
            out["positional_encoding"]["target"] = _rows(self.tensors["target.positional"][:t])
            out["masks"]["decoder_self"] = _rows(self.mask("decoder_self")[index, :t, :t].int())
            out["masks"]["cross"] = _rows(self.mask("cross")[index, :t, :s].int())
            if self.record_scores:
                out["scores"]["decoder_self"] = _rows(self.attention("decoder_self", "scores")[:, index, :, :t, :t])
                out["scores"]["cross"] = _rows(self.attention("cross", "scores")[:, index, :, :t, :s])
        if self.record_stream:
            out["stream"] = self._stream_dict(index, s)
        return out

    def _stream_dict(self, index: int, s: int) -> dict[str, Any]:
        """The residual stream of one batch entry (docs/trace-format.md, "stream")."""
        lengths = {"encoder": s, "decoder": self.target_length(index) if self.has_decoder() else 0}
        out: dict[str, Any] = {}
        for stack, n in lengths.items():
            layers = []
            for i in range(self.num_layers(stack) if n else 0):
                layer = {}
                for sub in ("self_attn", "cross_attn", "feed_forward"):
                    name = f"{stack}.{i}.{sub}"
                    if f"{name}.out" not in self.tensors:
                        continue
                    layer[sub] = {part: _rows(self.tensors[f"{name}.{part}"][index, :n])
                                  for part in ("in", "update", "out", "norm.mean", "norm.std")}
                    layer[sub] |= {part: _rows(self.tensors[f"{name}.{part}"]) for part in ("norm.gamma", "norm.beta")}
                    if sub == "feed_forward":
                        layer[sub]["hidden"] = _rows(self.tensors[f"{name}.hidden"][index, :n])
                layers.append(layer)
            out[stack] = layers
        if "output.logits" in self.tensors and lengths["decoder"]:
            out["logits"] = _rows(self.tensors["output.logits"][index, :lengths["decoder"]])
        return out

    def to_bertviz(self, index: int = 0, part: str = "all") -> dict[str, Any]:
        """Keyword arguments for bertviz's `head_view` / `model_view` (encoder-decoder form):
        per-layer tensors of shape (1, H, Tq, Tk), padding cut off.

        bertviz draws one stack depth per call (it takes the encoder's layer count for every part), so a
        model whose encoder and decoder differ in depth (the shipped 6 + 4) is drawn in two calls:
        part="encoder" (encoder self-attention) and part="decoder" (decoder self-attention and
        cross-attention, both one per decoder layer). part="all" gives the three at once and raises
        ValueError, saying so, where the depths differ."""
        if part not in BERTVIZ_PARTS:
            raise ValueError(f"part must be one of {BERTVIZ_PARTS}, got {part!r}")
        s = self.source_length(index)
        result: dict[str, Any] = {"encoder_tokens": _tokens(self.source_tokens, index, s)}
        if part in ("all", "encoder"):
            result["encoder_attention"] = [a[index:index + 1, :, :s, :s] for a in self.attention("encoder_self")]
        if part in ("all", "decoder") and self.has_decoder():
            t = self.target_length(index)
            result["decoder_attention"] = [a[index:index + 1, :, :t, :t] for a in self.attention("decoder_self")]
            result["cross_attention"] = [a[index:index + 1, :, :t, :s] for a in self.attention("cross")]
            result["decoder_tokens"] = _tokens(self.target_tokens, index, t)
        depths = {len(result[k]) for k in ("encoder_attention", "decoder_attention") if k in result}
        if len(depths) > 1:
            raise ValueError(f"bertviz draws one depth per call and this model has {len(result['encoder_attention'])} "
                             f"encoder and {len(result['decoder_attention'])} decoder layers: call "
                             "to_bertviz(i, part='encoder') and to_bertviz(i, part='decoder') (docs/trace-format.md)")
        return result


BERTVIZ_PARTS = ("all", "encoder", "decoder")


def _one(tokens: list[list[str]] | None, index: int) -> list[list[str]] | None:
    return None if tokens is None else [list(tokens[index])]


def _cut(name: str, tensor: Tensor, index: int, lengths: dict[str, int]) -> Tensor:
    """One batch entry of the tensor recorded under `name` (the table at the top), padding cut off."""
    first, *rest = name.split(".")
    if first == "masks":                                        # (B, Tq, Tk)
        k = attention_kind(rest[0])
        return tensor[index:index + 1, :lengths[k.query_side], :lengths[k.key_side]]
    if first in ("source", "target"):                           # (T, D) positional, else (B, T, D)
        n = lengths[first]
        return tensor[:n] if rest == ["positional"] else tensor[index:index + 1, :n]
    if first == "output":                                       # output.logits (B, T, V)
        return tensor[index:index + 1, :lengths["decoder"]]
    module, what = rest[1], rest[2:]
    if module == "feed_forward" or what[:1] in (["in"], ["update"], ["sum"], ["out"], ["norm"]):
        if what in (["norm", "gamma"], ["norm", "beta"]):      # (D,): the layer's own, no batch
            return tensor
        return tensor[index:index + 1, :lengths[first]]         # (B, T, ...)
    k = of_module(first, module)
    q, keys = lengths[k.query_side], lengths[k.key_side]
    if what == ["q"]:
        return tensor[index:index + 1, :, :q]                   # (B, H, Tq, d)
    if what in (["k"], ["v"]):
        return tensor[index:index + 1, :, :keys]                # (B, H, Tk, d)
    return tensor[index:index + 1, :, :q, :keys]                # weights or scores (B, H, Tq, Tk)


def _tokens(tokens: list[list[str]] | None, index: int, length: int) -> list[str]:
    if tokens is None:
        return [str(i) for i in range(length)]
    return list(tokens[index][:length])


def _rows(t: Tensor) -> list:
    """Tensor -> nested lists of Python floats/ints (-inf kept as None for JSON)."""
    if t.is_floating_point():
        t = t.float()
        if torch.isinf(t).any():
            return [_rows(x) for x in t] if t.dim() > 1 else [None if torch.isinf(v) else round(float(v), 6) for v in t]
        return torch.round(t, decimals=6).tolist()
    return t.tolist()

