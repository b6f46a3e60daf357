"""Corpus BLEU and chrF with sacrebleu, on detokenized cased text, with signatures."""
from __future__ import annotations

from dataclasses import dataclass

import sacrebleu


@dataclass
class Scores:
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    brevity: float = 1.0        # BLEU's brevity penalty (below 1: the outputs are shorter than the references)
    length_ratio: float = 1.0   # output tokens / reference tokens, as BLEU counts them

    def __str__(self) -> str:
        return f"BLEU {self.bleu:.2f} ({self.bleu_signature})  chrF {self.chrf:.2f} ({self.chrf_signature})"


def corpus_scores(hypotheses: list[str], references: list[str]) -> Scores:
    # sacrebleu does not check lengths (sacrebleu #281): a shifted line would go unnoticed.
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    bleu = sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    b = bleu.corpus_score(hypotheses, [references])
    c = chrf.corpus_score(hypotheses, [references])
    return Scores(b.score, c.score, str(bleu.get_signature()), str(chrf.get_signature()),
                  b.bp, b.sys_len / max(b.ref_len, 1))
