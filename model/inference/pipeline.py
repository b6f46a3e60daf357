"""Text in, translations and traces out: the library API used by the CLIs and the app.

    translate(ckpt, texts, opts)          -> list of output strings ("" for unusable input)
    explain(ckpt, text, opts, reference)  -> Explanation: decoding result with per-step
                                             records, plus the full trace of the output
    explanation_json(explanation)         -> the documented JSON (docs/trace-format.md)
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import torch

from i18n import N_, Later
from model.inference.confidence import Confidence, assess, word_coverage
from model.inference.decoding import DecodeResult, ForcedResult, decode, forced_decode, output_log_probs
from model.inference.lexicon import as_written
from model.inference.options import DecodeOptions, max_output_length
from model.inference.replay import WEIGHTS, read_search
from model.network.batch import Example, collate
from model.network.kinds import kind
from model.network.layers import RowKnockout
from model.network.trace import Recording, Trace

if TYPE_CHECKING:        # a checkpoint is handed in; storage builds it (storage sits above inference)
    from model.storage.checkpoint import Checkpoint

SCORES = Recording(scores=True)      # what an explanation records unless told otherwise
# WEIGHTS (replay.py): the weights only, what the explorer shows; read from a search that recorded its steps


class InputError(ValueError):
    """Text the model cannot take (empty, too long); the message is for the user (in their language:
    `str` of it where it is shown)."""


def max_source_tokens(ckpt: Checkpoint) -> int:
    return ckpt.config.max_positions - 1   # one position for EOS


def source_ids(ckpt: Checkpoint, text: str) -> list[int]:
    """Subword ids of text plus EOS. Raises InputError for empty or over-long text."""
    if not text or not text.strip():
        raise InputError(Later(N_("the text is empty: type a sentence to translate")))
    ids = ckpt.src_tokenizer.encode(text.strip())
    if not ids:
        raise InputError(Later(N_("the text has nothing the tokenizer can read")))
    limit = max_source_tokens(ckpt)
    if len(ids) > limit:
        raise InputError(Later(N_("the text is {n} subword tokens long; the limit is {limit}"), n=len(ids),
                               limit=limit))
    return ids + [ckpt.config.eos_id]


def forced_ids(ckpt: Checkpoint, text: str) -> tuple[int, ...]:
    """The target tokens of a forced start ("Eine Katze"): what the output must begin with. Raises InputError
    for an empty one (the length is checked against the sentence's limit by `check_prefix`)."""
    ids = tuple(ckpt.tgt_tokenizer.encode(text.strip())) if text and text.strip() else ()
    if not ids:
        raise InputError(Later(N_("the forced start is empty: type a word or choose a token")))
    return ids


def check_prefix(ckpt: Checkpoint, source: list[int], opts: DecodeOptions) -> None:
    """A forced prefix (DecodeOptions.prefix) the model can write and that leaves room to go on."""
    cfg = ckpt.config
    if any(t in (cfg.pad_id, cfg.bos_id, cfg.eos_id) or t >= cfg.tgt_vocab_size for t in opts.prefix):
        raise InputError(Later(N_("the forced start holds a token the model cannot write")))
    room = max_output_length(len(source), cfg.max_positions, opts.max_len_a, opts.max_len_b)
    if len(opts.prefix) >= room:
        raise InputError(Later(N_("the forced start is {n} tokens long; this sentence's translation may have at "
                                  "most {limit}, so at most {most} can be forced"), n=len(opts.prefix), limit=room,
                               most=room - 1))


def translate(ckpt: Checkpoint, texts: list[str], opts: DecodeOptions = DecodeOptions(), batch_size: int = 32,
              on_error: Callable[[int, str], None] | None = None,
              on_progress: Callable[[int], None] | None = None) -> list[str]:
    """Translate texts, one output per input, in order. An unusable input gives "" and a
    call on_error(index, message); on_progress(n) after each batch of n sentences."""
    ids: dict[int, list[int]] = {}
    for i, text in enumerate(texts):
        try:
            ids[i] = source_ids(ckpt, text)
        except InputError as exc:
            if on_error:
                on_error(i, str(exc))
    outputs = [""] * len(texts)
    order = sorted(ids, key=lambda i: len(ids[i]))           # similar lengths share a batch
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        for i, result in zip(chunk, decode_many(ckpt, [ids[i] for i in chunk], opts)):
            outputs[i] = ckpt.tgt_tokenizer.decode(result.tokens)
        if on_progress:
            on_progress(len(chunk))
    if on_progress and len(ids) < len(texts):
        on_progress(len(texts) - len(ids))
    return outputs


@dataclass
class Explanation:
    text: str
    output: str
    source_ids: list[int]          # with EOS
    target_ids: list[int]          # decoder input: start symbol, then the output (or the reference)
    result: DecodeResult           # hypotheses and per-step records
    trace: Trace                   # teacher-forced pass over target_ids, tokens filled in
    forced: ForcedResult | None    # with a reference: its tokens' probabilities and ranks
    output_probs: list[float]      # the probability of each output token, EOS last

    def output_pieces(self, ckpt: Checkpoint) -> list[str]:
        """The output's subword pieces, EOS last: one per entry of output_probs."""
        return ckpt.tgt_tokenizer.pieces(self.result.tokens + [ckpt.config.eos_id])

    def confidence(self, ckpt: Checkpoint) -> Confidence:
        """How far to trust this translation (model/inference/confidence.py)."""
        lexicon = ckpt.lexicon
        check = lexicon.check(self.text, self.output) if lexicon is not None else ([], [])
        return assess(self.output_probs, self.text, ckpt.calibration, ckpt.familiar_words, check,
                      self.source_coverage(ckpt),
                      as_written(self.text, lexicon.suspects(check[1])) if lexicon is not None else None)

    def source_coverage(self, ckpt: Checkpoint) -> list[tuple[str, float]]:
        """What the output drew from each content word of the source (confidence.word_coverage), read
        from the trace when it traced the output itself (not a reference)."""
        if self.forced is not None:
            return []
        try:
            cross = self.trace.attention("cross")[:, 0]                       # (L, H, T, S)
        except KeyError:
            return []
        pieces = ckpt.src_tokenizer.pieces(self.source_ids)
        return word_coverage(cross[..., : len(self.output_probs), : len(pieces)], pieces, ckpt.src_lang)


def explain(ckpt: Checkpoint, text: str, opts: DecodeOptions = DecodeOptions(record_steps=True),
            reference: str | None = None, recording: Recording = SCORES,
            knockout: frozenset[str] = frozenset(), prefix: str | None = None) -> Explanation:
    """Decode one sentence with per-step records, then trace one teacher-forced pass over
    the output (or over the reference, when given) recording what `recording` says
    (model/network/trace); knockout: heads switched off; prefix: a forced start ("Eine Katze"): the
    output begins with its tokens, then decoding goes on (the same as opts.prefix = forced_ids(...))."""
    if prefix is not None:
        opts = replace(opts, prefix=forced_ids(ckpt, prefix))
    ids = source_ids(ckpt, text)
    check_prefix(ckpt, ids, opts)
    result = decode_many(ckpt, [ids], opts, knockout)[0]
    return explain_decoded(ckpt, text, ids, result, reference, recording, knockout)


def decode_many(ckpt: Checkpoint, ids: list[list[int]], opts: DecodeOptions,
                knockout: frozenset[str] = frozenset()) -> list[DecodeResult]:
    """Decode several sentences' source ids (each EOS-terminated) as one padded batch;
    each result equals decoding that sentence alone."""
    cfg = ckpt.config
    device = next(ckpt.model.parameters()).device
    src = collate([Example(i, [cfg.bos_id]) for i in ids], cfg.pad_id)[0].to(device)     # (B, S)
    return decode(ckpt.model, src, opts, knockout)


def explain_decoded(ckpt: Checkpoint, text: str, ids: list[int], result: DecodeResult,
                    reference: str | None = None, recording: Recording = SCORES,
                    knockout: frozenset[str] = frozenset()) -> Explanation:
    """The Explanation of a decoding already done (`result`, from source ids `ids`): one
    teacher-forced pass over its output (or the reference) with a trace. With nothing recorded but the
    weights (`WEIGHTS`) of the output, the trace is read from the search's own step records instead
    (model/inference/replay.py), where they hold it: no pass at all."""
    model, cfg = ckpt.model, ckpt.config
    if reference is None and recording == WEIGHTS and not knockout:
        read = explain_from_search(ckpt, text, ids, result)
        if read is not None:
            return read
    src = torch.tensor([ids], device=next(model.parameters()).device)                   # (1, S)
    forced_ids = result.tokens
    if reference is not None:
        forced_ids = ckpt.tgt_tokenizer.encode(reference.strip())[: cfg.max_positions - 1]
    trace = Trace(recording)
    forced = forced_decode(model, src, forced_ids, trace, knockout)
    target_ids = [cfg.bos_id] + forced_ids
    trace.source_tokens = [ckpt.src_tokenizer.pieces(ids)]
    trace.target_tokens = [ckpt.tgt_tokenizer.pieces(target_ids)]
    own = forced if reference is None else forced_decode(model, src, result.tokens, knockout=knockout)
    return Explanation(text, ckpt.tgt_tokenizer.decode(result.tokens), ids, target_ids, result, trace,
                       forced if reference is not None else None, own.probs)


def explain_from_search(ckpt: Checkpoint, text: str, ids: list[int], result: DecodeResult) -> Explanation | None:
    """The Explanation recording `WEIGHTS` of a decoding that recorded its steps, read from those records
    (model/inference/replay.py): no model pass. None where they do not hold it all."""
    read = read_search(ckpt.model, ids, result)
    if read is None:
        return None
    trace, probs = read
    target_ids = [ckpt.config.bos_id] + result.tokens
    trace.source_tokens = [ckpt.src_tokenizer.pieces(ids)]
    trace.target_tokens = [ckpt.tgt_tokenizer.pieces(target_ids)]
    return Explanation(text, ckpt.tgt_tokenizer.decode(result.tokens), ids, target_ids, result, trace, None, probs)


def explanation_json(ex: Explanation, ckpt: Checkpoint, opts: DecodeOptions) -> dict[str, Any]:
    """The trace format of docs/trace-format.md."""
    pieces = ckpt.tgt_tokenizer.pieces
    out = ex.trace.to_dict(0)
    out["checkpoint"] = ckpt.name
    out["input"] = {"text": ex.text}
    out["output"] = {"text": ex.output, "tokens": pieces(ex.result.tokens),
                     "hypotheses": [{"text": ckpt.tgt_tokenizer.decode(h.tokens), "tokens": pieces(h.tokens),
                                     "log_prob": h.log_prob, "score": h.score, "finished": h.finished}
                                    for h in ex.result.hypotheses]}
    out["target"]["source_of_tokens"] = "reference" if ex.forced else "output"
    if ex.forced:
        out["reference"] = {"tokens": pieces(ex.forced.tokens), "probs": ex.forced.probs, "ranks": ex.forced.ranks}
    out["decoding"] = {"options": {**opts.__dict__, "prefix": list(opts.prefix)},
                       "steps": [_step_json(s, pieces) for s in ex.result.steps]}
    if opts.prefix:              # which tokens were forced: the first len(prefix) steps chose nothing
        out["decoding"]["forced"] = {"ids": list(opts.prefix), "tokens": pieces(opts.prefix),
                                     "text": ckpt.tgt_tokenizer.decode(opts.prefix)}
    return out


def _step_json(step, pieces) -> dict[str, Any]:
    r6 = lambda x: round(float(x), 6)  # noqa: E731
    return {
        "step": step.step,
        "hypotheses": [{"index": h.index, "parent": h.parent, "tokens": pieces(h.tokens),
                        "log_prob": r6(h.log_prob), "score": r6(h.score),
                        "top_k": [{"token": pieces([t])[0], "id": t, "prob": r6(p)} for t, p in h.top_k],
                        "self_attn": None if h.self_attn is None else torch.round(h.self_attn, decimals=6).tolist(),
                        "cross_attn": None if h.cross_attn is None else torch.round(h.cross_attn, decimals=6).tolist()}
                       for h in step.hypotheses],
        "candidates": [{"parent": c.parent, "token": pieces([c.token])[0], "id": c.token,
                        "log_prob": r6(c.log_prob), "cum_log_prob": r6(c.cum_log_prob), "score": r6(c.score),
                        "status": c.status} for c in step.candidates],
    }


def encoder_trace(ckpt: Checkpoint, texts: list[str]) -> Trace:
    """Encode several sentences as one padded batch and trace it (the padding mask at work).
    Raises InputError for an unusable text."""
    cfg = ckpt.config
    ids = [source_ids(ckpt, t) for t in texts]
    src = collate([Example(i, [cfg.bos_id]) for i in ids], cfg.pad_id)[0].to(next(ckpt.model.parameters()).device)
    trace = Trace(Recording(scores=True))
    with torch.inference_mode():
        ckpt.model.encode(src, trace=trace)
    trace.source_tokens = [ckpt.src_tokenizer.pieces(row) for row in src.tolist()]
    return trace


def token_probabilities(ckpt: Checkpoint, source: list[int], output: list[int],
                        knockout: frozenset[str] = frozenset()) -> ForcedResult:
    """Probability and rank of each token of `output` (then EOS) given `source` (ids with EOS)."""
    src = torch.tensor([source], device=next(ckpt.model.parameters()).device)
    return forced_decode(ckpt.model, src, output, knockout=knockout)


def next_token_distribution(ckpt: Checkpoint, hidden: torch.Tensor, k: int) -> tuple[list[int], list[float]]:
    """The k likeliest next tokens (ids) and their probabilities, after the decoder's final vector
    `hidden` (D,): the softmax over the whole vocabulary."""
    with torch.no_grad():
        top = output_log_probs(ckpt.model, hidden).exp().topk(k)
    return top.indices.tolist(), top.values.tolist()


def log_probability(ckpt: Checkpoint, source: list[int], output: list[int],
                    knockout: frozenset[str] = frozenset()) -> float:
    """log P(output, then EOS | source), with the heads `knockout` switched off."""
    return float(sum(math.log(max(p, 1e-45)) for p in token_probabilities(ckpt, source, output, knockout).probs))


@torch.inference_mode()
def knockout_effects(ckpt: Checkpoint, source: list[int], output: list[int],
                     rows_per_pass: int = 32) -> dict[str, float]:
    """How much the log-probability of `output` (then EOS) drops when one head alone is
    switched off, for every head ("decoder.1.cross_attn.3"), and when one whole attention
    layer is ("decoder.1.cross_attn": all its heads). Positive: the head helped this
    translation. One teacher-forced pass per `rows_per_pass` knockouts (a RowKnockout batch)."""
    model, cfg = ckpt.model, ckpt.config
    heads = head_names(ckpt)
    layers = {h.rsplit(".", 1)[0]: frozenset(x for x in heads if x.rsplit(".", 1)[0] == h.rsplit(".", 1)[0])
              for h in heads}
    names = [*heads, *layers]
    rows = [frozenset()] + [frozenset({h}) for h in heads] + list(layers.values())
    device = next(model.parameters()).device
    gold = torch.tensor(output + [cfg.eos_id], device=device)                        # (T,)
    log_probs: list[float] = []
    for start in range(0, len(rows), rows_per_pass):
        chunk = rows[start:start + rows_per_pass]
        src = torch.tensor([source] * len(chunk), device=device)                     # (R, S)
        tgt = torch.tensor([[cfg.bos_id] + output] * len(chunk), device=device)      # (R, T)
        hidden = model.decode(tgt, model.encode(src, knockout=RowKnockout(chunk)), model.src_mask(src),
                              knockout=RowKnockout(chunk))
        lp = output_log_probs(model, hidden).gather(-1, gold.expand(len(chunk), -1)[..., None])[..., 0]
        log_probs += lp.sum(-1).tolist()                                             # (R,)
    return {name: log_probs[0] - lp for name, lp in zip(names, log_probs[1:])}


def head_names(ckpt: Checkpoint) -> list[str]:
    """Every attention head, by the name `knockout` uses."""
    cfg = ckpt.config
    enc, dec_self, cross = (kind(k) for k in ("encoder_self", "decoder_self", "cross"))
    names = [f"{enc.layer_name(i)}.{h}" for i in range(cfg.n_encoder_layers) for h in range(cfg.n_heads)]
    for i in range(cfg.n_decoder_layers):          # model order: each decoder layer's self-, then cross-attention
        for k in (dec_self, cross):
            names += [f"{k.layer_name(i)}.{h}" for h in range(cfg.n_heads)]
    return names
