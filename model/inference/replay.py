"""A translation's trace read back from the search that chose it: no second pass over the model.

A search that records its steps (`DecodeOptions.record_steps`, decoding.py) keeps, at every step,
each live hypothesis's attention rows for its newest position, and the encoder's part of the trace
of each sentence (`DecodeResult.encoder`). Walking back through the parents from the step where the
best hypothesis finished gives one row per position of the translation, start symbol first. By the
cached-equals-uncached property those are the rows a teacher-forced pass over the translation records,
and the chosen tokens' log-probabilities are the ones it computes (tests/test_replay.py checks both).

    best_path(result)                    -> the best hypothesis's record at every step, or None
    read_search(model, source, result)   -> (trace, output probabilities) of the best hypothesis, or None

None where the records cannot give the whole trace: the steps were not recorded, the best hypothesis
was cut at the length limit (no step was fed its last token), or the model was trained without the
causal mask (a teacher-forced row then also sees later positions, which no step saw). The caller then
runs the teacher-forced pass (pipeline.explain_decoded).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from model.inference.decoding import DecodeResult, HypothesisRecord
from model.network import names
from model.network.trace import Recording, Trace
from model.network.transformer import Transformer

WEIGHTS = Recording()    # what a search's records hold: attention weights, masks, embeddings, positional encodings


def best_path(result: DecodeResult) -> list[HypothesisRecord] | None:
    """The record of the best hypothesis's prefix at each step: T = len(tokens) + 1 records, the t-th fed
    the start symbol and the first t tokens. None when the records do not reach its end (see above)."""
    best = result.hypotheses[0] if result.hypotheses else None
    end = len(best.tokens) if best is not None else -1
    if best is None or not best.finished or len(result.steps) <= end:
        return None
    last = [h for h in result.steps[end].hypotheses if h.tokens[1:] == best.tokens]
    if not last or last[0].self_attn is None:
        return None
    path, index = [], last[0].index
    for step in reversed(result.steps[:end + 1]):
        rec = step.hypotheses[index]
        path.append(rec)
        index = rec.parent
    return path[::-1]


def read_search(model: Transformer, source: list[int], result: DecodeResult) -> tuple[Trace, list[float]] | None:
    """The trace a teacher-forced pass over the best hypothesis records with `WEIGHTS` (token strings
    left to the caller), and the probability of each of its tokens then EOS; None as `best_path` says."""
    path = best_path(result)
    if path is None or result.encoder is None or not model.cfg.causal_mask:
        return None
    device = path[0].cross_attn.device
    trace = Trace(WEIGHTS, dict(result.encoder.tensors))
    tgt = torch.tensor([path[-1].tokens], device=device)                                # (1, T)
    src_mask = model.src_mask(torch.tensor([source], device=device))                    # (1, 1, 1, S)
    with torch.inference_mode():
        model.record_decoder_inputs(tgt, src_mask, trace)
    self_attn, cross = _rows(path)
    for i in range(self_attn.size(0)):                                # the pass's order: self, then cross
        trace.record(names.sublayer("decoder", i, "self_attn"), self_attn[i][None])   # (1, H, T, T)
        trace.record(names.sublayer("decoder", i, "cross_attn"), cross[i][None])      # (1, H, T, S)
    return trace, _probs(result, path, model.cfg.eos_id)


def _rows(path: list[HypothesisRecord]) -> tuple[Tensor, Tensor]:
    """The path's rows as full matrices: self (L, H, T, T), later keys 0 (what the causal mask leaves),
    and cross (L, H, T, S)."""
    first = path[0].self_attn                                                            # (L, H, 1)
    t = len(path)
    self_attn = first.new_zeros(*first.shape[:2], t * t)
    # the rows side by side are the lower triangle, row by row: a few operations whatever T is
    self_attn[..., _lower_triangle(t, first.device)] = torch.cat([rec.self_attn for rec in path], dim=-1)
    return self_attn.view(*first.shape[:2], t, t), torch.stack([rec.cross_attn for rec in path], dim=2)


def _lower_triangle(t: int, device: torch.device) -> Tensor:
    """The flat positions (row * t + column) of a (t, t) matrix's lower triangle, row by row."""
    rows, cols = torch.tril_indices(t, t, device=device)
    return rows * t + cols


def _probs(result: DecodeResult, path: list[HypothesisRecord], eos_id: int) -> list[float]:
    """The probability of each token the path chose, EOS last: the candidate of its token at each step."""
    chosen = [*result.hypotheses[0].tokens, eos_id]
    return [math.exp(next(c.log_prob for c in step.candidates if (c.parent, c.token) == (rec.index, token)))
            for step, rec, token in zip(result.steps, path, chosen)]
