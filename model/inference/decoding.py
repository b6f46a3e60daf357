"""Decoding over the key/value-cached decoder: greedy, beam search, sampling, forced.

Every method runs the same loop (`decode`): each *row* of the decoder batch is one live
hypothesis of one sentence; per step the rows are fed their newest token, each
sentence's rows are handed to a small selector (greedy / `beam_step` / sampling) that
decides which continuations are kept, finished or pruned, and the cache is reordered
to follow the survivors' parents. With `record_steps`, a `StepRecord` per step keeps
what a student needs to replay the search: hypotheses, scores, parents, top-k next
tokens, candidate statuses, and the attention rows of the new position.

The options (method, beam, length penalty, sampling, bounds) are options.py's; re-exported here.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from model.inference.options import (  # noqa: F401  (re-exported: the options' old home)
    ALPHAS,
    BEAM_SIZES,
    LENGTH_PENALTIES,
    METHODS,
    DecodeOptions,
    max_output_length,
)
from model.network.layers import DecoderCache
from model.network.trace import Trace
from model.network.transformer import Transformer


# ---- results and records ----------------------------------------------------------------
@dataclass
class Hypothesis:
    tokens: list[int]        # generated ids, without the start symbol and EOS
    log_prob: float          # sum of the log-probabilities of tokens + EOS (if finished)
    score: float             # length-normalised log_prob
    finished: bool           # ended with EOS (False: cut at the length limit)


@dataclass
class Candidate:
    parent: int              # index of the extended hypothesis in StepRecord.hypotheses
    token: int
    log_prob: float          # of this token
    cum_log_prob: float      # of the extended hypothesis
    score: float             # length-normalised cum_log_prob
    status: str = "pruned"   # "kept" | "finished" | "pruned"


@dataclass
class HypothesisRecord:
    index: int               # position in this step's list
    parent: int | None       # index in the previous step's list (None at step 0)
    tokens: list[int]        # decoder input so far: start symbol first
    log_prob: float
    score: float
    top_k: list[tuple[int, float]]   # most likely next tokens and their probabilities
    self_attn: Tensor | None = None  # (L, H, t+1): decoder self-attention of the new position
    cross_attn: Tensor | None = None  # (L, H, S): its cross-attention over the source


@dataclass
class StepRecord:
    step: int
    hypotheses: list[HypothesisRecord]   # the live hypotheses expanded at this step
    candidates: list[Candidate]          # continuations considered, with their fate


@dataclass
class DecodeResult:
    hypotheses: list[Hypothesis]         # best first
    steps: list[StepRecord] = field(default_factory=list)
    # With the steps: the encoder's part of this sentence's trace (attention weights, its mask, the source's
    # embedding and positional encoding), padding cut off: what a teacher-forced pass would record of it
    encoder: Trace | None = None

    @property
    def tokens(self) -> list[int]:
        return self.hypotheses[0].tokens

    @property
    def score(self) -> float:
        return self.hypotheses[0].score


# ---- the beam step: a pure function ---------------------------------------------------------
def beam_step(cum_log_probs: Tensor, log_probs: Tensor, beam_size: int, eos_id: int,
              normalise: Callable[[float, int], float], length: int,
              row_best: tuple[Tensor, Tensor] | None = None) -> list[Candidate]:
    """Choose the continuations of one sentence's live hypotheses.

    cum_log_probs (n,) of the live hypotheses, log_probs (n, V) of their next token,
    length: tokens generated after this step (EOS counted). Takes the 2*beam_size best
    continuations (so EOS candidates cannot starve the beam); walking them best first,
    an EOS among the top beam_size finishes its hypothesis, other tokens are kept until
    beam_size are live, the rest are pruned. row_best: each row's likeliest next tokens, best first
    (log_probs.topk(k, dim=-1)'s values and indices, k >= 2*beam_size), where the caller has them (`decode`
    takes them for a whole batch at once): the best of all continuations are among each row's best.
    """
    k = min(2 * beam_size, log_probs.size(1))
    values, tokens = row_best if row_best is not None else log_probs.topk(k, dim=-1)
    values, tokens = values[:, :k], tokens[:, :k]                         # (n, k): each row's k best
    total = cum_log_probs[:, None] + values                              # (n, k)
    best, flat = total.flatten().topk(min(k, total.numel()))
    token_log_probs = values.flatten()[flat].tolist()                    # same flat (row, rank) order
    token_ids = tokens.flatten()[flat].tolist()
    out, kept = [], 0
    for rank, (value, index, lp, token) in enumerate(zip(best.tolist(), flat.tolist(), token_log_probs, token_ids)):
        parent = index // k
        cand = Candidate(parent, token, lp, value, normalise(value, length))
        if token == eos_id:
            cand.status = "finished" if rank < beam_size else "pruned"
        elif kept < beam_size:
            cand.status, kept = "kept", kept + 1
        out.append(cand)
    return out


def repeating_tokens(tokens: Sequence[int], n: int) -> list[int]:
    """The next tokens that would make an n-gram of `tokens` occur twice (n >= 1)."""
    if n == 1:
        return list(dict.fromkeys(tokens))
    if len(tokens) < n:
        return []
    last = list(tokens[len(tokens) - n + 1:])                           # the n-1 newest tokens
    return [tokens[i + n - 1] for i in range(len(tokens) - n + 1) if list(tokens[i:i + n - 1]) == last]


def block_repeats(log_probs: Tensor, histories: Sequence[Sequence[int]], n: int) -> Tensor:
    """log_probs (R, V) with -inf for each row's tokens that would repeat an n-gram of
    its history (the tokens generated so far, start symbol excluded)."""
    banned = [(row, t) for row, h in enumerate(histories) for t in repeating_tokens(h, n)]
    if not banned:
        return log_probs
    rows, cols = zip(*banned)
    out = log_probs.clone()
    out[list(rows), list(cols)] = float("-inf")
    return out


# A selector: (cum (n,), log_probs (n, V), opts, eos_id, length, generator, row_best) -> the step's candidates of one
# sentence; row_best: each row's likeliest next tokens (values, indices), best first, taken for the batch at once.
def _greedy_select(cum: Tensor, log_probs: Tensor, opts: DecodeOptions, eos_id: int, length: int,
                   gen: torch.Generator, row_best: tuple[Tensor, Tensor] | None) -> list[Candidate]:
    return _single_choice(cum, log_probs, int(log_probs[0].argmax()), opts, eos_id, length)


def _sample_select(cum: Tensor, log_probs: Tensor, opts: DecodeOptions, eos_id: int, length: int,
                   gen: torch.Generator, row_best: tuple[Tensor, Tensor] | None) -> list[Candidate]:
    probs = sampling_distribution(log_probs[0], opts.temperature, opts.top_k, opts.top_p)
    token = int(torch.multinomial(probs, 1, generator=gen))
    return _single_choice(cum, log_probs, token, opts, eos_id, length)


def _beam_select(cum: Tensor, log_probs: Tensor, opts: DecodeOptions, eos_id: int, length: int,
                 gen: torch.Generator, row_best: tuple[Tensor, Tensor] | None) -> list[Candidate]:
    return beam_step(cum, log_probs, opts.beam_size, eos_id, opts.normalise, length, row_best)


def _single_choice(cum: Tensor, log_probs: Tensor, token: int, opts: DecodeOptions, eos_id: int,
                   length: int) -> list[Candidate]:
    """One live hypothesis continues with `token`; the other top-k are recorded as pruned."""
    top = log_probs[0].topk(min(opts.record_top_k, log_probs.size(1))).indices.tolist()
    tokens = [token] + [t for t in top if t != token]
    start = float(cum[0])
    out = []
    for t, lp in zip(tokens, log_probs[0, tokens].tolist()):
        total = start + lp
        status = ("finished" if t == eos_id else "kept") if t == token else "pruned"
        out.append(Candidate(0, t, lp, total, opts.normalise(total, length), status))
    return out


SELECTORS = {"greedy": _greedy_select, "beam": _beam_select, "sample": _sample_select}


def _forced_select(token: int) -> Callable[..., list[Candidate]]:
    """A step of a forced prefix (DecodeOptions.prefix): the one live hypothesis continues with `token`
    whatever its probability; the likeliest others are recorded as pruned (what the model would have said)."""
    def select(cum: Tensor, log_probs: Tensor, opts: DecodeOptions, eos_id: int, length: int,
               gen: torch.Generator, row_best: tuple[Tensor, Tensor] | None) -> list[Candidate]:
        if opts.method == "sample":     # the draw is made and set aside: forcing what it drew changes nothing
            _sample_select(cum, log_probs, opts, eos_id, length, gen, None)
        return _single_choice(cum, log_probs, token, opts, eos_id, length)
    return select


def sampling_distribution(log_probs: Tensor, temperature: float, top_k: int, top_p: float) -> Tensor:
    """log_probs (V,) -> the probabilities sampled from: tempered, then top-k, then top-p."""
    logits = log_probs / temperature
    if top_k > 0:
        kth = logits.topk(min(top_k, logits.numel())).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = logits.softmax(-1)
    if top_p < 1.0:
        sorted_p, order = probs.sort(descending=True)
        outside = sorted_p.cumsum(-1) - sorted_p >= top_p                # mass before it already enough
        probs = probs.scatter(0, order, sorted_p.masked_fill(outside, 0.0))
        probs = probs / probs.sum()
    return probs


# ---- per-sentence search state -----------------------------------------------------------
@dataclass
class _Live:
    tokens: list[int]          # start symbol first
    log_prob: float = 0.0


@dataclass
class _Sentence:
    src_len: int
    max_len: int
    generator: torch.Generator
    live: list[_Live]
    parents: list[int | None] = field(default_factory=lambda: [None])  # of each live one, in the previous step
    finished: list[Hypothesis] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    done: bool = False

    def result(self, encoder: Trace | None = None) -> DecodeResult:
        return DecodeResult(sorted(self.finished, key=lambda h: -h.score), self.steps, encoder)


def _can_stop(s: _Sentence, opts: DecodeOptions) -> bool:
    """Enough hypotheses finished, or none of the live ones can still beat the best."""
    if not s.live:
        return True
    width = opts.beam_size if opts.method == "beam" else 1
    if len(s.finished) >= width:
        return True
    if not s.finished:
        return False
    best = max(h.score for h in s.finished)
    # log-probs only fall; the most a live hypothesis can still reach is its current
    # log-prob normalised at the longest allowed length (normalisation only shrinks |L|).
    bound = max(max(opts.normalise(h.log_prob, n) for n in (len(h.tokens), s.max_len)) for h in s.live)
    return best >= bound


def _advance(s: _Sentence, cands: list[Candidate], opts: DecodeOptions, eos_id: int, step: int) -> list[int]:
    """Apply one step's decisions to a sentence; returns the parents of the new live rows."""
    new_live, parents = [], []
    for c in cands:
        parent = s.live[c.parent]
        if c.status == "finished":
            s.finished.append(Hypothesis(parent.tokens[1:], c.cum_log_prob, c.score, True))
        elif c.status == "kept":
            new_live.append(_Live(parent.tokens + [c.token], c.cum_log_prob))
            parents.append(c.parent)
    if step + 1 >= s.max_len:                    # length limit: the live ones end here, unfinished
        for h in new_live:
            s.finished.append(Hypothesis(h.tokens[1:], h.log_prob, opts.normalise(h.log_prob, step + 1), False))
        new_live, parents = [], []
    s.live, s.parents = new_live, parents
    s.done = _can_stop(s, opts)
    return [] if s.done else parents


def _record(s: _Sentence, step: int, cands: list[Candidate], top: tuple[list, list], opts: DecodeOptions,
            newest: tuple[Tensor, Tensor] | None, rows: slice) -> None:
    """The step's record of sentence s: its live hypotheses with their most likely next tokens (`top`: the
    step's `_top_k`) and, from `newest` (_newest_rows), the attention of their new position."""
    top_ids, top_probs = top[0][rows], top[1][rows]
    if newest is not None:                      # one copy of the sentence's rows; each hypothesis a view of it
        own_self, own_cross = newest[0][:, rows].clone(), newest[1][:, rows, :, : s.src_len].clone()
    hyps = []
    for i, h in enumerate(s.live):
        self_row = cross_row = None
        if newest is not None:
            self_row, cross_row = own_self[:, i], own_cross[:, i]                           # (L, H, t+1), (L, H, S)
        hyps.append(HypothesisRecord(i, s.parents[i], list(h.tokens), h.log_prob,
                                     opts.normalise(h.log_prob, max(len(h.tokens) - 1, 1)),
                                     list(zip(top_ids[i], top_probs[i])), self_row, cross_row))
    s.steps.append(StepRecord(step, hyps, cands))


def _top_k(best: torch.return_types.topk, k: int) -> tuple[list[list[int]], list[list[float]]]:
    """Each row's k most likely next tokens and their probabilities, for the records: from `best` (the step's
    log_probs.topk(>= k, dim=-1), best first) -> two (R, k) lists; only k of them are exponentiated."""
    return best.indices[:, :k].tolist(), best.values[:, :k].exp().tolist()


def _newest_rows(trace: Trace | None) -> tuple[Tensor, Tensor] | None:
    """The attention of every row's newest query position (the only one when cached, the last one when
    recomputed), stacked over layers once a step: self (L, R, H, t+1), cross (L, R, H, S)."""
    if trace is None or not trace.has_decoder():
        return None
    return trace.attention("decoder_self")[..., -1, :], trace.attention("cross")[..., -1, :]


def output_log_probs(model: Transformer, hidden: Tensor, trace: Trace | None = None) -> Tensor:
    """Decoder output hidden (..., D) -> next-token log-probs (..., V). The padding and
    start symbols are never generated: they get probability 0."""
    logits = model.project(hidden, trace).float()
    logits[..., [model.cfg.pad_id, model.cfg.bos_id]] = float("-inf")
    return logits.log_softmax(-1)


# ---- the loop ---------------------------------------------------------------------------------
def _start(model: Transformer, src: Tensor, opts: DecodeOptions) -> list[_Sentence]:
    lengths = model.src_mask(src)[:, 0, 0].sum(-1).tolist()
    return [_Sentence(n, max_output_length(n, model.cfg.max_positions, opts.max_len_a, opts.max_len_b),
                      torch.Generator().manual_seed(opts.seed), [_Live([model.cfg.bos_id])]) for n in lengths]


def _decide(sentences: list[_Sentence], log_probs: Tensor, trace: Trace | None, opts: DecodeOptions,
            eos_id: int, step: int) -> list[int]:
    """Run each unfinished sentence's selector on its rows of log_probs (R, V); returns
    the rows (parents) the next step continues from, in order."""
    forced = step < len(opts.prefix)
    select = _forced_select(opts.prefix[step]) if forced else SELECTORS[opts.method]
    live = [s for s in sentences if not s.done]
    if opts.no_repeat_ngram and not forced:
        log_probs = block_repeats(log_probs, [h.tokens[1:] for s in live for h in s.live], opts.no_repeat_ngram)
    k = max(2 * opts.beam_size if opts.method == "beam" and not forced else 0,
            opts.record_top_k if opts.record_steps else 0)
    best = log_probs.topk(min(k, log_probs.size(1)), dim=-1) if k else None   # (R, k): one topk a step, not one
    top = _top_k(best, opts.record_top_k) if opts.record_steps else None       # a sentence (~5 % of a beam search)
    newest = _newest_rows(trace) if opts.record_steps else None
    keep, row = [], 0
    for s in live:
        n = len(s.live)
        rows = log_probs[row:row + n]
        row_best = None if best is None else (best.values[row:row + n], best.indices[row:row + n])
        cands = select(torch.tensor([h.log_prob for h in s.live]), rows, opts, eos_id, step + 1, s.generator,
                       row_best)
        if opts.record_steps:
            _record(s, step, cands, top, opts, newest, slice(row, row + n))
        keep += [row + p for p in _advance(s, cands, opts, eos_id, step)]
        row += n
    return keep


@torch.inference_mode()
def decode(model: Transformer, src: Tensor, opts: DecodeOptions = DecodeOptions(),
           knockout: frozenset[str] = frozenset()) -> list[DecodeResult]:
    """Decode a padded batch of source ids src (B, S) (EOS-terminated, pad_id padded).

    Returns one DecodeResult per sentence, equal to decoding it alone. knockout: heads
    switched off (see Transformer.encode).
    """
    src_mask = model.src_mask(src)                                          # (B, 1, 1, S)
    encoder = Trace() if opts.record_steps else None
    memory = model.encode(src, src_mask, trace=encoder, knockout=knockout)  # (B, S, D)
    sentences = _start(model, src, opts)
    cache = DecoderCache.empty(model.cfg.n_decoder_layers) if opts.use_cache else None
    row_source = torch.arange(src.size(0), device=src.device)              # sentence of each row
    row_memory, row_mask = memory, src_mask                                 # (R, S, D), (R, 1, 1, S)
    for step in range(model.cfg.max_positions):
        trace = Trace() if opts.record_steps else None
        inputs = _decoder_inputs(sentences, cache is not None, src.device)  # (R, 1) or (R, step+1)
        hidden = model.decode(inputs, row_memory, row_mask, cache, trace, knockout)
        log_probs = output_log_probs(model, hidden[:, -1]).cpu()            # (R, V)
        keep = _decide(sentences, log_probs, trace, opts, model.cfg.eos_id, step)
        if not keep:
            break
        if keep != list(range(inputs.size(0))):     # rows finished or re-parented (else: all go on as they are)
            index = torch.tensor(keep, device=src.device)
            sources = row_source[index]
            moved = not torch.equal(sources, row_source)   # some row now holds another sentence (else: re-parented)
            if cache is not None:
                cache.reorder(index, cross=moved)
            if moved:
                row_source = sources
                row_memory, row_mask = memory[row_source], src_mask[row_source]
    if encoder is None:
        return [s.result() for s in sentences]
    return [s.result(encoder.entry(i, s.src_len)) for i, s in enumerate(sentences)]


def _decoder_inputs(sentences: list[_Sentence], cached: bool, device: torch.device) -> Tensor:
    """One row per live hypothesis: its newest token (the cache holds the rest), or its
    whole prefix when recomputing (all live prefixes have the same length)."""
    rows = [h.tokens[-1:] if cached else h.tokens for s in sentences if not s.done for h in s.live]
    return torch.tensor(rows, device=device)


@torch.inference_mode()
def greedy_batch(model: Transformer, src: Tensor, max_len: int) -> list[list[int]]:
    """Plain batched greedy decoding, the fast path used during training evaluation
    (and an independent reference for `decode`): token ids without bos/eos."""
    cfg = model.cfg
    src_mask = model.src_mask(src)
    memory = model.encode(src, src_mask)
    cache = DecoderCache.empty(cfg.n_decoder_layers)
    last = torch.full((src.size(0), 1), cfg.bos_id, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    out: list[Tensor] = []
    for _ in range(max_len):
        hidden = model.decode(last, memory, src_mask, cache)               # (B, 1, D)
        next_ids = output_log_probs(model, hidden[:, -1]).argmax(dim=-1)           # (B,)
        next_ids = next_ids.masked_fill(finished, cfg.pad_id)
        out.append(next_ids)
        finished |= next_ids == cfg.eos_id
        if finished.all():
            break
        last = next_ids[:, None]
    rows = torch.stack(out, dim=1).tolist() if out else [[] for _ in range(src.size(0))]
    return [_strip(r, cfg.eos_id, cfg.pad_id) for r in rows]


def _strip(ids: list[int], eos_id: int, pad_id: int) -> list[int]:
    if eos_id in ids:
        ids = ids[: ids.index(eos_id)]
    return [i for i in ids if i != pad_id]


# ---- forced decoding (teacher forcing) -----------------------------------------------------------
@dataclass
class ForcedResult:
    tokens: list[int]          # the reference ids, EOS last
    probs: list[float]         # model probability of each reference token
    ranks: list[int]           # its rank among all tokens (1 = the model's top choice)
    trace: Trace | None


@torch.inference_mode()
def forced_decode(model: Transformer, src: Tensor, reference: list[int], trace: Trace | None = None,
                  knockout: frozenset[str] = frozenset()) -> ForcedResult:
    """Teacher-forced pass of one sentence src (1, S) over reference ids (no bos/eos):
    each reference token's probability and rank, and the trace of the pass."""
    cfg = model.cfg
    gold = torch.tensor(reference + [cfg.eos_id], device=src.device)                  # (T,)
    tgt = torch.tensor([[cfg.bos_id] + reference], device=src.device)                 # (1, T)
    src_mask = model.src_mask(src)
    memory = model.encode(src, src_mask, trace, knockout)
    hidden = model.decode(tgt, memory, src_mask, trace=trace, knockout=knockout)          # (1, T, D)
    log_probs = output_log_probs(model, hidden, trace)[0]                              # (T, V)
    gold_lp = log_probs.gather(1, gold[:, None])[:, 0]                                # (T,)
    ranks = (log_probs > gold_lp[:, None]).sum(-1) + 1
    return ForcedResult(gold.tolist(), gold_lp.exp().tolist(), ranks.tolist(), trace)
