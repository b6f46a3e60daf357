"""How to decode, apart from the engine that does it (decoding.py): the method, the beam, the length
penalty, sampling, the output's length limit, and the bounds every choice is checked against.
The command-line flags, the app's widgets and its links read these; they need no torch.

Length normalisation of a hypothesis of n generated tokens (EOS counted) with total
log-probability L:
    "gnmt"    L / ((5 + n) / 6) ** alpha   (Wu et al., 2016; alpha 0.6 by default)
    "average" L / n
    "none"    L
"""
from __future__ import annotations

from dataclasses import dataclass

# The decoding choices, stated once: the CLIs' flags and the app's widgets and links read them.
METHODS = ("greedy", "beam", "sample")
LENGTH_PENALTIES = ("gnmt", "average", "none")
BEAM_SIZES = (1, 16)          # smallest and largest beam width
ALPHAS = (0.0, 5.0)           # GNMT length-penalty exponents offered (model.tune, the app's slider)


@dataclass(frozen=True)
class DecodeOptions:
    method: str = "greedy"
    beam_size: int = 4
    length_penalty: str = "gnmt"
    alpha: float = 0.6
    temperature: float = 1.0
    top_k: int = 0           # sampling: keep the k most likely tokens (0: all)
    top_p: float = 1.0       # sampling: keep the smallest set with this much probability
    seed: int = 0
    max_len_a: float = 1.5   # output at most a * source tokens + b
    max_len_b: int = 10
    no_repeat_ngram: int = 0  # n > 0: no hypothesis may contain the same n tokens in a row twice
    record_steps: bool = False
    record_top_k: int = 5
    use_cache: bool = True   # False: re-run the decoder over every whole prefix (a slow reference)
    prefix: tuple[int, ...] = ()   # forced: the output starts with these token ids, then the method goes on

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if not BEAM_SIZES[0] <= self.beam_size <= BEAM_SIZES[1]:
            raise ValueError(f"beam size must be between {BEAM_SIZES[0]} and {BEAM_SIZES[1]}, got {self.beam_size}")
        if self.length_penalty not in LENGTH_PENALTIES:
            raise ValueError(f"length_penalty must be one of {LENGTH_PENALTIES}")
        if not ALPHAS[0] <= self.alpha <= ALPHAS[1]:
            raise ValueError(f"alpha must be between {ALPHAS[0]:g} and {ALPHAS[1]:g}, got {self.alpha:g}")
        if self.temperature <= 0:
            raise ValueError("temperature must be > 0")
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")
        if self.top_k < 0 or self.record_top_k < 1:
            raise ValueError("top_k must be >= 0 and record_top_k >= 1")
        if self.no_repeat_ngram < 0:
            raise ValueError("no_repeat_ngram must be >= 0 (0: off)")
        if not isinstance(self.prefix, tuple) or any(not isinstance(t, int) or t < 0 for t in self.prefix):
            raise ValueError("prefix must be a tuple of token ids")

    def normalise(self, log_prob: float, length: int) -> float:
        if self.length_penalty == "gnmt":
            return log_prob / (((5 + length) / 6) ** self.alpha)
        if self.length_penalty == "average":
            return log_prob / max(length, 1)
        return log_prob


def max_output_length(src_len: int, max_positions: int, a: float = 1.5, b: int = 10) -> int:
    """Output tokens allowed for a source of src_len tokens: a*src_len + b, capped by
    the model's positions (one is taken by the start symbol)."""
    return max(1, min(int(a * src_len + b), max_positions - 1))
