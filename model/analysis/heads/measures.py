"""What one head's attention does, row by row, as numbers (pure: numpy in, numpy out).

For a batch of sentences and one kind of attention, `row_measures` turns the weights
(L, B, H, Tq, Tk) into one value per measure for every query row. A row is counted when its
query is a real token and it may attend to at least two keys (a row with one key has no choice
to describe: the decoder's first position in self-attention). The measures, per row i with
weights p over the allowed keys j:

    entropy            -sum p log p (nats)
    entropy_norm       entropy / log(number of allowed keys): 0 = one key, 1 = uniform
    max_weight         the largest weight: how concentrated the head is
    previous, same, next, left, right
                       the offset profile: the mass on keys at offset j - c(i) = -1, 0, +1,
                       < -1 and > +1 (sums to 1), where c(i) = i for self-attention and, for
                       cross-attention, the source position on the monotonic diagonal,
                       c(i) = round(i (S - 1) / (T - 1)) (first target to first source, last to
                       last); for cross-attention `same` is the share on the diagonal
    distance           sum p |j - c(i)|: the mean attention distance, in tokens
    sink               the mass on the end-of-sentence token (source keys) or on the start
                       symbol (target keys): where heads with nothing to do park their weight
    punctuation        the mass on keys that are punctuation marks

`sentence_means` gives each sentence's per-head mean of every measure (for the most and least
typical sentences); `Totals` adds rows up over a whole set.
"""
from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

MEASURES: tuple[str, ...] = ("entropy", "entropy_norm", "max_weight", "previous", "same", "next", "left", "right",
                             "distance", "sink", "punctuation")
OFFSETS: tuple[str, ...] = ("left", "previous", "same", "next", "right")   # the profile, left to right


def is_punctuation(piece: str) -> bool:
    """A subword piece that is only punctuation (the word-start mark ▁ ignored): "▁.", ",", "?!"."""
    text = piece.replace("▁", "")
    return bool(text) and all(unicodedata.category(c).startswith("P") for c in text)


@dataclass(frozen=True)
class Rows:
    """The layout of one batch of one kind of attention.

    query_lengths (B,), key_lengths (B,): real tokens of each sentence on each side;
    allowed (B, Tq, Tk) bool: the mask (True = may attend); diagonal: whether offsets are taken
    from the monotonic diagonal (cross-attention) rather than from the query's own position;
    sink (B, Tk) bool: each sentence's sink key; punctuation (B, Tk) bool: its punctuation keys."""
    query_lengths: np.ndarray
    key_lengths: np.ndarray
    allowed: np.ndarray
    diagonal: bool
    sink: np.ndarray
    punctuation: np.ndarray

    def centres(self) -> np.ndarray:
        """(B, Tq): c(i) for every query row (see the module's docstring)."""
        b, tq, _ = self.allowed.shape
        i = np.arange(tq, dtype=float)[None, :].repeat(b, 0)                          # (B, Tq)
        if not self.diagonal:
            return i
        ratio = (self.key_lengths - 1) / np.maximum(self.query_lengths - 1, 1)        # (B,)
        return np.floor(i * ratio[:, None] + 0.5)

    def counted(self) -> np.ndarray:
        """(B, Tq) bool: rows that are measured (a real query with at least two keys)."""
        real = np.arange(self.allowed.shape[1])[None, :] < self.query_lengths[:, None]
        return real & (self.allowed.sum(-1) >= 2)


def row_measures(attn: np.ndarray, rows: Rows) -> dict[str, np.ndarray]:
    """attn (L, B, H, Tq, Tk) -> {measure: (L, B, H, Tq)} (rows not counted hold 0; see Rows.counted)."""
    p = np.where(rows.allowed[None, :, None], attn, 0.0).astype(np.float64)         # (L, B, H, Tq, Tk)
    tk = p.shape[-1]
    offset = np.arange(tk)[None, None, :] - rows.centres()[:, :, None]              # (B, Tq, Tk)
    n_keys = rows.allowed.sum(-1)                                                   # (B, Tq)
    logp = np.log(np.where(p > 0, p, 1.0))
    entropy = -(p * logp).sum(-1)
    out = {
        "entropy": entropy,
        "entropy_norm": entropy / np.log(np.maximum(n_keys, 2))[None, :, None],
        "max_weight": p.max(-1),
        "previous": (p * (offset == -1)[None, :, None]).sum(-1),
        "same": (p * (offset == 0)[None, :, None]).sum(-1),
        "next": (p * (offset == 1)[None, :, None]).sum(-1),
        "left": (p * (offset < -1)[None, :, None]).sum(-1),
        "right": (p * (offset > 1)[None, :, None]).sum(-1),
        "distance": (p * np.abs(offset)[None, :, None]).sum(-1),
        "sink": (p * rows.sink[None, :, None, None, :]).sum(-1),
        "punctuation": (p * rows.punctuation[None, :, None, None, :]).sum(-1),
    }
    counted = rows.counted()[None, :, None]                                         # (1, B, 1, Tq)
    return {k: np.where(counted, v, 0.0) for k, v in out.items()}


def sentence_means(measures: dict[str, np.ndarray], rows: Rows) -> tuple[np.ndarray, np.ndarray]:
    """Each sentence's mean of every measure over its counted rows: (B, L, H, M) in MEASURES'
    order, and the number of counted rows (B,)."""
    n = rows.counted().sum(-1)                                                      # (B,)
    stacked = np.stack([measures[m].sum(-1) for m in MEASURES], -1)                 # (L, B, H, M)
    return stacked.transpose(1, 0, 2, 3) / np.maximum(n, 1)[:, None, None, None], n


@dataclass
class Totals:
    """Sums of every measure over the rows of a set, per layer and head: the set's means are
    sums / rows (every counted row of every sentence weighs the same)."""
    sums: np.ndarray | None = None              # (L, H, M)
    rows: int = 0
    per_sentence: list[np.ndarray] = field(default_factory=list)   # (L, H, M) per sentence, in order
    sentence_rows: list[int] = field(default_factory=list)

    def add(self, attn: np.ndarray, layout: Rows) -> None:
        measures = row_measures(attn, layout)
        sums = np.stack([measures[m].sum(axis=(1, 3)) for m in MEASURES], -1)      # (L, H, M)
        self.sums = sums if self.sums is None else self.sums + sums
        self.rows += int(layout.counted().sum())
        means, n = sentence_means(measures, layout)
        self.per_sentence += list(means)
        self.sentence_rows += [int(x) for x in n]

    def means(self) -> dict[str, np.ndarray]:
        """{measure: (L, H)} over every counted row of the set."""
        if self.sums is None or self.rows == 0:
            raise ValueError("no rows were measured")
        return {m: self.sums[..., i] / self.rows for i, m in enumerate(MEASURES)}


def typical_sentences(per_sentence: Sequence[np.ndarray], sentence_rows: Sequence[int], means: dict[str, np.ndarray],
                      n: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """For every head, the n sentences whose own means lie nearest to the head's set means and the
    n farthest (distance over the shares and entropy_norm, which share one scale), as indices into
    the set: (L, H, n) each, nearest first and farthest first. Sentences with no counted row are
    left out."""
    scale = [MEASURES.index(m) for m in ("entropy_norm", "max_weight", *OFFSETS, "sink", "punctuation")]
    keep = [i for i, r in enumerate(sentence_rows) if r > 0]
    each = np.stack([per_sentence[i][..., scale] for i in keep])                   # (N, L, H, m)
    centre = np.stack([means[MEASURES[j]] for j in scale], -1)                      # (L, H, m)
    dist = np.sqrt(((each - centre[None]) ** 2).sum(-1))                            # (N, L, H)
    order = np.argsort(dist, axis=0, kind="stable")                                 # (N, L, H)
    index = np.array(keep)[order]
    k = min(n, len(keep))
    return index[:k].transpose(1, 2, 0), index[::-1][:k].transpose(1, 2, 0)
