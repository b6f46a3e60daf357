"""The three kinds of attention in the paper's encoder-decoder, described once.

Every place that needs to know where a kind of attention lives (the trace's names,
its mask, which token axis its rows and columns belong to) or how to explain it to a
student (label, caption) reads this registry: the trace, the knockout head names, each
app page, and the app's links.

    kind            stack     module       queries (rows)   keys (columns)
    encoder_self    encoder   self_attn    source           source
    decoder_self    decoder   self_attn    target           target   (causal mask)
    cross           decoder   cross_attn   target           source
"""
from __future__ import annotations

from dataclasses import dataclass

from i18n import N_
from model.network import names

SIDES = {"source": N_("source"), "target": N_("target")}     # the token axes, as a student reads them
STACKS = {"encoder": N_("encoder"), "decoder": N_("decoder")}  # the two stacks, likewise


@dataclass(frozen=True)
class AttentionKind:
    name: str         # "encoder_self" | "decoder_self" | "cross"
    stack: str        # "encoder" | "decoder"
    module: str       # "self_attn" | "cross_attn"
    mask: str         # trace name of the mask applied, (B, Tq, Tk) bool, True = may attend
    query_side: str   # "source" | "target": the tokens along the rows
    key_side: str     # "source" | "target": the tokens along the columns
    label: str        # for a student (marked for the catalog: `_(kind.label)` where shown)
    caption: str      # one or two sentences: what a row of this attention means (marked too)

    def layer_name(self, layer: int) -> str:
        """The trace name of this kind's weights in one layer, e.g. "decoder.1.cross_attn"."""
        return names.sublayer(self.stack, layer, self.module)


ATTENTION_KINDS: dict[str, AttentionKind] = {
    k.name: k
    for k in (
        AttentionKind(
            "cross", "decoder", "cross_attn", "masks.cross", "target", "source",
            N_("Cross-attention (decoder → encoder)"),
            N_("Each output position (row) mixes the encoder's outputs (columns): Attention(Q, K, V) = "
               "softmax(QKᵀ/√d_k)V with Q from the decoder and K, V from the encoder."),
        ),
        AttentionKind(
            "encoder_self", "encoder", "self_attn", "masks.encoder_self", "source", "source",
            N_("Encoder self-attention"),
            N_("Each source token (row) builds its new representation from all source tokens (columns)."),
        ),
        AttentionKind(
            "decoder_self", "decoder", "self_attn", "masks.decoder_self", "target", "target",
            N_("Decoder masked self-attention"),
            N_("Each output position sees only itself and earlier positions: the causal mask sets the "
               "upper triangle to −∞ before the softmax, so those weights are exactly 0."),
        ),
    )
}
KIND_NAMES: tuple[str, ...] = tuple(ATTENTION_KINDS)


def kind(name: str) -> AttentionKind:
    """The kind called `name`; a KeyError names the known ones."""
    try:
        return ATTENTION_KINDS[name]
    except KeyError:
        raise KeyError(f"unknown attention kind {name!r}; known: {', '.join(KIND_NAMES)}") from None


def of_module(stack: str, module: str) -> AttentionKind:
    """The kind of attention a stack's module holds, e.g. ("decoder", "cross_attn") -> cross."""
    for k in ATTENTION_KINDS.values():
        if (k.stack, k.module) == (stack, module):
            return k
    raise KeyError(f"no attention in {stack}.{module}")
