"""Beam search for whole corpora, every hypothesis of every sentence in tensors on the device.

`decode` (decoding.py) keeps each sentence's search in Python so that a student can replay it step by
step; that costs a few microseconds per sentence per step, which is nothing for one sentence and most
of the time for the half a million a teacher translates for distillation (model/commands/visit.py).
`beam_batch` makes the same choices as `decode(..., DecodeOptions("beam", ...))` without leaving the
device, and keeps nothing but each sentence's best hypothesis:

- per step, the 2 x beam best continuations of each sentence's live hypotheses (fairseq's habit: EOS
  candidates cannot starve the beam); an EOS among the best `beam` finishes its hypothesis, the first
  `beam` other candidates live on (beam_step's rule);
- a sentence stops when `beam` hypotheses have finished, when its length limit is reached (the live
  ones end there, unfinished), or when no live hypothesis can still beat its best finished one
  (`_can_stop`'s bound);
- the best finished hypothesis by length-normalised score wins, the earliest on a tie.

Shapes: n active sentences, K = beam size, R = n x K decoder rows, V target vocabulary, t tokens so far.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from model.inference.decoding import output_log_probs
from model.inference.options import DecodeOptions
from model.network.batch import Example, collate
from model.network.layers import DecoderCache
from model.network.transformer import Transformer

if TYPE_CHECKING:        # a checkpoint is handed in; storage sits above inference
    from model.storage.checkpoint import Checkpoint


def normalise(opts: DecodeOptions, log_prob: Tensor, length: Tensor | int) -> Tensor:
    """DecodeOptions.normalise over tensors (the same formulas)."""
    if opts.length_penalty == "gnmt":
        return log_prob / (((5 + torch.as_tensor(length, dtype=log_prob.dtype, device=log_prob.device)) / 6)
                           ** opts.alpha)
    if opts.length_penalty == "average":
        return log_prob / torch.as_tensor(length, device=log_prob.device).clamp(min=1)
    return log_prob


class _Best:
    """Per sentence: how many hypotheses finished, and the best one (score and tokens)."""

    def __init__(self, batch: int, width: int, device: torch.device) -> None:
        self.count = torch.zeros(batch, dtype=torch.long, device=device)                # (B,)
        self.score = torch.full((batch,), float("-inf"), device=device)                 # (B,)
        self.tokens = torch.zeros(batch, width, dtype=torch.long, device=device)        # (B, P)
        self.length = torch.zeros(batch, dtype=torch.long, device=device)               # (B,)

    def offer(self, ids: Tensor, scores: Tensor, finished: Tensor, histories: Tensor) -> None:
        """ids (n,) sentences, scores (n, C) of C candidates of which `finished` (n, C) end now,
        histories (n, C, t) their tokens. Keeps a candidate that beats the best strictly."""
        self.count[ids] += finished.sum(1)
        masked = scores.masked_fill(~finished, float("-inf"))
        top, arg = masked.max(1)                                  # first maximum on a tie
        better = top > self.score[ids]
        if bool(better.any()):
            rows = ids[better]
            t = histories.size(2)
            self.score[rows] = top[better]
            self.tokens[rows, :t] = histories[better, arg[better]]
            self.length[rows] = t


@torch.inference_mode()
def beam_batch(model: Transformer, src: Tensor, opts: DecodeOptions) -> list[list[int]]:
    """Beam search of a padded batch src (B, S) (EOS-terminated); returns each sentence's best
    output ids (no start symbol, no EOS). opts: beam_size, length penalty, max_len_a/b."""
    cfg, K, device = model.cfg, opts.beam_size, src.device
    B = src.size(0)
    src_mask = model.src_mask(src)                                           # (B, 1, 1, S)
    memory = model.encode(src, src_mask)                                     # (B, S, D)
    src_len = src_mask[:, 0, 0].sum(-1)                                      # (B,)
    max_len = (opts.max_len_a * src_len.double() + opts.max_len_b).floor().long().clamp(1, cfg.max_positions - 1)
    best = _Best(B, cfg.max_positions, device)
    ids = torch.arange(B, device=device)                                     # active sentences (n,)
    rows_memory = memory.repeat_interleave(K, 0)                             # (R, S, D)
    rows_mask = src_mask.repeat_interleave(K, 0)                             # (R, 1, 1, S)
    cum = torch.full((B, K), float("-inf"), device=device)
    cum[:, 0] = 0.0                                                          # at step 0 one beam is live
    history = torch.zeros(B, K, 0, dtype=torch.long, device=device)          # (n, K, t)
    last = torch.full((B * K, 1), cfg.bos_id, dtype=torch.long, device=device)
    cache = DecoderCache.empty(cfg.n_decoder_layers)
    for step in range(cfg.max_positions):
        n, length = ids.numel(), step + 1
        hidden = model.decode(last, rows_memory, rows_mask, cache)            # (R, 1, D)
        log_probs = output_log_probs(model, hidden[:, -1])                   # (R, V)
        V = log_probs.size(-1)
        total = (cum.reshape(-1, 1) + log_probs).reshape(n, K * V)           # (n, K*V)
        value, flat = total.topk(min(2 * K, K * V), dim=1)                   # (n, C) best first
        parent, token = flat // V, flat % V
        valid = value > float("-inf")
        rank = torch.arange(value.size(1), device=device)
        eos = token == cfg.eos_id
        finishing = eos & (rank < K) & valid
        parents_history = history.gather(1, parent[:, :, None].expand(-1, -1, history.size(2)))  # (n, C, t)
        best.offer(ids, normalise(opts, value, length), finishing, parents_history)
        going = ~eos & valid
        going &= going.cumsum(1) <= K
        pick = torch.sort((~going).long() * value.size(1) + rank, dim=1).indices[:, :K]          # (n, K)
        alive = going.gather(1, pick)                                        # (n, K)
        cum = value.gather(1, pick).masked_fill(~alive, float("-inf"))
        new_token = token.gather(1, pick)
        history = torch.cat([parents_history.gather(1, pick[:, :, None].expand(-1, -1, history.size(2))),
                             new_token[:, :, None]], dim=2)                  # (n, K, t+1)
        reorder = (torch.arange(n, device=device)[:, None] * K + parent.gather(1, pick)).reshape(-1)
        at_limit = length >= max_len[ids]                                    # (n,)
        if bool(at_limit.any()):                                             # the live ones end here
            best.offer(ids, normalise(opts, cum, length), alive & at_limit[:, None], history)
            alive = alive & ~at_limit[:, None]
        done = _can_stop(best, ids, cum, alive, length, max_len[ids], K, opts)
        keep = (~done).nonzero()[:, 0]                                       # (n',)
        if keep.numel() == 0:
            break
        rows = (reorder.view(n, K)[keep]).reshape(-1)                        # (n' * K,)
        for c in cache.self_attn:                                            # each survivor's own prefix
            c.reorder(rows)
        if keep.numel() < n:           # the cross-attention keys and values are one sentence's for all its
            same = (keep[:, None] * K + torch.arange(K, device=device)).reshape(-1)   # rows: moved only when
            for c in cache.cross_attn:                                                 # sentences leave
                c.reorder(same)
        ids, cum, history = ids[keep], cum[keep], history[keep]
        rows_memory, rows_mask = memory[ids].repeat_interleave(K, 0), src_mask[ids].repeat_interleave(K, 0)
        last = new_token[keep].reshape(-1, 1)
    lengths = best.length.tolist()
    return [row[:n] for row, n in zip(best.tokens.tolist(), lengths)]


def _can_stop(best: _Best, ids: Tensor, cum: Tensor, alive: Tensor, length: int, max_len: Tensor, K: int,
              opts: DecodeOptions) -> Tensor:
    """(n,) True where a sentence is done: nothing live, K finished, or no live hypothesis can reach
    its best finished score (normalised at its next length or at the longest allowed)."""
    no_live = ~alive.any(1)
    full = best.count[ids] >= K
    live_cum = cum.masked_fill(~alive, float("-inf"))
    bound = torch.maximum(normalise(opts, live_cum, length + 1),
                          normalise(opts, live_cum, max_len[:, None].to(cum.dtype))).max(1).values
    beaten = (best.count[ids] > 0) & (best.score[ids] >= bound)
    return no_live | full | beaten


def translate_corpus(ckpt: Checkpoint, texts: list[str], opts: DecodeOptions = DecodeOptions("beam", beam_size=1),
                     batch_tokens: int = 6000, on_progress: Callable[[int], None] | None = None,
                     should_stop: Callable[[], bool] = lambda: False) -> list[str]:
    """Translate texts in input order with `beam_batch` (opts: beam size, length penalty, length
    limits; beam 1 is greedy): sentences of similar length share a batch of at most batch_tokens
    source tokens x beam. Text the model cannot take (empty, over-long) gives "". on_progress(n)
    after each batch; when should_stop() says so between batches, the rest stay ""."""
    cfg = ckpt.config
    device = next(ckpt.model.parameters()).device
    limit = cfg.max_positions - 1
    encoded = ckpt.src_tokenizer.encode_many([t.strip() for t in texts])
    usable = [i for i, ids in enumerate(encoded) if 0 < len(ids) <= limit]
    usable.sort(key=lambda i: len(encoded[i]))
    outputs = [""] * len(texts)
    start = 0
    while start < len(usable) and not should_stop():
        end = start + 1
        # sorted by length: the newest sentence is the longest of the batch
        while end < len(usable) and (len(encoded[usable[end]]) + 1) * (end - start + 1) * opts.beam_size \
                <= batch_tokens:
            end += 1
        chunk = usable[start:end]
        src = collate([Example(encoded[i] + [cfg.eos_id], [cfg.bos_id]) for i in chunk], cfg.pad_id)[0]
        for i, ids in zip(chunk, beam_batch(ckpt.model, src.to(device), opts)):
            outputs[i] = ckpt.tgt_tokenizer.decode(ids)
        if on_progress:
            on_progress(len(chunk))
        start = end
    return outputs
