"""Corpus BLEU and chrF with sacrebleu, on detokenized cased text, with signatures.

References come one per hypothesis (``list[str]``) or several (``list[list[str]]``, one list per
hypothesis, as many as that sentence has: Tatoeba gives one English sentence several German
translations). sacrebleu wants streams of equal length, so a sentence with fewer references repeats
its first one: a repeated reference changes neither BLEU's clipped counts nor its closest reference
length, nor chrF's best-matching reference.
"""
from __future__ import annotations

from dataclasses import dataclass

import sacrebleu

References = list[str] | list[list[str]]
# Source sentences by length in words (whitespace-separated), for BLEU by length: (first, last); None: no end
LENGTH_BUCKETS: tuple[tuple[int, int | None], ...] = ((1, 5), (6, 10), (11, 15), (16, None))


@dataclass
class Scores:
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    brevity: float = 1.0        # BLEU's brevity penalty (below 1: the outputs are shorter than the references)
    length_ratio: float = 1.0   # output tokens / reference tokens, as BLEU counts them
    bleu_lowercase: float | None = None   # the same BLEU with case ignored (when asked for)

    def __str__(self) -> str:
        lc = "" if self.bleu_lowercase is None else f"  lowercased BLEU {self.bleu_lowercase:.2f}"
        return f"BLEU {self.bleu:.2f} ({self.bleu_signature})  chrF {self.chrf:.2f} ({self.chrf_signature}){lc}"


def reference_streams(references: References) -> list[list[str]]:
    """sacrebleu's layout: one stream per reference slot, each as long as the hypotheses."""
    per_sentence = [[r] if isinstance(r, str) else list(r) for r in references]
    if any(not refs for refs in per_sentence):
        raise ValueError("a sentence has no reference")
    width = max((len(refs) for refs in per_sentence), default=1)
    padded = [refs + [refs[0]] * (width - len(refs)) for refs in per_sentence]
    return [list(stream) for stream in zip(*padded)] if padded else [[]]


def corpus_scores(hypotheses: list[str], references: References, lowercase_too: bool = False) -> Scores:
    # sacrebleu does not check lengths (sacrebleu #281): a shifted line would go unnoticed.
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    streams = reference_streams(references)
    bleu = sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    b = bleu.corpus_score(hypotheses, streams)
    c = chrf.corpus_score(hypotheses, streams)
    lc = sacrebleu.metrics.BLEU(lowercase=True).corpus_score(hypotheses, streams).score if lowercase_too else None
    return Scores(b.score, c.score, str(bleu.get_signature()), str(chrf.get_signature()),
                  b.bp, b.sys_len / max(b.ref_len, 1), lc)


def bucket_label(first: int, last: int | None) -> str:
    return f"{first}-{last}" if last is not None else f"{first}+"


def scores_by_length(sources: list[str], hypotheses: list[str], references: References,
                     buckets: tuple[tuple[int, int | None], ...] = LENGTH_BUCKETS) -> list[dict[str, object]]:
    """Corpus BLEU and chrF of the sentences whose source has a bucket's number of words, per bucket:
    [{"words": "1-5", "sentences": n, "bleu": ..., "chrf": ...}, ...]; a bucket with no sentence has
    None for its scores (a score of 0 would say the model failed them)."""
    if not len(sources) == len(hypotheses) == len(references):
        raise ValueError(f"{len(sources)} sources, {len(hypotheses)} hypotheses, {len(references)} references")
    rows, words = [], [len(s.split()) for s in sources]
    for first, last in buckets:
        chosen = [i for i, n in enumerate(words) if first <= n and (last is None or n <= last)]
        scores = (corpus_scores([hypotheses[i] for i in chosen], [references[i] for i in chosen])
                  if chosen else None)
        rows.append({"words": bucket_label(first, last), "sentences": len(chosen),
                     "bleu": round(scores.bleu, 2) if scores else None,
                     "chrf": round(scores.chrf, 2) if scores else None})
    return rows
