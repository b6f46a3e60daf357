"""What each head is worth to the translations of a set: every head switched off in turn, the
drop in log P(output, then EOS | source), per sentence (the knockout page's number, for many
sentences at once).

A head of the encoder changes the memory, so its passes run the whole model; a head of the
decoder leaves the encoder alone, so its passes reuse the memory of one plain pass. Each pass
takes a padded batch of sentences with one head off (a plain knockout, the same in every row).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

from model.inference.decoding import output_log_probs
from model.network.batch import Example, collate
from model.network.transformer import Transformer

Pair = tuple[list[int], list[int]]        # source ids (with EOS), output ids (no EOS)


@torch.inference_mode()
def knockout_costs(model: Transformer, pairs: Sequence[Pair], heads: Sequence[str], batch_size: int = 64,
                   on_progress: Callable[[int], None] | None = None) -> np.ndarray:
    """(N, len(heads)): for each pair and head, log P(output, EOS | source) with all heads on minus
    the same with that head off (positive: the head helped). on_progress(n) after each batch of n."""
    out = np.zeros((len(pairs), len(heads)))
    order = sorted(range(len(pairs)), key=lambda i: (len(pairs[i][0]), len(pairs[i][1])))   # little padding
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        out[chunk] = _batch_costs(model, [pairs[i] for i in chunk], heads)
        if on_progress:
            on_progress(len(chunk))
    return out


def _batch_costs(model: Transformer, pairs: Sequence[Pair], heads: Sequence[str]) -> np.ndarray:
    cfg = model.cfg
    device = next(model.parameters()).device
    src, tgt = (t.to(device) for t in collate([Example(s, [cfg.bos_id] + o) for s, o in pairs], cfg.pad_id))
    gold, real = _gold(pairs, cfg.eos_id, cfg.pad_id, device)                           # (B, T) each
    src_mask = model.src_mask(src)
    memory = model.encode(src, src_mask)

    def log_p(knockout: frozenset[str]) -> Tensor:                                      # (B,)
        mem = model.encode(src, src_mask, knockout=knockout) if _in_encoder(knockout) else memory
        hidden = model.decode(tgt, mem, src_mask, knockout=knockout)                    # (B, T, D)
        lp = output_log_probs(model, hidden).gather(-1, gold[..., None])[..., 0]         # (B, T)
        return torch.where(real, lp, 0.0).sum(-1)

    base = log_p(frozenset())
    return torch.stack([base - log_p(frozenset({h})) for h in heads], -1).double().cpu().numpy()


def _in_encoder(knockout: frozenset[str]) -> bool:
    return any(h.startswith("encoder.") for h in knockout)


def _gold(pairs: Sequence[Pair], eos: int, pad: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """The tokens each decoder position must predict (output, then EOS; padded) and True where real."""
    t = max(len(o) for _, o in pairs) + 1
    gold = torch.full((len(pairs), t), pad, dtype=torch.long)
    for i, (_, o) in enumerate(pairs):
        gold[i, : len(o) + 1] = torch.tensor(o + [eos])
    real = torch.arange(t)[None, :] <= torch.tensor([len(o) for _, o in pairs])[:, None]
    return gold.to(device), real.to(device)
