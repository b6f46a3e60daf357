"""A deeper model from a trained one (depth up-scaling), so that more layers need not start from scratch.

Every trained layer keeps its weights and its order; new layers are inserted, spread evenly, each right
after a trained one. A new layer starts as a copy of the layer before it with its sublayers' output
projections (attention W_o, the feed-forward W_2) zeroed, so each residual branch adds nothing, and its
LayerNorms set to that layer's last one. In the paper's post-norm layer, LN(x + Sublayer(x)), the new layer
then maps x to nearly x (LN renormalises an already normalised vector: close to, not exactly, the identity),
and the deeper model starts close to the trained one. In a pre-norm model it is exactly the identity. The
query, key, value and first feed-forward weights start as the copied layer's, so once W_o and W_2 move the
new layer starts from features that already mean something.
"""
from __future__ import annotations

import copy
from dataclasses import replace

import torch
from torch import nn

from model.network.layers import DecoderLayer, EncoderLayer
from model.network.transformer import Transformer


def placement(old: int, new: int) -> list[int | None]:
    """For each layer of the deeper stack, the trained layer it is (an index) or None (a new one).
    New layers are spread evenly, each after a trained one: placement(3, 5) -> [0, None, 1, None, 2]."""
    if new < old:
        raise ValueError(f"a grown stack cannot have fewer layers ({new}) than the trained one ({old})")
    if old < 1:
        raise ValueError("nothing to grow from: the trained stack has no layers")
    extra = [0] * old                                  # how many new layers follow each trained one
    for i in range(new - old):
        extra[(i * old) // (new - old)] += 1
    out: list[int | None] = []
    for i, n in enumerate(extra):
        out += [i] + [None] * n
    return out


def _outputs(layer: nn.Module) -> list[nn.Linear]:
    """The linear layers whose output is added to the residual stream."""
    subs = [layer.self_attn, layer.feed_forward] + ([layer.cross_attn] if isinstance(layer, DecoderLayer) else [])
    return [s.w_2 if s is layer.feed_forward else s.w_o for s in subs]


def _norms(layer: nn.Module) -> list[nn.LayerNorm]:
    return [m for m in layer.children() if isinstance(m, nn.LayerNorm)]


def new_layer_after(layer: EncoderLayer | DecoderLayer) -> EncoderLayer | DecoderLayer:
    """A copy of `layer` that adds nothing to the residual stream and renormalises as its last norm did."""
    fresh = copy.deepcopy(layer)
    last = _norms(layer)[-1]
    with torch.no_grad():
        for linear in _outputs(fresh):
            linear.weight.zero_()
            if linear.bias is not None:
                linear.bias.zero_()
        for norm in _norms(fresh):
            norm.weight.copy_(last.weight)
            norm.bias.copy_(last.bias)
    return fresh


def _stack(layers: nn.ModuleList, new: int) -> nn.ModuleList:
    out = []
    for source in placement(len(layers), new):
        out.append(copy.deepcopy(layers[source]) if source is not None else new_layer_after(out[-1]))
    return nn.ModuleList(out)


def grow(model: Transformer, encoder_layers: int, decoder_layers: int) -> Transformer:
    """`model` with encoder_layers and decoder_layers layers (at least as many as it has), the trained
    weights kept, new layers starting close to the identity. The argument is not changed."""
    cfg = replace(model.cfg, n_encoder_layers=encoder_layers, n_decoder_layers=decoder_layers)
    grown = Transformer(cfg)
    grown.load_state_dict(model.state_dict(), strict=False)     # embeddings, generator, final norms
    grown.encoder.layers = _stack(model.encoder.layers, encoder_layers)
    grown.decoder.layers = _stack(model.decoder.layers, decoder_layers)
    return grown.train(model.training)
