"""One method's attribution of one translation, and what every method shares.

A translation has T generated tokens (the output's tokens, then EOS), S source tokens (EOS
included) and T decoder inputs (the start symbol, then the output): generated token t is
predicted at decoder input t, from the source and the "prefix" of decoder inputs 0..t.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class Unavailable(ValueError):
    """A method cannot be computed for this model or translation; the message says why, for the user."""


@dataclass(frozen=True)
class Scores:
    """method: its key (registry.py); source (T, S): generated token x source token;
    prefix (T, T): generated token x decoder input (columns after the row are 0 in a causal
    decoder); joint: source and prefix are parts of one whole (rollout, ALTI+, gradients), so the
    share of the source means something; for raw attention and value norms the two parts come
    from different sublayers and are only compared within a part. signed: gradient methods,
    where a negative score pushed the token's log-probability down."""
    method: str
    source: np.ndarray
    prefix: np.ndarray
    joint: bool
    signed: bool = False

    def magnitudes(self) -> tuple[np.ndarray, np.ndarray]:
        """(source, prefix) as non-negative amounts (absolute values for signed methods)."""
        return (np.abs(self.source), np.abs(self.prefix)) if self.signed else (self.source, self.prefix)

    def normalised(self) -> tuple[np.ndarray, np.ndarray]:
        """(source, prefix) magnitudes as shares of each row: of both parts together for a joint
        method, of each part alone otherwise. The one colour scale of the side-by-side figures."""
        src, pre = self.magnitudes()
        if self.joint:
            total = src.sum(-1, keepdims=True) + pre.sum(-1, keepdims=True)
            return _divide(src, total), _divide(pre, total)
        return _divide(src, src.sum(-1, keepdims=True)), _divide(pre, pre.sum(-1, keepdims=True))

    def source_share(self) -> np.ndarray | None:
        """(T,): the share of each generated token's attribution that came from the source (the
        rest from the prefix); None for a method whose parts are not one whole."""
        if not self.joint:
            return None
        src, pre = self.magnitudes()
        return _divide(src.sum(-1), src.sum(-1) + pre.sum(-1))

    def ranking(self) -> np.ndarray:
        """(T, S) source positions, most important first: by value for a signed method (what
        raised the token's probability most), by magnitude otherwise."""
        return np.argsort(-self.source, axis=-1, kind="stable")


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.divide(a, b, out=np.zeros_like(a, dtype=float), where=b > 0)
