"""How far to trust one translation: the model's own probabilities, and how familiar the input is.

A model knows what it was trained on, and little else. Three numbers are read from one decoding:

- `mean_log_prob`: the mean log-probability of the output's tokens (EOS included): low when the
  model hesitated all the way through;
- `min_log_prob`: the lowest of them: one unsure word is enough to get a sentence wrong;
- `unseen_share`: the share of the source's words that never occur in the sentences the model was
  trained on (the checkpoint's `familiar_words.txt`): text unlike anything it has read;
- `missing_share` (issue 81): of the source's content words that the checkpoint's lexicon translates
  (`lexicon.tsv.gz`, model/inference/lexicon.py), the share none of whose translations is in the output:
  a word left out, or a rare word guessed ("Kühe" -> "coolers"). The notice names them;
- `uncovered_share` (issue 81): the share of the source's content words that the output drew almost
  nothing from: the cross-attention a word's pieces received over all output steps (mean over the heads
  of the last two decoder layers, summed over the steps) stays under UNCOVERED. A word no output token
  looked at is a word the translation may have dropped, whatever the lexicon knows. Named too.

A logistic regression fitted on val sets (`python -m model.calibrate --checkpoint DIR ...`) turns
them into P(wrong), where "wrong" means a sentence chrF below `WRONG_CHRF` against all references of
the sentence; a translation is flagged when P(wrong) reaches the threshold chosen there (by default the
one that flags 80 % of val's wrong translations). The fit is
stored in the checkpoint's config.json ("confidence"), next to the beam's alpha. A checkpoint without
one gets the probabilities alone, marked as not calibrated.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import Tensor

from i18n import _, num
from model.inference.lexicon import STOP
from model.inference.lexicon import words as lexicon_words

FAMILIAR_WORDS = "familiar_words.txt"   # in a checkpoint: one word per line, from its training sources
# Sentence chrF (all references) under which a translation counts as wrong. 60 agrees best with a person's
# judgment (every content word kept, no grammar error) on the 50 judged test sentences of each direction
# (benchmarks/judged/{en-de,de-en}.tsv: 90 % and 76 % agreement at 60, 72 % and 74 % at 40, the value before).
WRONG_CHRF = 60.0
LOW_TOKEN_PROB = 0.25                   # a token the model gave less than this is shown as unsure
FEATURES = ("mean_log_prob", "min_log_prob", "unseen_share", "missing_share", "uncovered_share")
# Attention received (summed over the output steps) under which a word counts as unread. On 40 dev sentences of the
# shipped en->de, the words its lexicon check found kept received 0.57-3.57; of those found missing, most were
# attended to and mistranslated (a rare word guessed), 3 of 62 received under 0.5 (words dropped): a rare signal
# that seldom accuses a kept word.
UNCOVERED = 0.5
MISSING_NAMED = 3                       # at most this many missing words are named
_WORD = re.compile(r"[^\W\d_]+")


def words(text: str) -> list[str]:
    """The words of a text as the familiarity check counts them: letters only, lowercased."""
    return _WORD.findall(text.lower())


def read_familiar_words(directory: str | Path) -> frozenset[str] | None:
    path = Path(directory) / FAMILIAR_WORDS
    if not path.is_file():
        return None
    return frozenset(w for w in path.read_text(encoding="utf-8").split("\n") if w)


def familiar_words_text(sources: list[str]) -> str:
    """The file content for FAMILIAR_WORDS: every word of the training sources, sorted."""
    return "\n".join(sorted({w for s in sources for w in words(s)})) + "\n"


def unseen_words(text: str, familiar: frozenset[str] | None) -> list[str]:
    """The source's words the model never read in training (in order, each once)."""
    if familiar is None:
        return []
    return list(dict.fromkeys(w for w in words(text) if w not in familiar))


def features(token_probs: list[float], text: str, familiar: frozenset[str] | None,
             lexicon_check: tuple[list[str], list[str]] = ([], []),
             coverage: list[tuple[str, float]] = ()) -> tuple[float, ...]:
    """FEATURES of one translation: token_probs are its tokens' probabilities, EOS last; lexicon_check
    is Lexicon.check(text, output): (words the lexicon knows, those of them missing from the output);
    coverage: word_coverage's (content word, attention received) of the source."""
    logs = [math.log(max(p, 1e-12)) for p in token_probs] or [0.0]
    said = words(text)
    unseen = [w for w in said if familiar is not None and w not in familiar]
    share = len(unseen) / len(said) if said else 0.0
    known, missing = lexicon_check
    uncovered = sum(c < UNCOVERED for _, c in coverage) / len(coverage) if coverage else 0.0
    return sum(logs) / len(logs), min(logs), share, len(missing) / len(known) if known else 0.0, uncovered


def word_coverage(cross: Tensor, pieces: list[str], lang: str) -> list[tuple[str, float]]:
    """Per content word of the source (lexicon.STOP's function words, punctuation and EOS left out): the
    cross-attention its pieces received from the output, summed over the output steps. cross: (L, H, T, S)
    of one sentence, its S source pieces `pieces` (EOS last)."""
    received = cross[-2:].float().mean((0, 1)).sum(0)                  # (S,): the last two layers' heads
    out: list[tuple[str, float]] = []
    start = 0
    for i in range(1, len(pieces) + 1):
        if i == len(pieces) or pieces[i].startswith("▁") or pieces[i] == "</s>":
            word = "".join(pieces[start:i]).replace("▁", "")
            said = lexicon_words(word)
            if said and said[0] not in STOP.get(lang, set()) and len(said[0]) > 1:
                out.append((word, float(received[start:i].sum())))
            start = i
            if i < len(pieces) and pieces[i] == "</s>":
                break
    return out


@dataclass(frozen=True)
class Calibration:
    """P(wrong) = sigmoid(bias + sum_i weight_i * (feature_i - mean_i) / std_i), flagged at >= threshold."""
    weights: tuple[float, ...]
    bias: float
    mean: tuple[float, ...]
    std: tuple[float, ...]
    threshold: float
    note: str = ""
    names: tuple[str, ...] = FEATURES[:3]     # the features it was fitted on, a prefix of FEATURES

    def p_wrong(self, x: tuple[float, ...]) -> float:
        """x: all FEATURES (or those it was fitted on); the fit reads its own."""
        z = self.bias + sum(w * (v - m) / s for w, v, m, s in zip(self.weights, x[:len(self.names)], self.mean,
                                                                  self.std))
        return 1.0 / (1.0 + math.exp(-max(min(z, 50.0), -50.0)))

    def to_dict(self) -> dict[str, Any]:
        return {"features": list(self.names), "weights": list(self.weights), "bias": self.bias,
                "mean": list(self.mean), "std": list(self.std), "threshold": self.threshold, "note": self.note}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Calibration":
        names = tuple(d.get("features", []))
        if not names or names != FEATURES[:len(names)]:
            raise ValueError(f"confidence features {d.get('features')} are not a prefix of {list(FEATURES)}")
        return cls(tuple(d["weights"]), float(d["bias"]), tuple(d["mean"]), tuple(d["std"]), float(d["threshold"]),
                   str(d.get("note", "")), names)


def word_at(pieces: list[str], pos: int) -> str:
    """The whole word that sentencepiece piece `pos` is part of (a piece starting with ▁ starts a word)."""
    start = pos
    while start > 0 and not pieces[start].startswith("▁"):
        start -= 1
    end = pos + 1
    while end < len(pieces) and not pieces[end].startswith("▁") and pieces[end] != "</s>":
        end += 1
    return "".join(pieces[start:end]).replace("▁", "")


@dataclass(frozen=True)
class Confidence:
    """What the app says beside a translation."""
    p_wrong: float | None            # calibrated; None: the checkpoint has no calibration
    flagged: bool
    mean_prob: float                 # geometric mean of the token probabilities
    weakest: tuple[int, float]       # (position, probability) of the least likely output token (EOS last)
    unseen: tuple[str, ...]          # source words the model never read in training
    familiarity_known: bool          # the checkpoint lists its training words
    missing: tuple[str, ...] = ()    # source words whose every lexicon translation is absent from the output
    unread: tuple[str, ...] = ()     # source words the output drew almost nothing from (cross-attention)

    def reasons(self, pieces: list[str]) -> list[str]:
        """Plain-language reasons, given the output's pieces (EOS last), in the interface's language
        (i18n/: English unless the app chose another)."""
        out = []
        if self.missing:
            named = ", ".join(f"'{w}'" for w in self.missing[:MISSING_NAMED])
            out.append(_("{words} may be missing from the translation").format(words=named))
        named_lower = {m.lower() for m in self.missing}
        unread = [w for w in self.unread if w.lower() not in named_lower][:MISSING_NAMED]
        if unread:
            out.append(_("the translation barely drew on {words}").format(words=", ".join(f"'{w}'" for w in unread)))
        if self.unseen:
            out.append(_("never read in training: {words}").format(words=", ".join(f"'{w}'" for w in self.unseen)))
        pos, p = self.weakest
        if p < LOW_TOKEN_PROB and pos < len(pieces):
            word, piece = word_at(pieces, pos), pieces[pos].replace("▁", "")
            where = (_("unsure at '{word}' (p = {p})") if word == piece else
                     _("unsure at '{word}' (p = {p} for its piece '{piece}')"))
            out.append(where.format(word=word, p=num(p, ".2f"), piece=piece))
        if self.mean_prob < 0.5:
            out.append(_("hesitant throughout (mean token probability {p})").format(p=num(self.mean_prob, ".2f")))
        return out

    def words(self, pieces: list[str]) -> tuple[str, str, bool]:
        """What a reader is told (Markdown: bold and code), a few words of it for a crowded screen, and
        whether it is a warning; in the interface's language. The app and the lesson file say the same."""
        reasons = self.reasons(pieces)
        why = " " + _("Why: {reasons}.").format(reasons="; ".join(reasons)) if reasons else ""
        mean, wrong = num(self.mean_prob, ".2f"), num(self.p_wrong or 0, ".0%")
        if self.p_wrong is None:
            return (_("Mean token probability {mean}. This model has no calibrated confidence "
                      "(`python -m model.calibrate` fits one).").format(mean=mean) + why,
                    _("mean token probability {mean}").format(mean=mean), False)
        if self.flagged:
            return (_("**Check this translation.** The model is unsure: by its own probabilities, translations "
                      "like this one are wrong {wrong} of the time.").format(wrong=wrong) + why,
                    _("Check this translation"), True)
        return (_("Confident: translations this sure are wrong about {wrong} of the time "
                  "(mean token probability {mean}).").format(wrong=wrong, mean=mean) + why, _("confident"), False)


def assess(token_probs: list[float], text: str, calibration: Calibration | None,
           familiar: frozenset[str] | None, lexicon_check: tuple[list[str], list[str]] = ([], []),
           coverage: list[tuple[str, float]] = (), suspects: list[str] | None = None) -> Confidence:
    """The Confidence of one translation of `text` whose tokens (EOS last) got token_probs; lexicon_check:
    Lexicon.check(text, output), or nothing without a lexicon; coverage: word_coverage of its trace;
    suspects: the missing words to name (Lexicon.suspects; default: all of them)."""
    x = features(token_probs, text, familiar, lexicon_check, coverage)
    p = calibration.p_wrong(x) if calibration else None
    weakest = min(enumerate(token_probs), key=lambda kv: kv[1]) if token_probs else (0, 1.0)
    return Confidence(p, p is not None and p >= calibration.threshold, math.exp(x[0]), weakest,
                      tuple(unseen_words(text, familiar)), familiar is not None,
                      tuple(lexicon_check[1] if suspects is None else suspects),
                      tuple(w for w, c in coverage if c < UNCOVERED))
