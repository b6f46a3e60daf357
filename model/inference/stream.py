"""The whole model, not only attention: readings of a trace recorded with
`Trace(Recording(stream=True))` (the residual stream, each Add & Norm, the FFN's hidden units,
the logits; names in model/network/trace), and of the embedding table.

    trace = Trace(Recording(stream=True)); model(src, tgt, trace)
    rebuilt = add_and_norm_rebuilt(trace, "encoder.0.feed_forward")   # == trace["....out"]
    lens = logit_lens(model, trace)            # (L, B, T, V): each decoder layer's prediction
    ratios = update_ratios(trace, "encoder")   # (L, 2, B, T): ||Sublayer(x)|| / ||x||

Post-norm layers (the paper's); a pre-norm model records no Add & Norm steps.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from model.inference.decoding import output_log_probs
from model.network import names
from model.network.trace import Trace
from model.network.transformer import Transformer

SUBLAYERS = {"encoder": ("self_attn", "feed_forward"), "decoder": ("self_attn", "cross_attn", "feed_forward")}


def sublayer_names(trace: Trace, stack: str) -> list[list[str]]:
    """Per layer, the recorded sublayers' names in the order they run."""
    found = []
    for i in range(trace.num_layers(stack)):
        found.append([names.sublayer(stack, i, sub) for sub in SUBLAYERS[stack]
                      if names.part(names.sublayer(stack, i, sub), "out") in trace])
    if not found or not found[0]:
        raise KeyError(f"the trace holds no {stack} stream: record it with Trace(Recording(stream=True))")
    return found


def add_and_norm_rebuilt(trace: Trace, sub: str) -> Tensor:
    """LayerNorm(x + Sublayer(x)) recomputed step by step from the recorded pieces:
    (x + update - mean) / std * gamma + beta. Equals trace[names.part(sub, "out")]."""
    x, update, mean, std, gamma, beta = (trace[names.part(sub, p)] for p in
                                         ("in", "update", "norm.mean", "norm.std", "norm.gamma", "norm.beta"))
    return (x + update - mean[..., None]) / std[..., None] * gamma + beta


def update_ratios(trace: Trace, stack: str) -> Tensor:
    """(L, n_sublayers, B, T): how big each sublayer's update is against the stream it is
    added to, ||Sublayer(x)|| / ||x||, per token."""
    def ratio(sub: str) -> Tensor:
        update, x = trace[names.part(sub, "update")], trace[names.part(sub, "in")]
        return update.norm(dim=-1) / x.norm(dim=-1).clamp_min(1e-12)
    rows = [torch.stack([ratio(sub) for sub in layer]) for layer in sublayer_names(trace, stack)]
    return torch.stack(rows)


@torch.no_grad()
def logit_lens(model: Transformer, trace: Trace) -> Tensor:
    """(L, B, T, V) log-probabilities: each decoder layer's output sent through the final
    linear layer and softmax, as if the model stopped there (post-norm: each layer's
    output is already normalised). The last layer's is the model's real distribution."""
    layers = sublayer_names(trace, "decoder")
    return torch.stack([output_log_probs(model, trace[names.part(layer[-1], "out")]) for layer in layers])


def token_ranks(log_probs: Tensor, token_ids: Tensor) -> Tensor:
    """log_probs (..., T, V), token_ids (..., T) -> the rank of each token (1 = top)."""
    chosen = log_probs.gather(-1, token_ids[..., None])                 # (..., T, 1)
    return (log_probs > chosen).sum(-1) + 1


def ffn_zeros(trace: Trace, sub: str) -> Tensor:
    """(B, T): how many of the d_ff hidden units are exactly zero after the activation."""
    return (trace[names.part(sub, "hidden")] == 0).sum(-1)


def nearest_tokens(embedding: Tensor, token_id: int, k: int = 10,
                   exclude: tuple[int, ...] = ()) -> list[tuple[int, float]]:
    """The k tokens whose embedding rows are closest to token_id's by cosine similarity,
    the token itself (and `exclude`, e.g. special ids) left out: [(id, cosine), ...]."""
    sims = F.cosine_similarity(embedding, embedding[token_id][None], dim=-1)   # (V,)
    sims[[token_id, *exclude]] = float("-inf")
    values, ids = sims.topk(min(k, int(torch.isfinite(sims).sum())))
    return [(int(i), float(v)) for i, v in zip(ids, values)]
