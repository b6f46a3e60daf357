"""Which picture the model's predictions depend on, measured: erase the source tokens a method
ranks highest for a generated token and see how much that token's teacher-forced log-probability
drops (ERASER comprehensiveness, DeYoung et al. 2020). A faithful method's top tokens cost the
most; randomly chosen ones are the control.

Erasing a source token hides it from every encoder self-attention and cross-attention (as padding
is hidden): its position stays, so no other token moves. At least one source token is kept.

    python -m model.attribution.faithfulness --checkpoint checkpoints/multi30k-en-de \\
        --data ../shared/data/multi30k --split test_2016_flickr --limit 500 --write
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch

from model.analysis.attribution import attribute
from model.analysis.attribution.gradients import Pass
from model.inference.decoding import output_log_probs
from model.inference.options import DecodeOptions
from model.inference.pipeline import InputError, decode_many, source_ids
from model.network.transformer import Transformer
from model.storage.checkpoint import Checkpoint

KS = (1, 3)
RANDOM = "random"
ROWS_PER_PASS = 256


@torch.inference_mode()
def erased_log_probs(model: Transformer, p: Pass, removed: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """removed (R, S) bool: the source tokens hidden in row r; positions (R,): the generated token
    whose log-probability row r reads. -> (R,)."""
    out = []
    for start in range(0, len(positions), ROWS_PER_PASS):
        rm = torch.as_tensor(removed[start:start + ROWS_PER_PASS], device=p.src.device)
        pos = torch.as_tensor(positions[start:start + ROWS_PER_PASS], device=p.src.device)
        rows = len(pos)
        src, tgt = p.src.expand(rows, -1), p.tgt.expand(rows, -1)
        src_mask = model.src_mask(src) & ~rm[:, None, None, :]                          # (R, 1, 1, S)
        hidden = model.decode(tgt, model.encode(src, src_mask), src_mask)                  # (R, T, D)
        picked = hidden[torch.arange(rows, device=hidden.device), pos]                    # (R, D)
        out.append(output_log_probs(model, picked).gather(-1, p.gold[pos][:, None])[:, 0])
    return torch.cat(out).double().cpu().numpy()


def comprehensiveness(model: Transformer, p: Pass, log_probs: np.ndarray, rankings: dict[str, np.ndarray],
                      ks: tuple[int, ...] = KS) -> dict[str, dict[int, float]]:
    """For each method (rankings: (T, S) source positions best first) and k: the mean over
    generated tokens of log p(y_t) - log p(y_t | top k erased), k at most S - 1."""
    t_len, s_len = rankings[next(iter(rankings))].shape
    keys, rows, positions = [], [], []
    for method, ranking in rankings.items():
        for k in ks:
            keep_one = min(k, s_len - 1)
            for t in range(t_len):
                mask = np.zeros(s_len, dtype=bool)
                mask[ranking[t, :keep_one]] = True
                keys.append((method, k))
                rows.append(mask)
                positions.append(t)
    erased = erased_log_probs(model, p, np.array(rows), np.array(positions))
    drops = log_probs[np.array(positions)] - erased
    out: dict[str, dict[int, float]] = {}
    for (method, k), drop in zip(keys, drops):
        out.setdefault(method, {}).setdefault(k, 0.0)
        out[method][k] += float(drop) / t_len
    return out


def random_ranking(t_len: int, s_len: int, rng: np.random.Generator) -> np.ndarray:
    return np.stack([rng.permutation(s_len) for _ in range(t_len)])


@dataclass
class Summary:
    """Per method and k: the mean drop over sentences (each sentence's tokens averaged first) and its
    standard error; how often integrated gradients met completeness; seconds per sentence."""
    sentences: int
    tokens: int
    mean: dict[str, dict[int, float]]
    stderr: dict[str, dict[int, float]]
    ig_completeness_within_1pct: float
    seconds_per_sentence: dict[str, float]

    def to_dict(self) -> dict:
        return {"sentences": self.sentences, "tokens": self.tokens,
                "drop": {m: {str(k): round(v, 4) for k, v in by_k.items()} for m, by_k in self.mean.items()},
                "stderr": {m: {str(k): round(v, 4) for k, v in by_k.items()} for m, by_k in self.stderr.items()},
                "ig_completeness_within_1pct": round(self.ig_completeness_within_1pct, 4),
                "seconds_per_sentence": {k: round(v, 3) for k, v in self.seconds_per_sentence.items()},
                "measure": "mean drop of the teacher-forced log-probability of each generated token of the model's "
                           "own greedy translation when the method's top-k source tokens are hidden "
                           "(ERASER comprehensiveness); higher = more faithful"}


@dataclass
class _Sentence:
    drops: dict[str, dict[int, float]]
    tokens: int
    complete: list[bool]
    seconds: dict[str, float]


def sentence(ckpt: Checkpoint, text: str, ks: tuple[int, ...], rng: np.random.Generator) -> _Sentence | None:
    """One sentence: translated greedily, attributed by every method, each method's top tokens erased."""
    try:
        ids = source_ids(ckpt, text)
    except InputError:
        return None
    output = decode_many(ckpt, [ids], DecodeOptions())[0].tokens
    att = attribute(ckpt, ids, output)
    rankings = {key: s.ranking() for key, s in att.scores.items()}
    rankings[RANDOM] = random_ranking(*att.scores["attention"].source.shape, rng)
    t0 = time.perf_counter()
    drops = comprehensiveness(ckpt.model, Pass.of(ckpt.model, ids, output), att.log_probs, rankings, ks)
    seconds = att.seconds | {"erasure": time.perf_counter() - t0}
    return _Sentence(drops, len(att.log_probs), list(att.ig.completeness_error <= 0.01), seconds)


def evaluate(ckpt: Checkpoint, texts: list[str], ks: tuple[int, ...] = KS, seed: int = 0, workers: int = 1,
             on_progress: Callable[[int], None] | None = None) -> Summary:
    """Comprehensiveness of every method over `texts`, each translated greedily by the model;
    `workers` threads (torch works outside the GIL: two threads of one torch thread each keep two
    cores busy). The random control of sentence i is drawn from seed + i, whatever the order."""
    def one(i: int) -> _Sentence | None:
        result = sentence(ckpt, texts[i], ks, np.random.default_rng(seed + i))
        if on_progress:
            on_progress(1)
        return result
    with ThreadPoolExecutor(max(1, workers)) as pool:
        done = [r for r in pool.map(one, range(len(texts))) if r is not None]
    per_sentence = {m: {k: [d.drops[m][k] for d in done] for k in ks} for m in (done[0].drops if done else {})}
    timing = {part: sum(d.seconds.get(part, 0.0) for d in done) / max(len(done), 1) for part in
              (done[0].seconds if done else {})}
    within = [c for d in done for c in d.complete]
    mean = {m: {k: float(np.mean(v)) for k, v in by_k.items()} for m, by_k in per_sentence.items()}
    stderr = {m: {k: float(np.std(v, ddof=1) / math.sqrt(len(v))) if len(v) > 1 else 0.0 for k, v in by_k.items()}
              for m, by_k in per_sentence.items()}
    return Summary(len(done), sum(d.tokens for d in done), mean, stderr,
                   float(np.mean(within)) if within else float("nan"), timing)


def table(summary: Summary, labels: dict[str, str], ks: tuple[int, ...] = KS) -> str:
    """A Markdown table, most faithful (top-1) first."""
    order = sorted(summary.mean, key=lambda m: -summary.mean[m][ks[0]])
    head = "| method | " + " | ".join(f"drop, top-{k} erased" for k in ks) + " |"
    lines = [head, "|---|" + "---:|" * len(ks)]
    for m in order:
        cells = " | ".join(f"{summary.mean[m][k]:.3f} ± {summary.stderr[m][k]:.3f}" for k in ks)
        lines.append(f"| {labels.get(m, 'random source tokens (control)' if m == RANDOM else m)} | {cells} |")
    return "\n".join(lines)
