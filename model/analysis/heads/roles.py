"""A name for what a head does, from its numbers over a set: the first rule that holds.

The rules are data (shown on the app's page as they are written here): a role says only what
the statistics support, e.g. "previous token" when at least 40 % of the head's attention, over
every row of the set, lands on the token just before the query.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from i18n import N_


@dataclass(frozen=True)
class Rule:
    role: str                       # marked for the catalog (i18n/): `_(rule.role)` where shown
    kinds: tuple[str, ...]          # the attention kinds it applies to
    text: str                       # the rule, for a student (marked too)
    holds: Callable[[dict[str, float]], bool]


POSITION = 0.4      # a fixed position holding 40 % of the mass, where a uniform row of 15 keys gives it 7 %
SELF = ("encoder_self", "decoder_self")
ALL = ("encoder_self", "decoder_self", "cross")
RULES: tuple[Rule, ...] = (
    Rule(N_("end-of-sentence sink"), ("encoder_self", "cross"), N_("at least 40 % of its attention on the source's "
         "end-of-sentence token"), lambda m: m["sink"] >= POSITION),
    Rule(N_("start-symbol sink"), ("decoder_self",), N_("at least 40 % of its attention on the start symbol"),
         lambda m: m["sink"] >= POSITION),
    Rule(N_("previous token"), SELF, N_("at least 40 % of its attention on the token just before the query"),
         lambda m: m["previous"] >= POSITION),
    Rule(N_("same token"), SELF, N_("at least 40 % of its attention on the query's own token"),
         lambda m: m["same"] >= POSITION),
    Rule(N_("next token"), ("encoder_self",), N_("at least 40 % of its attention on the token just after the query"),
         lambda m: m["next"] >= POSITION),
    Rule(N_("diagonal / alignment"), ("cross",), N_("at least half its attention within one token of the monotonic "
         "diagonal (first output word to first source word, last to last)"),
         lambda m: m["previous"] + m["same"] + m["next"] >= 0.5),
    Rule(N_("punctuation"), ALL, N_("at least 40 % of its attention on punctuation marks"),
         lambda m: m["punctuation"] >= 0.4),
    Rule(N_("broad / averaging"), ALL, N_("its rows' entropy at least 75 % of the uniform distribution's"),
         lambda m: m["entropy_norm"] >= 0.75),
    Rule(N_("focused, by content"), ALL, N_("its largest weight at least 0.5 on average, on no fixed position"),
         lambda m: m["max_weight"] >= 0.5),
    Rule(N_("mixed"), ALL, N_("none of the rules above holds"), lambda m: True),
)


def role(kind: str, means: dict[str, float]) -> Rule:
    """The first rule of RULES for `kind` that the head's set means (measure -> value) satisfy."""
    return next(r for r in RULES if kind in r.kinds and r.holds(means))


def roles(kind: str, means: dict[str, np.ndarray]) -> list[list[str]]:
    """(L, H) role names for every head of one kind, from {measure: (L, H)}."""
    n_layers, n_heads = next(iter(means.values())).shape
    return [[role(kind, {m: float(v[i, h]) for m, v in means.items()}).role for h in range(n_heads)]
            for i in range(n_layers)]
