"""A joint map of one head's queries and keys (in the manner of AttentionViz, Yeh et al. 2023).

Softmax(q.k / sqrt(d)) does not change when every key moves by the same vector, nor when queries
are scaled by c and keys by 1/c. So before projecting, keys and queries are each centred on the
origin and scaled to the same mean length; then one PCA of both together puts them in one plane,
where a query lies near the keys it attends to more than in a map of either alone.
"""
from __future__ import annotations

import numpy as np


def joint_map(q: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """q (Nq, d), k (Nk, d) -> (q (Nq, 2), k (Nk, 2), the share of the joint variance the two axes
    show). Component signs are fixed (the larger end of each axis positive) so maps are stable."""
    q = q - q.mean(0)
    k = k - k.mean(0)
    nq, nk = np.linalg.norm(q, axis=1).mean(), np.linalg.norm(k, axis=1).mean()
    if nq > 0 and nk > 0:
        c = np.sqrt(nk / nq)
        q, k = q * c, k / c
    both = np.concatenate([q, k]).astype(np.float64)
    if both.shape[0] < 2 or not np.any(both):
        return np.zeros((len(q), 2)), np.zeros((len(k), 2)), 0.0
    _, s, vt = np.linalg.svd(both, full_matrices=False)
    axes = vt[:2]
    if axes.shape[0] < 2:
        axes = np.concatenate([axes, np.zeros((2 - axes.shape[0], both.shape[1]))])
    xy = both @ axes.T                                                               # (Nq + Nk, 2)
    flip = np.where(np.abs(xy.max(0)) >= np.abs(xy.min(0)), 1.0, -1.0)
    xy = xy * flip
    shown = float((s[:2] ** 2).sum() / max((s ** 2).sum(), 1e-30))
    return xy[: len(q)], xy[len(q):], shown
