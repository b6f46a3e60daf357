"""Attribution read from attention: the raw weights, rollout through cross-attention, and the
weights scaled by what each token sends (Kobayashi et al. 2020). All from one trace recorded
with `model.attribution.RECORDING` (batch entry 0), no extra model pass.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from model.analysis.attribution.scores import Scores
from model.analysis.readings import rollout
from model.network import names
from model.network.kinds import kind
from model.network.layers import MultiHeadAttention
from model.network.trace import Trace
from model.network.transformer import Transformer


def _weights(trace: Trace, kind_name: str) -> Tensor:
    return trace.attention(kind_name)[:, 0].float()                                 # (L, H, Tq, Tk)


def _pick(a: Tensor, layer: int | None, head: int | None) -> Tensor:
    """Mean over the layers and heads not chosen: (L, H, Tq, Tk) -> (Tq, Tk)."""
    a = a if layer is None else a[layer:layer + 1]
    a = a if head is None else a[:, head:head + 1]
    return a.mean(dim=(0, 1))


def method_key(base: str, layer: int | None = None, head: int | None = None) -> str:
    """"attention", "attention.layer1", "value_norm.layer0.head3", ... (layers and heads from 0)."""
    return base + (f".layer{layer}" if layer is not None else "") + (f".head{head}" if head is not None else "")


def raw_attention(trace: Trace, layer: int | None = None, head: int | None = None) -> Scores:
    """The baseline: cross-attention for the source, decoder self-attention for the prefix, of
    one layer and head, or averaged over those not given."""
    source = _pick(_weights(trace, "cross"), layer, head)                           # (T, S)
    prefix = _pick(_weights(trace, "decoder_self"), layer, head)                    # (T, T)
    return Scores(method_key("attention", layer, head), source.numpy(), prefix.numpy(), joint=False)


def cross_rollout(trace: Trace) -> Scores:
    """Attention rollout (Abnar & Zuidema 2020) carried through cross-attention: the encoder's
    rollout gives each source position's mix of source tokens; every decoder position starts as
    itself, and each decoder layer mixes it as 0.5 A + 0.5 I over the prefix (self-attention),
    then as 0.5 (itself) + 0.5 A_cross over the encoder's mixes. Heads averaged. Rows sum to 1.

    Caveat: it assumes that attention and the residual contribute equally, that every head
    counts the same and that the value vectors and the feed-forward layers change nothing."""
    enc = rollout(_weights(trace, "encoder_self").numpy())                          # (S, S)
    dec_self = _weights(trace, "decoder_self").mean(1).double().numpy()             # (L, T, T)
    cross = _weights(trace, "cross").mean(1).double().numpy()                       # (L, T, S)
    t, s = cross.shape[1:]
    mix = np.concatenate([np.eye(t), np.zeros((t, s))], axis=1)                     # (T, T + S)
    memory = np.concatenate([np.zeros((s, t)), enc], axis=1)                        # (S, T + S)
    for a_self, a_cross in zip(dec_self, cross):
        mix = (0.5 * a_self + 0.5 * np.eye(t)) @ mix
        mix = 0.5 * mix + 0.5 * a_cross @ memory
    return Scores("rollout", mix[:, t:], mix[:, :t], joint=True)


def value_vectors(trace: Trace, module: MultiHeadAttention, name: str) -> Tensor:
    """f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h: what key j sends through head h, in the model
    dimension (without W_O's bias). (H, Tk, D)."""
    v = trace[names.part(name, "v")][0].float()                                     # (H, Tk, d)
    h, _, d = v.shape
    w_o = module.w_o.weight.detach().float().view(-1, h, d).permute(1, 2, 0)        # (H, d, D)
    return v @ w_o


def weighted_terms(trace: Trace, module: MultiHeadAttention, name: str) -> Tensor:
    """alpha_hij f_h(x_j) summed over the heads: query i's attention output split by key j.
    Summed over j and plus W_O's bias it is the sublayer's output exactly. (Tq, Tk, D)."""
    alpha = trace[name][0].float()                                                  # (H, Tq, Tk)
    return torch.einsum("hij,hjd->ijd", alpha, value_vectors(trace, module, name))


def _norms(trace: Trace, module: MultiHeadAttention, name: str, head: int | None) -> Tensor:
    """|| alpha_hij f_h(x_j) || for one head, or || sum_h alpha_hij f_h(x_j) || for the layer: (Tq, Tk)."""
    if head is None:
        return weighted_terms(trace, module, name).norm(dim=-1)
    alpha = trace[name][0, head].float()                                            # (Tq, Tk)
    return alpha * value_vectors(trace, module, name)[head].norm(dim=-1)[None, :]


def value_norm(trace: Trace, model: Transformer, layer: int | None = None, head: int | None = None) -> Scores:
    """Attention weighted by the size of what each token sends (Kobayashi et al. 2020): for a
    head, ||alpha_hij f_h(x_j)||; for a layer, the norm of the heads' sum; with no layer given,
    the mean over layers. Source from cross-attention, prefix from decoder self-attention."""
    layers = range(model.cfg.n_decoder_layers) if layer is None else [layer]
    source, prefix = [], []
    for i in layers:
        block = model.decoder.layers[i]
        source.append(_norms(trace, block.cross_attn, kind("cross").layer_name(i), head))
        prefix.append(_norms(trace, block.self_attn, kind("decoder_self").layer_name(i), head))
    return Scores(method_key("value_norm", layer, head), torch.stack(source).mean(0).numpy(),
                  torch.stack(prefix).mean(0).numpy(), joint=False)


def head_agreement(trace: Trace, reference: Scores) -> np.ndarray:
    """(L, H): for every cross-attention head, the Pearson correlation between its weights and a
    reference attribution of the source (magnitudes), averaged over the generated tokens (rows
    where either is constant are left out; nan when none is left). Near 1: this head's picture
    shows what the reference method says the token used."""
    cross = _weights(trace, "cross").double().numpy()                               # (L, H, T, S)
    ref = reference.magnitudes()[0]                                                 # (T, S)
    return np.array([[_mean_row_correlation(head, ref) for head in layer] for layer in cross])


def _mean_row_correlation(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a - a.mean(-1, keepdims=True), b - b.mean(-1, keepdims=True)
    norm = np.sqrt((a * a).sum(-1) * (b * b).sum(-1))
    ok = norm > 1e-12
    return float(((a * b).sum(-1)[ok] / norm[ok]).mean()) if ok.any() else float("nan")
