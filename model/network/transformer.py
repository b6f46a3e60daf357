"""The encoder-decoder of figure 1 of the paper.

    src ids (B, S) -> Embeddings * sqrt(d_model) + PE -> N x EncoderLayer -> memory (B, S, D)
    tgt ids (B, T) -> Embeddings * sqrt(d_model) + PE -> N x DecoderLayer(memory) -> (B, T, D)
    -> generator (Linear to the target vocabulary) -> logits (B, T, V)

`encode` and `decode` are separate so decoding reuses the encoder output; `decode`
accepts a `DecoderCache` for incremental (one position per step) decoding. Pass a
`Trace` to record attention; without one the fused attention kernel runs.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from i18n import N_
from model.network import masks, names
from model.network.config import ModelConfig
from model.network.layers import DecoderCache, DecoderLayer, Embeddings, EncoderLayer, PositionalEncoding
from model.network.trace import Trace


class Encoder(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_encoder_layers))
        self.norm = nn.LayerNorm(cfg.d_model) if cfg.norm_first else None

    def forward(self, x: Tensor, mask: Tensor, trace: Trace | None, knockout: frozenset[str]) -> Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x, mask, trace, names.layer("encoder", i), knockout)
        return self.norm(x) if self.norm is not None else x


class Decoder(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.n_decoder_layers))
        self.norm = nn.LayerNorm(cfg.d_model) if cfg.norm_first else None

    def forward(self, x: Tensor, memory: Tensor, self_mask: Tensor | None, cross_mask: Tensor,
                trace: Trace | None, cache: DecoderCache | None, knockout: frozenset[str]) -> Tensor:
        for i, layer in enumerate(self.layers):
            layer_cache = (cache.self_attn[i], cache.cross_attn[i]) if cache is not None else None
            x = layer(x, memory, self_mask, cross_mask, trace, names.layer("decoder", i), layer_cache, knockout)
        return self.norm(x) if self.norm is not None else x


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.src_embed = Embeddings(cfg.src_vocab_size, cfg.d_model, cfg.scale_embedding)
        self.tgt_embed = Embeddings(cfg.tgt_vocab_size, cfg.d_model, cfg.scale_embedding)
        self.positional = PositionalEncoding(cfg.d_model, cfg.max_positions, cfg.pe_layout)
        self.dropout = nn.Dropout(cfg.dropout)
        self.encoder = Encoder(cfg)
        self.decoder = Decoder(cfg)
        self.generator = nn.Linear(cfg.d_model, cfg.tgt_vocab_size, bias=cfg.logits_bias)
        self._init_weights()
        if cfg.tie_embeddings:
            self.tgt_embed.lut.weight = self.src_embed.lut.weight
            self.generator.weight = self.src_embed.lut.weight

    def _init_weights(self) -> None:
        # Xavier-uniform linears, N(0, d_model^-0.5) embeddings: with the sqrt(d_model)
        # scale the embedded tokens have unit variance, like the positional encoding.
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, 0.0, self.cfg.d_model ** -0.5)

    # ---- masks --------------------------------------------------------------------
    def src_mask(self, src: Tensor) -> Tensor:
        """(B, 1, 1, S): source keys that are not padding."""
        return masks.padding_mask(src, self.cfg.pad_id)

    # ---- the two halves -----------------------------------------------------------
    def _embed(self, embed: Embeddings, ids: Tensor, offset: int, trace: Trace | None, side: str,
               embedded: Tensor | None = None) -> Tensor:
        tokens = embed(ids) if embedded is None else embedded                # (B, T, D)
        pe = self.positional(ids.size(1), offset)                            # (T, D)
        if not self.cfg.positional_encoding:
            pe = torch.zeros_like(pe)                                        # switched off: nothing added
        x = tokens + pe
        if trace is not None:
            trace.record(names.side(side, "embedding"), tokens)
            trace.record(names.side(side, "positional"), pe)
            trace.record(names.side(side, "input"), x)
        return self.dropout(x)

    def encode(self, src: Tensor, src_mask: Tensor | None = None, trace: Trace | None = None,
               knockout: frozenset[str] = frozenset(), embedded: Tensor | None = None) -> Tensor:
        """src (B, S) -> memory (B, S, D).

        embedded (B, S, D): token embeddings (already scaled) to use instead of looking `src` up,
        which then only gives the padding mask (gradient attribution, model/analysis/attribution).

        knockout: attention heads switched off, named "encoder.{i}.self_attn.{h}" (and
        "decoder.{i}.self_attn.{h}", "decoder.{i}.cross_attn.{h}" for `decode`): their
        output is zeroed before the output projection W^O.
        """
        src_mask = self.src_mask(src) if src_mask is None else src_mask
        if trace is not None:
            b, s = src.shape
            trace.record(names.mask("encoder_self"), masks.expand(src_mask, b, s, s))
        x = self._embed(self.src_embed, src, 0, trace, "source", embedded)
        return self.encoder(x, src_mask, trace, knockout)

    def decode(self, tgt: Tensor, memory: Tensor, src_mask: Tensor, cache: DecoderCache | None = None,
               trace: Trace | None = None, knockout: frozenset[str] = frozenset(),
               embedded: Tensor | None = None) -> Tensor:
        """tgt (B, T) decoder input ids (start symbol first), memory (B, S, D) -> (B, T, D).

        With a cache, `tgt` holds only the new positions; earlier ones come from it.
        embedded (B, T, D): token embeddings to use instead of looking `tgt` up (as in `encode`).
        """
        offset = cache.length if cache is not None else 0
        self_mask = self._decoder_self_mask(tgt, offset)
        if trace is not None:
            self._record_decoder_masks(tgt, self_mask, src_mask, offset, trace)
        x = self._embed(self.tgt_embed, tgt, offset, trace, "target", embedded)
        return self.decoder(x, memory, self_mask, src_mask, trace, cache, knockout)

    def record_decoder_inputs(self, tgt: Tensor, src_mask: Tensor, trace: Trace) -> None:
        """Record what a teacher-forced `decode` of tgt (B, T) records before its layers (its masks, the
        target's embedding, positional encoding and input) without running them: the rest of its trace is
        read elsewhere (model/inference/replay.py reads it from a search's own records)."""
        self._record_decoder_masks(tgt, self._decoder_self_mask(tgt, 0), src_mask, 0, trace)
        self._embed(self.tgt_embed, tgt, 0, trace, "target")

    @staticmethod
    def _record_decoder_masks(tgt: Tensor, self_mask: Tensor | None, src_mask: Tensor, offset: int,
                              trace: Trace) -> None:
        b, t = tgt.shape
        keys = offset + t
        full = self_mask if self_mask is not None else torch.ones(1, 1, t, keys, dtype=torch.bool)
        trace.record(names.mask("decoder_self"), masks.expand(full, b, t, keys))
        trace.record(names.mask("cross"), masks.expand(src_mask, b, t, src_mask.size(-1)))

    def _decoder_self_mask(self, tgt: Tensor, offset: int) -> Tensor | None:
        """The causal mask (with key padding in a full pass). With cfg.causal_mask off (a
        lab experiment) a full pass hides only padding; step-by-step decoding has no later
        positions to hide either way."""
        if offset == 0:
            if not self.cfg.causal_mask:
                return masks.decoder_padding_mask(tgt, self.cfg.pad_id)     # (B, 1, 1, T)
            return masks.decoder_self_mask(tgt, self.cfg.pad_id)            # (B, 1, T, T)
        if tgt.size(1) == 1 or not self.cfg.causal_mask:
            return None                                                      # new queries see all cached keys
        return masks.causal_mask(tgt.size(1), offset + tgt.size(1), tgt.device)

    def project(self, hidden: Tensor, trace: Trace | None = None) -> Tensor:
        """The final linear layer: decoder output (..., D) -> logits (..., V)."""
        logits = self.generator(hidden)
        if trace is not None and trace.record_stream:
            trace.record(names.LOGITS, logits)
        return logits

    def forward(self, src: Tensor, tgt: Tensor, trace: Trace | None = None,
                knockout: frozenset[str] = frozenset()) -> Tensor:
        """Teacher-forced pass: src (B, S), tgt (B, T) -> logits (B, T, V)."""
        src_mask = self.src_mask(src)
        memory = self.encode(src, src_mask, trace, knockout)
        return self.project(self.decode(tgt, memory, src_mask, trace=trace, knockout=knockout), trace)

    def num_parameters(self) -> int:
        return sum(n for _, n in self.parameter_counts())

    def parameter_counts(self) -> list[tuple[str, int]]:
        """Parameters per component (names marked for the catalog, i18n/); tied tensors are counted once
        (with the first component)."""
        seen: set[int] = set()
        rows = []
        for name, module in (
            (N_("embeddings (shared)") if self.cfg.tie_embeddings else N_("source embedding"), self.src_embed),
            (N_("target embedding"), self.tgt_embed),
            (N_("encoder"), self.encoder),
            (N_("decoder"), self.decoder),
            (N_("output projection (generator)"), self.generator),
        ):
            fresh = [p for p in module.parameters() if id(p) not in seen]
            seen.update(id(p) for p in fresh)
            if fresh:
                rows.append((name, sum(p.numel() for p in fresh)))
        return rows
