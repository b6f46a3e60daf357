"""ALTI+ (Ferrando et al. 2022, "Towards Opening the Black Box of Neural Machine Translation:
Source and Target Contributions to the Model's Predictions").

Each attention sublayer's Add & Norm output for token i is split exactly into one vector per
input token j plus a bias that belongs to no token:

    LayerNorm(x_i + sum_j alpha_ij f(x_j) + b_O) = sum_j T_i(x_j) + bias_i
    T_i(x_j) = gamma * (t_ij - mean(t_ij)) / std_i,   t_ij = sum_h alpha_hij f_h(x_j) (+ x_i when j = i)

with std_i the LayerNorm's own statistic for that token (ALTI linearises LayerNorm with it).
Token j's contribution to token i is how much closer T_i(x_j) brings the sum, by the Manhattan
distance: c_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1), normalised over j, y_i = sum_j T_i(x_j).
In cross-attention the parts are the source tokens (through the encoder's output) and the
decoder token itself (the residual). The feed-forward layers act on one token at a time and mix
nothing. Layers combine by multiplying contribution matrices (rollout); the decoder's rows become
shares of the prefix and of the source that are non-negative and sum to 1 for each generated
token. A low source share is a known sign of a hallucination.

Needs the paper's post-norm layers (the stream recording holds their LayerNorm statistics).
"""
from __future__ import annotations

import torch
from torch import Tensor

from i18n import N_
from model.analysis.attribution.attention import weighted_terms
from model.analysis.attribution.scores import Scores, Unavailable
from model.network import names
from model.network.trace import Trace
from model.network.transformer import Transformer


class AltiUnavailable(Unavailable):
    """ALTI+ cannot be computed for this model; the message says why, for the user."""


def check_model(model: Transformer) -> None:
    if model.cfg.norm_first:
        raise AltiUnavailable(N_("ALTI+ is defined here for the paper's post-norm layers (LayerNorm after the "
                                 "residual); this model normalises first"))


def decompose(trace: Trace, model: Transformer, stack: str, i: int, sub: str) -> tuple[Tensor, Tensor]:
    """One attention sublayer's Add & Norm output split by input token: (parts (Tq, P, D), bias (Tq, D)),
    with parts.sum(1) + bias equal to the recorded output. Self-attention: P = Tq (the residual is
    in the diagonal); cross-attention: P = S + 1 (the source tokens, then the residual)."""
    block = getattr(model, stack).layers[i]
    name = names.sublayer(stack, i, sub)
    module, norm = getattr(block, sub), block.norm1 if sub == "self_attn" else block.norm2
    x = trace[names.part(name, "in")][0].float()                                    # (Tq, D)
    parts = weighted_terms(trace, module, name)                                     # (Tq, Tk, D)
    residual = x if model.cfg.residual else torch.zeros_like(x)
    if sub == "self_attn":
        parts = parts + torch.diag_embed(residual.T).permute(1, 2, 0)               # x_i on the diagonal
    else:
        parts = torch.cat([parts, residual[:, None, :]], dim=1)                     # (T, S + 1, D)
    std = trace[names.part(name, "norm.std")][0].float()[:, None, None]             # (Tq, 1, 1)
    gamma = norm.weight.detach().float()
    centred = lambda t: t - t.mean(-1, keepdim=True)                                # noqa: E731
    b_o = module.w_o.bias.detach().float()
    bias = gamma * centred(b_o)[None, :] / std[:, 0] + norm.bias.detach().float()    # (Tq, D)
    return gamma * centred(parts) / std, bias


def contributions(parts: Tensor) -> Tensor:
    """(Tq, P, D) -> (Tq, P): each part's share of its row's sum, non-negative, rows summing to 1."""
    whole = parts.sum(1, keepdim=True)                                              # (Tq, 1, D)
    c = (whole.abs().sum(-1) - (whole - parts).abs().sum(-1)).clamp(min=0)         # (Tq, P)
    total = c.sum(-1, keepdim=True)
    uniform = torch.full_like(c, 1.0 / c.size(-1))
    return torch.where(total > 0, c / total.clamp(min=1e-30), uniform)


def alti_plus(trace: Trace, model: Transformer) -> Scores:
    """ALTI+ shares of the source and the prefix for every generated token (see the module)."""
    check_model(model)
    cfg = model.cfg
    enc = None
    for i in range(cfg.n_encoder_layers):
        c = contributions(decompose(trace, model, "encoder", i, "self_attn")[0]).double()     # (S, S)
        enc = c if enc is None else c @ enc
    s = enc.size(0)
    t = trace[names.sublayer("decoder", 0, "self_attn")].size(-1)
    mix = torch.cat([torch.eye(t, dtype=torch.float64), torch.zeros(t, s, dtype=torch.float64)], 1)   # (T, T + S)
    memory = torch.cat([torch.zeros(s, t, dtype=torch.float64), enc], 1)                            # (S, T + S)
    for i in range(cfg.n_decoder_layers):
        mix = contributions(decompose(trace, model, "decoder", i, "self_attn")[0]).double() @ mix
        c = contributions(decompose(trace, model, "decoder", i, "cross_attn")[0]).double()  # (T, S + 1)
        mix = c[:, s:] * mix + c[:, :s] @ memory
    return Scores("alti", mix[:, t:].numpy(), mix[:, :t].numpy(), joint=True)
