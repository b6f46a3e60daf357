"""Every head across a whole set of sentences: what each one does, in numbers.

`compute` translates every sentence of a set (the app's default decoding unless told), runs one
traced teacher-forced pass per batch over the translations and measures, for every head of the
three kinds of attention, the statistics of model/analysis/heads/measures.py over every row of the set;
names each head's role by the rules of model/analysis/heads/roles.py; finds the sentences where it is most
and least typical; switches every head off on a stated subset (the drop in the translation's
log-probability, as on the knockout page, model/analysis/heads/knockout.py); compares each
cross-attention head with ALTI+ on a subset (model/analysis/attribution); and keeps a sample of each
head's queries and keys as a joint 2-D map (model/analysis/heads/qkmap.py).

The result is written next to the checkpoint as head_statistics.json (docs/head-statistics.md has
the format), versioned by FORMAT and by a fingerprint of the weights it was computed from: `current`
tells a stale file (other weights, older format) from a usable one.

    python -m model.heads --checkpoint checkpoints/multi30k-en-de      # test2016's sources
    python -m model.heads --checkpoint DIR --input sentences.txt --out stats.json
"""
from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from i18n import N_, Later, _
from model.analysis.attribution import traced_pass
from model.analysis.attribution.alti import AltiUnavailable, alti_plus
from model.analysis.attribution.attention import head_agreement
from model.analysis.heads.knockout import knockout_costs
from model.analysis.heads.measures import Rows, Totals, is_punctuation, typical_sentences
from model.analysis.heads.qkmap import joint_map
from model.analysis.heads.roles import roles
from model.analysis.laps import Laps
from model.inference.options import DecodeOptions
from model.inference.pipeline import InputError, decode_many, head_names, max_source_tokens, source_ids
from model.network import names
from model.network.batch import Example, collate
from model.network.kinds import KIND_NAMES, kind
from model.network.trace import Recording, Trace
from model.storage.checkpoint import Checkpoint
from model.training.data import DataError, read_lines, split_file

FORMAT = "transformer-head-statistics/1"
FILE = "head_statistics.json"
DEFAULT_DATA = "../shared/data/multi30k"
DEFAULT_SPLIT = "test_2016_flickr"
KNOCKOUT_SENTENCES = 200         # the first N usable sentences of the set (every head off, one at a time)
AGREEMENT_SENTENCES = 200        # the first N, for the agreement of cross-attention heads with ALTI+
SAMPLE_TOKENS = 300              # tokens per side sampled for the query/key maps
TYPICAL = 5                      # most / least typical sentences kept per head
BATCH = 64

Progress = Callable[[str, int, int], None]      # (stage, done, total)


class StatisticsError(ValueError):
    """A set with no usable sentence, or a file that cannot be read; the message is for the user."""


# ---- the set ---------------------------------------------------------------------------------
@dataclass
class SentenceSet:
    name: str                       # where the sentences came from, for the page and the file
    texts: list[str]                # the usable ones, in the file's order
    line_numbers: list[int]         # of each usable one (1-based)
    skipped: list[tuple[int, str]] = field(default_factory=list)   # (line number, why)

    def first(self, n: int | None) -> "SentenceSet":
        """Only the first n usable sentences (all when n is None)."""
        return SentenceSet(self.name, self.texts[:n], self.line_numbers[:n], self.skipped)

    def skipped_summary(self) -> str:
        return skipped_summary(self.skipped)


def skipped_summary(skipped: Sequence[tuple[int, str]]) -> str:
    """'3 blank, 1 over the token limit' (or '' when nothing was skipped)."""
    counts: dict[str, int] = {}
    for _line, why in skipped:
        counts[why] = counts.get(why, 0) + 1
    return ", ".join(f"{n} {_(why)}" for why, n in counts.items())


def sentence_set(ckpt: Checkpoint, lines: Sequence[str], name: str) -> SentenceSet:
    """The lines the model can take (tokenizable, within its token limit); the others skipped with
    why. Raises StatisticsError when none is left."""
    texts, numbers, skipped = [], [], []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            skipped.append((i, N_("blank")))
            continue
        try:
            source_ids(ckpt, line)
        except InputError:
            too_long = len(ckpt.src_tokenizer.encode(line.strip())) > max_source_tokens(ckpt)
            skipped.append((i, N_("over the token limit") if too_long else N_("unreadable by the tokenizer")))
            continue
        texts.append(line.strip())
        numbers.append(i)
    if not texts:
        if skipped:
            raise StatisticsError(Later(N_("{name} has no sentence the model can read ({n} skipped: {why})"),
                                        name=name, n=len(skipped), why=skipped_summary(skipped)))
        raise StatisticsError(Later(N_("{name} has no sentence the model can read"), name=name))
    return SentenceSet(name, texts, numbers, skipped)


def read_set(ckpt: Checkpoint, path: str | Path | None = None, data: str | Path = DEFAULT_DATA) -> SentenceSet:
    """The sentences of a text file (one per line), or by default Multi30K test2016's sources in the
    checkpoint's source language. Raises StatisticsError when it cannot be read or has none."""
    if path is None:
        try:
            path = split_file(data, DEFAULT_SPLIT, ckpt.src_lang)
        except DataError:
            raise StatisticsError(Later(N_("the default set ({split} in {lang!r}) is not in {data}: name a text file "
                                           "of sentences, one per line"), split=DEFAULT_SPLIT, lang=ckpt.src_lang,
                                        data=str(data))) from None
    path = Path(path)
    try:
        lines = read_lines(path)
    except DataError as exc:
        raise StatisticsError(str(exc)) from None
    default = path.name == f"{DEFAULT_SPLIT}.{ckpt.src_lang}.gz"
    name = f"Multi30K {DEFAULT_SPLIT} ({ckpt.src_lang})" if default else path.name
    return sentence_set(ckpt, lines, name)


# ---- the result ------------------------------------------------------------------------------
@dataclass
class KindStatistics:
    means: dict[str, np.ndarray]            # measure -> (L, H), over every counted row of the set
    rows: int                               # rows counted (queries with a choice of at least two keys)
    roles: list[list[str]]                  # (L, H)
    typical: np.ndarray                     # (L, H, n) sentence indices, most typical first
    atypical: np.ndarray                    # (L, H, n) least typical first
    knockout: np.ndarray | None = None      # (L, H) mean drop in log P(translation) with the head off
    agreement: np.ndarray | None = None     # (L, H) cross-attention only: mean correlation with ALTI+
    queries: np.ndarray | None = None       # (L, H, Nq, 2) the map's query points
    keys: np.ndarray | None = None          # (L, H, Nk, 2)
    shown: np.ndarray | None = None         # (L, H) share of variance the map's two axes show
    query_tokens: list[tuple[int, int]] = field(default_factory=list)   # (sentence, position) per point
    key_tokens: list[tuple[int, int]] = field(default_factory=list)

    def head(self, layer: int, head: int) -> dict[str, float]:
        """One head's set means, knockout cost and agreement (nan where not measured)."""
        out = {m: float(v[layer, head]) for m, v in self.means.items()}
        for name, arr in (("knockout", self.knockout), ("agreement", self.agreement)):
            out[name] = float(arr[layer, head]) if arr is not None else float("nan")
        return out


@dataclass
class HeadStatistics:
    checkpoint: str
    fingerprint: str                        # of the weights (fingerprint())
    input: dict[str, Any]                   # name, lines, usable, sha256 of the usable sentences
    decoding: dict[str, Any]                # the options the translations were made with
    sentences: list[str]
    source_tokens: list[list[str]]
    target_tokens: list[list[str]]          # decoder inputs: start symbol, then the translation
    translations: list[str]
    skipped: list[tuple[int, str]]
    knockout_sentences: int
    agreement_sentences: int
    notes: list[str]                        # what could not be computed, and why
    kinds: dict[str, KindStatistics]
    seconds: dict[str, float]
    format: str = FORMAT

    def tokens(self, side: str, sentence: int) -> list[str]:
        return (self.source_tokens if side == "source" else self.target_tokens)[sentence]


def fingerprint(model: torch.nn.Module) -> str:
    """sha256 of the weights (names, shapes and float32 values): changes whenever any weight does."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(str(tuple(t.shape)).encode())
        h.update(t.detach().float().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


# ---- computing -------------------------------------------------------------------------------
def compute(ckpt: Checkpoint, sentences: SentenceSet, opts: DecodeOptions | None = None,
            knockout_sentences: int = KNOCKOUT_SENTENCES, agreement_sentences: int = AGREEMENT_SENTENCES,
            sample_tokens: int = SAMPLE_TOKENS, on_progress: Progress | None = None,
            weights: str | None = None) -> HeadStatistics:
    """Every head's statistics over `sentences` (see the module's docstring). opts: how to translate
    (default: beam search as the app decodes, with the checkpoint's own length penalty); weights:
    the model's fingerprint when already known."""
    opts = opts or DecodeOptions(alpha=ckpt.beam_alpha)
    progress = on_progress or (lambda stage, done, total: None)
    clock = Laps()
    with torch.inference_mode():
        ids = [source_ids(ckpt, t) for t in sentences.texts]
        outputs = _translate(ckpt, ids, opts, progress)
        clock.lap("translate")
        pieces = ([ckpt.src_tokenizer.pieces(i) for i in ids],
                  [ckpt.tgt_tokenizer.pieces([ckpt.config.bos_id] + o) for o in outputs])
        plan = _sample_plan(pieces, sample_tokens)
        kinds, vectors = _measure(ckpt, ids, outputs, pieces, plan, progress)
        clock.lap("measure")
    n_ko = min(knockout_sentences, len(ids))
    _knockout(ckpt, kinds, list(zip(ids, outputs))[:n_ko], progress)
    clock.lap("knockout")
    notes: list[str] = []
    n_ag = _agreement(ckpt, kinds["cross"], list(zip(ids, outputs))[:min(agreement_sentences, len(ids))], progress,
                      notes)
    clock.lap("agreement")
    _maps(kinds, vectors, plan)
    clock.lap("maps")
    return HeadStatistics(
        ckpt.name, weights or fingerprint(ckpt.model), _input_summary(sentences),
        {k: v for k, v in asdict(opts).items() if k in ("method", "beam_size", "alpha", "length_penalty")},
        sentences.texts, pieces[0], pieces[1], [ckpt.tgt_tokenizer.decode(o) for o in outputs], sentences.skipped,
        n_ko, n_ag, notes, kinds, clock.laps)


def digest(texts: Sequence[str]) -> str:
    """sha256 of a set's usable sentences: which set a file was computed over."""
    return hashlib.sha256("\n".join(texts).encode()).hexdigest()


def _input_summary(s: SentenceSet) -> dict[str, Any]:
    return {"name": s.name, "lines": len(s.texts) + len(s.skipped), "usable": len(s.texts), "sha256": digest(s.texts)}


def _translate(ckpt: Checkpoint, ids: list[list[int]], opts: DecodeOptions, progress: Progress) -> list[list[int]]:
    """Each sentence's translation (ids, no EOS), decoded in batches of similar length."""
    outputs: list[list[int]] = [[] for _ in ids]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    for start in range(0, len(order), BATCH):
        chunk = order[start:start + BATCH]
        for i, result in zip(chunk, decode_many(ckpt, [ids[i] for i in chunk], opts)):
            outputs[i] = result.tokens
        progress(N_("translating"), min(start + BATCH, len(ids)), len(ids))
    return outputs


def _sample_plan(pieces: tuple[list[list[str]], list[list[str]]], n: int) -> dict[str, list[tuple[int, int]]]:
    """Per side, up to n (sentence, position) pairs drawn at random (seeded: the same set gives the
    same sample), in order."""
    rng = np.random.default_rng(0)
    plan = {}
    for side, toks in zip(("source", "target"), pieces):
        every = [(s, p) for s, row in enumerate(toks) for p in range(len(row))]
        picked = sorted(rng.choice(len(every), size=min(n, len(every)), replace=False).tolist())
        plan[side] = [every[i] for i in picked]
    return plan


def _layouts(trace: Trace, chunk: list[int], pieces) -> dict[str, Rows]:
    """The Rows of each kind for one batch (sentences `chunk`, padded as in the trace)."""
    src_len = np.array([len(pieces[0][i]) for i in chunk])
    tgt_len = np.array([len(pieces[1][i]) for i in chunk])
    s, t = trace.mask("encoder_self").shape[-1], trace.mask("decoder_self").shape[-1]

    def one_hot(positions: np.ndarray, width: int) -> np.ndarray:
        out = np.zeros((len(chunk), width), dtype=bool)
        out[np.arange(len(chunk)), positions] = True
        return out

    def punct(side: int, width: int) -> np.ndarray:
        out = np.zeros((len(chunk), width), dtype=bool)
        for b, i in enumerate(chunk):
            row = [is_punctuation(p) for p in pieces[side][i]]
            out[b, : len(row)] = row
        return out

    eos, bos = one_hot(src_len - 1, s), one_hot(np.zeros(len(chunk), dtype=int), t)
    src_punct, tgt_punct = punct(0, s), punct(1, t)
    mask = {k: trace.mask(k).cpu().numpy() for k in KIND_NAMES}
    return {
        "encoder_self": Rows(src_len, src_len, mask["encoder_self"], False, eos, src_punct),
        "decoder_self": Rows(tgt_len, tgt_len, mask["decoder_self"], False, bos, tgt_punct),
        "cross": Rows(tgt_len, src_len, mask["cross"], True, eos, src_punct),
    }


def _measure(ckpt: Checkpoint, ids: list[list[int]], outputs: list[list[int]], pieces, plan, progress: Progress
             ) -> tuple[dict[str, KindStatistics], dict[str, dict[str, np.ndarray]]]:
    """One traced teacher-forced pass per batch: every kind's Totals, and the sampled q/k vectors."""
    model, cfg = ckpt.model, ckpt.config
    device = next(model.parameters()).device
    totals = {k: Totals() for k in KIND_NAMES}
    vectors = _empty_vectors(cfg, plan)
    where = {side: {pair: j for j, pair in enumerate(pairs)} for side, pairs in plan.items()}
    order = sorted(range(len(ids)), key=lambda i: (len(ids[i]), len(outputs[i])))
    for start in range(0, len(order), BATCH):
        chunk = order[start:start + BATCH]
        src, tgt = (t.to(device) for t in collate([Example(ids[i], [cfg.bos_id] + outputs[i]) for i in chunk],
                                                  cfg.pad_id))
        trace = Trace(Recording(qkv=True))
        src_mask = model.src_mask(src)
        model.decode(tgt, model.encode(src, src_mask, trace), src_mask, trace=trace)
        for name, layout in _layouts(trace, chunk, pieces).items():
            totals[name].add(trace.attention(name).float().cpu().numpy(), layout)
        _gather_vectors(trace, chunk, where, vectors)
        progress(N_("measuring attention"), min(start + BATCH, len(ids)), len(ids))
    kinds = {}
    for name, t in totals.items():
        means = t.means()
        typical, atypical = typical_sentences(t.per_sentence, t.sentence_rows, means, TYPICAL)
        kinds[name] = KindStatistics(means, t.rows, roles(name, means), typical, atypical)
    return kinds, vectors


def _empty_vectors(cfg, plan) -> dict[str, dict[str, np.ndarray]]:
    """kind -> {"q": (L, H, Nq, d), "k": (L, H, Nk, d)} to fill."""
    d = cfg.d_model // cfg.n_heads
    out = {}
    for name in KIND_NAMES:
        k = kind(name)
        n_layers = cfg.n_encoder_layers if k.stack == "encoder" else cfg.n_decoder_layers
        out[name] = {"q": np.zeros((n_layers, cfg.n_heads, len(plan[k.query_side]), d), dtype=np.float32),
                     "k": np.zeros((n_layers, cfg.n_heads, len(plan[k.key_side]), d), dtype=np.float32)}
    return out


def _gather_vectors(trace: Trace, chunk: list[int], where, vectors) -> None:
    for name, store in vectors.items():
        k = kind(name)
        for part, side in (("q", k.query_side), ("k", k.key_side)):
            length = trace[names.part(k.layer_name(0), part)].shape[2]
            hits = [(b, p, where[side][(i, p)]) for b, i in enumerate(chunk) for p in range(length)
                    if (i, p) in where[side]]
            if not hits:
                continue
            b, p, j = (np.array(x) for x in zip(*hits))
            for layer in range(store[part].shape[0]):
                v = trace[names.part(k.layer_name(layer), part)].float().cpu().numpy()   # (B, H, T, d)
                store[part][layer][:, j] = v[b, :, p].transpose(1, 0, 2)


def _knockout(ckpt: Checkpoint, kinds: dict[str, KindStatistics], pairs, progress: Progress) -> None:
    if not pairs:
        return
    heads = head_names(ckpt)
    done = [0]

    def step(n: int) -> None:
        done[0] += n
        progress(N_("switching heads off"), done[0], len(pairs))
    costs = knockout_costs(ckpt.model, pairs, heads, BATCH, step).mean(0)              # (n_heads,)
    by_name = dict(zip(heads, costs))
    cfg = ckpt.config
    for name, stats in kinds.items():
        k = kind(name)
        n_layers = stats.means["entropy"].shape[0]
        stats.knockout = np.array([[by_name[names.head(k.layer_name(i), h)] for h in range(cfg.n_heads)]
                                   for i in range(n_layers)])


def _agreement(ckpt: Checkpoint, cross: KindStatistics, pairs, progress: Progress, notes: list[str]) -> int:
    """Mean agreement of each cross-attention head with ALTI+ over `pairs`; the number used."""
    rows = []
    for n, (source, output) in enumerate(pairs, 1):
        trace, _forced = traced_pass(ckpt, source, output)
        try:
            rows.append(head_agreement(trace, alti_plus(trace, ckpt.model)))
        except AltiUnavailable as exc:
            notes.append(f"agreement with ALTI+ not computed: {exc}")
            return 0
        progress(N_("comparing with ALTI+"), n, len(pairs))
    if rows:
        with warnings.catch_warnings():            # a head with no defined correlation anywhere stays nan
            warnings.simplefilter("ignore", RuntimeWarning)
            cross.agreement = np.nanmean(np.stack(rows), 0)
    return len(rows)


def _maps(kinds: dict[str, KindStatistics], vectors, plan) -> None:
    for name, stats in kinds.items():
        k = kind(name)
        q, kk = vectors[name]["q"], vectors[name]["k"]
        n_layers, n_heads = q.shape[:2]
        qs, ks = np.zeros(q.shape[:3] + (2,)), np.zeros(kk.shape[:3] + (2,))
        shown = np.zeros((n_layers, n_heads))
        for i in range(n_layers):
            for h in range(n_heads):
                qs[i, h], ks[i, h], shown[i, h] = joint_map(q[i, h], kk[i, h])
        stats.queries, stats.keys, stats.shown = qs, ks, shown
        stats.query_tokens, stats.key_tokens = list(plan[k.query_side]), list(plan[k.key_side])
