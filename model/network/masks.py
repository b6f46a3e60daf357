"""The one mask convention of this code base.

A mask is a boolean tensor that broadcasts against attention scores of shape
(B, H, Tq, Tk): **True means "this query may attend to this key", False means
"blocked"**. Blocked entries get score -inf before the softmax, hence weight
exactly 0 after it. This is the convention of `F.scaled_dot_product_attention`'s
boolean `attn_mask` (and the opposite of `nn.Transformer`'s `key_padding_mask`).

Builders:
    padding_mask(ids, pad_id)  -> (B, 1, 1, Tk)   keys that are real tokens
    causal_mask(Tq, Tk)        -> (1, 1, Tq, Tk)  key position <= query position
    decoder_self_mask(ids, pad_id) -> (B, 1, T, T)  causal AND padding (the start
                                   symbol in position 0 is never padding, even when it
                                   is <pad>, as in Marian models)
    decoder_padding_mask(ids, pad_id) -> (B, 1, 1, T)  padding only (a model trained
                                   with the causal mask switched off)

Exported traces store masks expanded to the matrix shape, as 1 (may attend) / 0
(blocked).
"""
from __future__ import annotations

import torch
from torch import Tensor


def padding_mask(ids: Tensor, pad_id: int) -> Tensor:
    """ids (B, T) -> (B, 1, 1, T): True where the key is a real token."""
    return (ids != pad_id)[:, None, None, :]


def causal_mask(queries: int, keys: int | None = None, device: torch.device | str | None = None) -> Tensor:
    """(1, 1, Tq, Tk): query i (at absolute position Tk - Tq + i) sees keys up to its position.

    With keys == queries (the default) this is the lower triangle. Aligned bottom-right,
    so it also serves the last Tq positions of a sequence whose earlier keys are cached.
    """
    keys = queries if keys is None else keys
    q_pos = torch.arange(keys - queries, keys, device=device)[:, None]
    return (torch.arange(keys, device=device)[None, :] <= q_pos)[None, None]


def decoder_padding_mask(ids: Tensor, pad_id: int) -> Tensor:
    """ids (B, T) -> (B, 1, 1, T): the decoder's real tokens. Position 0 holds the start
    symbol and always counts as a real token."""
    keys = padding_mask(ids, pad_id).clone()
    keys[..., 0] = True
    return keys


def decoder_self_mask(ids: Tensor, pad_id: int) -> Tensor:
    """ids (B, T) -> (B, 1, T, T): causal and key padding combined."""
    return causal_mask(ids.size(1), device=ids.device) & decoder_padding_mask(ids, pad_id)


def expand(mask: Tensor, batch: int, queries: int, keys: int) -> Tensor:
    """Broadcast a mask to (B, Tq, Tk) (the head axis dropped) for display/export."""
    return mask.expand(batch, 1, queries, keys)[:, 0]
