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

from model.analysis.attribution.scores import Scores
from model.inference.decoding import output_log_probs
from model.network.transformer import Transformer

IG_STEPS = 24     # quadrature cells per token to start with (the cells with the largest errors are then split)


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


def grad_mode():
    """Gradients on, whatever the caller's mode (the app decodes under inference_mode)."""
    return torch.inference_mode(False), torch.enable_grad()


def gradient_x_input(model: Transformer, p: Pass) -> Scores:
    """One batched forward and backward pass: row t holds generated token t's log-probability."""
    src_emb, tgt_emb = p.embeddings(model)
    t = tgt_emb.size(0)
    mode, grad = grad_mode()
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
    """One token's integral so far, by the midpoint rule on cells of [0, 1] whose edges all have a
    known log p (the path scan's points, or forward passes at new edges): edges (n + 1,), f (n + 1,)
    log p at the edges, and at each cell's midpoint the attribution (the gradient times the input,
    summed over the model dimension): source (n, S), prefix (n, seen).

    The attributions at a midpoint sum to d log p / d alpha there, so a cell's error is known
    exactly: width x that sum - (f(right) - f(left)). Refinement splits only the cells that carry
    most of the error, each in three: the middle third keeps the old midpoint, the outer two get
    new ones (and the two new edges their log p)."""
    edges: np.ndarray
    f: np.ndarray
    source: np.ndarray | None = None
    prefix: np.ndarray | None = None

    @property
    def midpoints(self) -> np.ndarray:
        return 0.5 * (self.edges[1:] + self.edges[:-1])

    @property
    def widths(self) -> np.ndarray:
        return np.diff(self.edges)

    def estimate(self) -> tuple[np.ndarray, np.ndarray]:
        """(source (S,), prefix (seen,)): the weighted sum over the midpoints."""
        return self.widths @ self.source, self.widths @ self.prefix

    def cell_errors(self) -> np.ndarray:
        """(n,): each cell's midpoint estimate of the change of log p minus the true change."""
        return self.widths * (self.source.sum(1) + self.prefix.sum(1)) - np.diff(self.f)

    def worst(self, share: float, most: int) -> np.ndarray:
        """The fewest cells (at most `most`) whose errors' sizes add up to `share` of all, in order."""
        size = np.abs(self.cell_errors())
        order = np.argsort(-size, kind="stable")
        k = int(np.searchsorted(np.cumsum(size[order]), share * size.sum())) + 1
        return np.sort(order[:max(1, min(k, most))])

    def thirds(self, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each cell split: its two new edges and its two new midpoints, (2k,) each, in order."""
        left, width = self.edges[cells], self.widths[cells]
        edges = np.stack([left + width / 3, left + 2 * width / 3], 1).reshape(-1)
        mids = np.stack([left + width / 6, left + 5 * width / 6], 1).reshape(-1)
        return edges, mids

    def split(self, cells: np.ndarray, f: np.ndarray, source: np.ndarray, prefix: np.ndarray) -> "Quadrature":
        """The cells `cells` split in three, given log p at their new edges and the attributions at
        their new midpoints (as `thirds` orders them)."""
        edges, values, src, pre = [self.edges[:1]], [self.f[:1]], [], []
        new = {c: j for j, c in enumerate(cells)}
        for c in range(len(self.edges) - 1):
            j = new.get(c)
            if j is None:
                edges.append(self.edges[c + 1:c + 2])
                values.append(self.f[c + 1:c + 2])
                src.append(self.source[c:c + 1])
                pre.append(self.prefix[c:c + 1])
                continue
            edges.append(np.array([*self.thirds(np.array([c]))[0], self.edges[c + 1]]))
            values.append(np.array([f[2 * j], f[2 * j + 1], self.f[c + 1]]))
            src.append(np.stack([source[2 * j], self.source[c], source[2 * j + 1]]))
            pre.append(np.stack([prefix[2 * j], self.prefix[c], prefix[2 * j + 1]]))
        return Quadrature(np.concatenate(edges), np.concatenate(values), np.concatenate(src), np.concatenate(pre))


@dataclass(frozen=True)
class IntegratedGradients:
    scores: Scores
    steps: np.ndarray                   # (T,) quadrature points each token needed
    baseline_log_probs: np.ndarray      # (T,) log p(y_t) with every embedding at the baseline (0)
    log_probs: np.ndarray               # (T,) log p(y_t) at the input
    completeness_error: np.ndarray      # (T,) |sum of scores - (log_probs - baseline)| / |log_probs - baseline|


TOLERANCE = 0.01     # completeness error at which a token's integral is accepted
MAX_STEPS = 216      # quadrature points per token at most
SPLIT_SHARE = 0.5    # each refinement splits the fewest cells that carry half of the cells' error


ROWS_PER_PASS = 96   # path points (of any tokens) per batched pass: bounds the memory of the backward pass


def path_points(model: Transformer, p: Pass, tokens: np.ndarray, alphas: np.ndarray, src_emb: Tensor,
                tgt_emb: Tensor, gradients: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows r = (generated token tokens[r], point alphas[r] of the path), any mix of tokens, in
    batched passes: log p(y_t) at each (R,), and with `gradients` each row's gradient times the
    input, summed over the model dimension: source (R, S), prefix (R, T) (zero beyond the token's
    own prefix: the decoder is causal). Rows are independent: one backward pass serves them all."""
    device = src_emb.device
    out_f, out_src, out_pre = [], [], []
    for start in range(0, len(alphas), ROWS_PER_PASS):
        a = torch.tensor(alphas[start:start + ROWS_PER_PASS], dtype=src_emb.dtype, device=device)[:, None, None]
        position = torch.as_tensor(tokens[start:start + ROWS_PER_PASS], device=device)
        seen = int(position.max()) + 1 if model.cfg.causal_mask else tgt_emb.size(0)
        if not gradients:
            with torch.no_grad():
                out_f.append(token_log_probs(model, p, a * src_emb, a * tgt_emb[:seen], position))
            continue
        mode, grad = grad_mode()
        with mode, grad:
            src_rows = (a * src_emb).requires_grad_(True)                           # (R, S, D)
            tgt_rows = (a * tgt_emb[:seen]).requires_grad_(True)                    # (R, seen, D)
            lp = token_log_probs(model, p, src_rows, tgt_rows, position)
            g_src, g_tgt = torch.autograd.grad(lp.sum(), (src_rows, tgt_rows))
        out_f.append(lp.detach())
        out_src.append((g_src * src_emb).sum(-1))
        pre = torch.zeros(len(a), tgt_emb.size(0), dtype=g_tgt.dtype, device=device)
        pre[:, :seen] = (g_tgt * tgt_emb[:seen]).sum(-1)
        out_pre.append(pre)
    f = torch.cat(out_f).double().cpu().numpy()
    if not gradients:
        return f, np.zeros((0, src_emb.size(0))), np.zeros((0, tgt_emb.size(0)))
    return f, torch.cat(out_src).double().cpu().numpy(), torch.cat(out_pre).double().cpu().numpy()


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


def _completeness_error(source: np.ndarray, prefix: np.ndarray, delta: float) -> float:
    """|sum of the scores - the change of log p| / |the change|."""
    return abs(float(source.sum() + prefix.sum()) - delta) / max(abs(delta), 1e-6)


def on_scan(path: np.ndarray, steps: int) -> Quadrature:
    """The first cells: `adaptive_edges` moved to the nearest points of the path scan (whose log p is
    known), at most `steps` of them."""
    m = len(path) - 1
    index = np.unique(np.round(adaptive_edges(path, steps) * m).astype(int))
    return Quadrature(index / m, path[index])


def integrated_gradients(model: Transformer, p: Pass, steps: int = IG_STEPS, adaptive: bool = True,
                         on_progress: Callable[[int, int], None] | None = None) -> IntegratedGradients:
    """Integrated gradients of every generated token. adaptive (the default): the midpoint rule on
    cells placed by `adaptive_edges` from a forward-only scan of the path, the cells with the largest
    (exactly known) errors split in three (up to MAX_STEPS points) until the token's completeness
    error is within TOLERANCE; otherwise `steps` Gauss-Legendre points, as Captum. Every round
    evaluates the new points of all unfinished tokens together. on_progress(tokens done, total)
    after each round."""
    src_emb, tgt_emb = p.embeddings(model)
    t_len = tgt_emb.size(0)
    scan = path_scan(model, p, src_emb, tgt_emb)                                   # (SCAN_POINTS, T)
    delta = scan[-1] - scan[0]                                                     # (T,)
    if adaptive:
        source, prefix, used, error = _adaptive(model, p, scan, steps, src_emb, tgt_emb, on_progress)
    else:
        alphas, weights = gauss_legendre(steps)
        _, src, pre = path_points(model, p, np.repeat(np.arange(t_len), steps), np.tile(alphas, t_len), src_emb,
                                  tgt_emb)
        source, prefix = (weights @ x.reshape(t_len, steps, -1) for x in (src, pre))   # (T, S), (T, T)
        used = np.full(t_len, steps)
        error = np.array([_completeness_error(source[t], prefix[t], delta[t]) for t in range(t_len)])
        if on_progress:
            on_progress(t_len, t_len)
    scores = Scores("integrated_gradients", source, prefix, joint=True, signed=True)
    return IntegratedGradients(scores, used, scan[0], scan[-1], error)


def _adaptive(model: Transformer, p: Pass, scan: np.ndarray, steps: int, src_emb: Tensor, tgt_emb: Tensor,
              on_progress: Callable[[int, int], None] | None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every token's Quadrature, refined in rounds: (source (T, S), prefix (T, T), points, errors)."""
    t_len = scan.shape[1]
    delta = scan[-1] - scan[0]
    qs = [on_scan(scan[:, t], steps) for t in range(t_len)]
    tokens = np.concatenate([np.full(len(q.midpoints), t) for t, q in enumerate(qs)])
    _, src, pre = path_points(model, p, tokens, np.concatenate([q.midpoints for q in qs]), src_emb, tgt_emb)
    for t, q in enumerate(qs):
        q.source, q.prefix = src[tokens == t], pre[tokens == t]
    error = np.array([_completeness_error(*q.estimate(), delta[t]) for t, q in enumerate(qs)])
    while True:
        open_ = [t for t in range(t_len) if error[t] > TOLERANCE and len(qs[t].midpoints) + 2 <= MAX_STEPS]
        if on_progress:
            on_progress(t_len - len(open_), t_len)
        if not open_:
            break
        cells = {t: qs[t].worst(SPLIT_SHARE, (MAX_STEPS - len(qs[t].midpoints)) // 2) for t in open_}
        new = {t: qs[t].thirds(cells[t]) for t in open_}                          # (edges, midpoints)
        tokens = np.concatenate([np.full(len(new[t][0]), t) for t in open_])
        f, _, _ = path_points(model, p, tokens, np.concatenate([new[t][0] for t in open_]), src_emb, tgt_emb,
                              gradients=False)
        _, src, pre = path_points(model, p, tokens, np.concatenate([new[t][1] for t in open_]), src_emb, tgt_emb)
        for t in open_:
            mine = tokens == t
            qs[t] = qs[t].split(cells[t], f[mine], src[mine], pre[mine])
            error[t] = _completeness_error(*qs[t].estimate(), delta[t])
    source = np.stack([q.estimate()[0] for q in qs])
    prefix = np.stack([q.estimate()[1] for q in qs])
    return source, prefix, np.array([len(q.midpoints) for q in qs], dtype=float), error
