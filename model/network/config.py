"""Model configuration: one frozen dataclass, validated once.

The defaults are the paper's base model (Table 3, row "base"): d_model 512, 8 heads,
6 encoder + 6 decoder layers, d_ff 2048, dropout 0.1, post-norm residual blocks.

Four switches remove a part of the paper, for the training lab's experiments (all on by
default; a model trained with one off keeps it off wherever it is loaded): the positional
encoding, the 1/sqrt(d_k) scaling of attention scores, the decoder's causal mask in full
(teacher-forced) passes, and the residual connections around every sublayer.

A few fields describe how other implementations of the same architecture differ from the
paper (Marian / OPUS-MT models imported by model/storage/convert.py): the FFN activation, the
layout of the positional encoding, whether embeddings are scaled by sqrt(d_model), a
bias on the output logits, and the start symbol of the decoder (Marian starts with <pad>).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

ACTIVATIONS = ("relu", "gelu", "swish")   # FFN nonlinearity: the paper's ReLU; gelu (erf); swish = SiLU
# sin/cos alternating per dimension (the paper) | all sines, then all cosines (Marian)
PE_LAYOUTS = ("interleaved", "halves")


@dataclass(frozen=True)
class ModelConfig:
    src_vocab_size: int = 8000
    tgt_vocab_size: int = 8000
    d_model: int = 512
    n_heads: int = 8
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    d_ff: int = 2048
    dropout: float = 0.1
    max_positions: int = 256
    # Share source embedding, target embedding and the output projection
    # (section 3.4 of the paper); needs one joint vocabulary.
    tie_embeddings: bool = True
    # False: the paper's post-norm, LayerNorm(x + Sublayer(x)).
    # True: pre-norm, x + Sublayer(LayerNorm(x)), plus a final LayerNorm per stack.
    norm_first: bool = False
    pad_id: int = 0
    unk_id: int = 1
    bos_id: int = 2          # the decoder's start symbol (may equal pad_id: Marian starts with <pad>)
    eos_id: int = 3
    activation: str = "relu"
    pe_layout: str = "interleaved"
    scale_embedding: bool = True     # embeddings * sqrt(d_model) (section 3.4)
    logits_bias: bool = False        # a bias on the output layer (Marian's final_logits_bias)
    # the paper's parts, switchable for experiments (section numbers of the paper)
    positional_encoding: bool = True  # add the sinusoids (3.5); off: the model sees a bag of tokens
    scale_attention: bool = True      # divide scores by sqrt(d_k) (3.2.1)
    causal_mask: bool = True          # hide later target positions in the decoder (3.2.3)
    residual: bool = True             # x + Sublayer(x) (3.1); off: LayerNorm(Sublayer(x))

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "n_encoder_layers",
                     "n_decoder_layers", "d_ff", "max_positions"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.tie_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError("tie_embeddings needs src_vocab_size == tgt_vocab_size (a joint vocabulary)")
        if len({self.pad_id, self.unk_id, self.eos_id}) != 3 or self.bos_id in (self.unk_id, self.eos_id):
            raise ValueError("pad/unk/eos ids must be distinct, and the start symbol (bos_id) neither unk nor eos")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {self.activation!r}")
        if self.pe_layout not in PE_LAYOUTS:
            raise ValueError(f"pe_layout must be one of {PE_LAYOUTS}, got {self.pe_layout!r}")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def ablations(self) -> list[str]:
        """The parts of the paper this model was built without (empty for the paper's model)."""
        parts = {"positional_encoding": "positional encoding", "scale_attention": "1/sqrt(d_k) scaling",
                 "causal_mask": "causal mask", "residual": "residual connections"}
        return [label for name, label in parts.items() if not getattr(self, name)]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ModelConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown config keys: {sorted(unknown)}")
        return cls(**data)

    def replace(self, **changes: Any) -> "ModelConfig":
        return dataclasses.replace(self, **changes)


# Named shapes. Vocabulary sizes and special ids are filled in from the tokenizer.
PRESETS: dict[str, dict[str, Any]] = {
    # seconds-long tests
    "tiny": dict(d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64, dropout=0.0),
    # CPU training in well under an hour (about 6 M parameters with an 8k vocabulary)
    "small": dict(d_model=256, n_heads=8, n_encoder_layers=3, n_decoder_layers=3, d_ff=512, dropout=0.1),
    # CPU training in about two hours
    "medium": dict(d_model=256, n_heads=8, n_encoder_layers=4, n_decoder_layers=4, d_ff=1024, dropout=0.15),
    # the paper's base model
    "base": dict(),
}


def preset(name: str, **overrides: Any) -> ModelConfig:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose from {sorted(PRESETS)}")
    return ModelConfig(**{**PRESETS[name], **overrides})
