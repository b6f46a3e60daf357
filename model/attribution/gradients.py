"""Gradient attribution of each generated token's log-probability to the token embeddings of the
source and of the prefix (the embedding looked up and scaled by sqrt(d_model), before the
positional encoding is added).

    gradient x input       e . d log p(y_t) / d e, summed over the model dimension
    integrated gradients   (Sundararajan et al. 2017) (e - e') . integral_0^1 d log p(y_t)/d e at
                           e' + a (e - e') da, with the baseline e' = 0 for every token (source and
                           prefix; the positional encodings stay). Completeness: the scores of a
                           token sum to log p(y_t | e) - log p(y_t | e'); the quadrature is refined
                           until they do within 1 % (a translation model's path is far from smooth:
                           log p often jumps by several nats within a tenth of it).

Gradients are taken with `torch.autograd.grad` with respect to the embeddings only: nothing is
written to the shared model's parameters, so several threads may do this at once.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from model.attribution.scores import Scores
from model.decoding import output_log_probs
from model.transformer import Transformer

IG_STEPS = 24     # quadrature points per token to start with (tripled where completeness needs it)


@dataclass(frozen=True)
class Pass:
    """The inputs of one translation's teacher-forced pass: src (S,) ids with EOS, tgt (T,) the
    decoder inputs (start symbol, then the output), gold (T,) the generated tokens (the output,
    then EOS)."""
    src: Tensor
    tgt: Tensor
    gold: Tensor

    @classmethod
    def of(cls, model: Transformer, source: list[int], output: list[int]) -> "Pass":
        device = next(model.parameters()).device
        cfg = model.cfg
        return cls(torch.tensor(source, device=device), torch.tensor([cfg.bos_id] + output, device=device),
                   torch.tensor(output + [cfg.eos_id], device=device))

    def embeddings(self, model: Transformer) -> tuple[Tensor, Tensor]:
        """(source (S, D), target (T, D)) token embeddings, scaled, without positions."""
        with torch.no_grad():
            return model.src_embed(self.src[None])[0], model.tgt_embed(self.tgt[None])[0]


def token_log_probs(model: Transformer, p: Pass, src_emb: Tensor, tgt_emb: Tensor, position: Tensor) -> Tensor:
    """log p(gold[position[r]]) for each row r of a batch of embeddings: src_emb (R, S, D),
    tgt_emb (R, T', D) (the decoder inputs up to T' >= position + 1) -> (R,)."""
    rows = src_emb.size(0)
    src, tgt = p.src.expand(rows, -1), p.tgt[: tgt_emb.size(1)].expand(rows, -1)
    src_mask = model.src_mask(src)
    memory = model.encode(src, src_mask, embedded=src_emb)
    hidden = model.decode(tgt, memory, src_mask, embedded=tgt_emb)                 # (R, T', D)
    picked = hidden[torch.arange(rows, device=hidden.device), position]            # (R, D)
    return output_log_probs(model, picked).gather(-1, p.gold[position][:, None])[:, 0]


def _grad_mode():
    """Gradients on, whatever the caller's mode (the app decodes under inference_mode)."""
    return torch.inference_mode(False), torch.enable_grad()


def gradient_x_input(model: Transformer, p: Pass) -> Scores:
    """One batched forward and backward pass: row t holds generated token t's log-probability."""
    src_emb, tgt_emb = p.embeddings(model)
    t = tgt_emb.size(0)
    mode, grad = _grad_mode()
    with mode, grad:
        src_rows = src_emb.expand(t, -1, -1).clone().requires_grad_(True)          # (T, S, D)
        tgt_rows = tgt_emb.expand(t, -1, -1).clone().requires_grad_(True)          # (T, T, D)
        lp = token_log_probs(model, p, src_rows, tgt_rows, torch.arange(t, device=src_emb.device))
        g_src, g_tgt = torch.autograd.grad(lp.sum(), (src_rows, tgt_rows))
    source = (g_src * src_emb).sum(-1)                                              # (T, S)
    prefix = (g_tgt * tgt_emb).sum(-1)                                              # (T, T)
    return Scores("grad_x_input", source.double().numpy(), prefix.double().numpy(), joint=True, signed=True)


def gauss_legendre(steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Uniform quadrature: Gauss-Legendre points in [0, 1] and their weights (summing to 1),
    as Captum's default method."""
    x, w = np.polynomial.legendre.leggauss(steps)
    return 0.5 * (x + 1.0), 0.5 * w


def adaptive_edges(path_values: np.ndarray, steps: int, uniform_share: float = 0.3,
                   power: float = 2 / 3) -> np.ndarray:
    """Cells for the midpoint rule where the path needs them: path_values (M + 1,) are log p at
    M + 1 evenly spaced points of [0, 1]; [0, 1] is cut into `steps` cells of equal mass of the
    density uniform_share * uniform + (1 - uniform_share) * |change of log p|^power (a sudden jump
    of the probability gets many cells, no stretch gets none). -> the steps + 1 edges. The integral
    is the same; only the quadrature differs."""
    m = len(path_values) - 1
    change = np.abs(np.diff(path_values)) ** power                                 # (M,)
    mass = uniform_share * (change.sum() + 1e-12) / m + (1 - uniform_share) * change
    cdf = np.concatenate([[0.0], np.cumsum(mass)])
    return np.interp(np.linspace(0.0, 1.0, steps + 1), cdf / cdf[-1], np.linspace(0.0, 1.0, m + 1))


@dataclass
class Quadrature:
    """One token's integral so far: the points, their weights, and the attribution each point gives
    (the gradient at the point times the input, summed over the model dimension): source (n, S),
    prefix (n, seen). With cell edges (the adaptive midpoint rule) it can be refined: every cell
    split in three keeps its midpoint, so a refinement evaluates 2n new points for 3n in all."""
    alphas: np.ndarray
    weights: np.ndarray
    edges: np.ndarray | None = None
    source: np.ndarray | None = None
    prefix: np.ndarray | None = None

    @classmethod
    def midpoints(cls, edges: np.ndarray) -> "Quadrature":
        return cls(0.5 * (edges[1:] + edges[:-1]), np.diff(edges), edges)

    def estimate(self) -> tuple[np.ndarray, np.ndarray]:
        """(source (S,), prefix (seen,)): the weighted sum over the points."""
        return self.weights @ self.source, self.weights @ self.prefix

    def thirds(self) -> np.ndarray:
        """The 2n points a refinement adds: the outer midpoints of each cell's thirds."""
        left, width = self.edges[:-1], np.diff(self.edges)
        return np.stack([left + width / 6, left + 5 * width / 6], 1).reshape(-1)

    def refined(self, source: np.ndarray, prefix: np.ndarray) -> "Quadrature":
        """Every cell split in three; source / prefix: the attributions at `thirds()`, in its order."""
        left, width = self.edges[:-1], np.diff(self.edges)
        edges = np.append(np.stack([left, left + width / 3, left + 2 * width / 3], 1).reshape(-1), self.edges[-1])
        weave = lambda new, old: np.concatenate([new[0::2, None], old[:, None], new[1::2, None]], 1).reshape(  # noqa: E731
            -1, *old.shape[1:])
        q = Quadrature.midpoints(edges)
        q.source, q.prefix = weave(source, self.source), weave(prefix, self.prefix)
        return q


@dataclass(frozen=True)
class IntegratedGradients:
    scores: Scores
    steps: np.ndarray                   # (T,) quadrature points each token needed
    baseline_log_probs: np.ndarray      # (T,) log p(y_t) with every embedding at the baseline (0)
    log_probs: np.ndarray               # (T,) log p(y_t) at the input
    completeness_error: np.ndarray      # (T,) |sum of scores - (log_probs - baseline)| / |log_probs - baseline|


TOLERANCE = 0.01     # completeness error at which a token's integral is accepted
MAX_STEPS = 216      # 24 points tripled twice


def point_attributions(model: Transformer, p: Pass, t: int, alphas: np.ndarray, src_emb: Tensor,
                       tgt_emb: Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Generated token t's gradient at each point alpha of the path, times the input, summed over the
    model dimension: (source (n, S), prefix (n, seen)). One batched pass; a causal decoder runs
    only the prefix the token sees (measured: faster on CPU than several tokens padded together)."""
    seen = t + 1 if model.cfg.causal_mask else tgt_emb.size(0)
    device = src_emb.device
    a = torch.tensor(alphas, dtype=src_emb.dtype, device=device)[:, None, None]    # (n, 1, 1)
    mode, grad = _grad_mode()
    with mode, grad:
        src_rows = (a * src_emb).requires_grad_(True)                               # (n, S, D)
        tgt_rows = (a * tgt_emb[:seen]).requires_grad_(True)                        # (n, seen, D)
        lp = token_log_probs(model, p, src_rows, tgt_rows, torch.full((len(a),), t, device=device))
        g_src, g_tgt = torch.autograd.grad(lp.sum(), (src_rows, tgt_rows))         # rows are independent
    return ((g_src * src_emb).sum(-1).double().cpu().numpy(), (g_tgt * tgt_emb[:seen]).sum(-1).double().cpu().numpy())


SCAN_POINTS = 65     # evenly spaced points of the forward-only scan that places the quadrature points


@torch.no_grad()
def path_scan(model: Transformer, p: Pass, src_emb: Tensor, tgt_emb: Tensor, points: int = SCAN_POINTS) -> np.ndarray:
    """log p(y_t) for every generated token t at `points` evenly spaced points of the path from the
    baseline (0) to the input (1), in one forward pass: (points, T)."""
    a = torch.linspace(0.0, 1.0, points, dtype=src_emb.dtype, device=src_emb.device)[:, None, None]
    src, tgt = p.src.expand(points, -1), p.tgt.expand(points, -1)
    src_mask = model.src_mask(src)
    hidden = model.decode(tgt, model.encode(src, src_mask, embedded=a * src_emb), src_mask, embedded=a * tgt_emb)
    lp = output_log_probs(model, hidden)                                           # (points, T, V)
    return lp.gather(-1, p.gold.expand(points, -1)[..., None])[..., 0].double().cpu().numpy()


def _completeness_error(q: Quadrature, delta: float) -> float:
    src, pre = q.estimate()
    return abs(float(src.sum() + pre.sum()) - delta) / max(abs(delta), 1e-6)


def _token(model: Transformer, p: Pass, t: int, path: np.ndarray, steps: int, adaptive: bool,
           src_emb: Tensor, tgt_emb: Tensor) -> tuple[Quadrature, float]:
    """One token's integral: refined (cells split in three) until complete within TOLERANCE."""
    q = Quadrature.midpoints(adaptive_edges(path, steps)) if adaptive else Quadrature(*gauss_legendre(steps))
    q.source, q.prefix = point_attributions(model, p, t, q.alphas, src_emb, tgt_emb)
    delta = path[-1] - path[0]
    error = _completeness_error(q, delta)
    while adaptive and error > TOLERANCE and 3 * len(q.alphas) <= MAX_STEPS:
        q = q.refined(*point_attributions(model, p, t, q.thirds(), src_emb, tgt_emb))
        error = _completeness_error(q, delta)
    return q, error


def integrated_gradients(model: Transformer, p: Pass, steps: int = IG_STEPS, adaptive: bool = True,
                         on_progress: Callable[[int, int], None] | None = None) -> IntegratedGradients:
    """Integrated gradients of every generated token. adaptive (the default): the midpoint rule on
    cells placed by `adaptive_edges` from a forward-only scan of the path, each cell split in three
    (up to MAX_STEPS points) until the token's completeness error is within TOLERANCE; otherwise
    `steps` Gauss-Legendre points, as Captum. on_progress(tokens done, total) after each token."""
    src_emb, tgt_emb = p.embeddings(model)
    t_len = tgt_emb.size(0)
    source, prefix = np.zeros((t_len, src_emb.size(0))), np.zeros((t_len, t_len))
    used, error = np.zeros(t_len), np.zeros(t_len)
    scan = path_scan(model, p, src_emb, tgt_emb)                                   # (SCAN_POINTS, T)
    for t in range(t_len):
        q, error[t] = _token(model, p, t, scan[:, t], steps, adaptive, src_emb, tgt_emb)
        src_t, pre_t = q.estimate()
        source[t], prefix[t, :len(pre_t)], used[t] = src_t, pre_t, len(q.alphas)
        if on_progress:
            on_progress(t + 1, t_len)
    scores = Scores("integrated_gradients", source, prefix, joint=True, signed=True)
    return IntegratedGradients(scores, used, scan[0], scan[-1], error)
