"""Readings that pages show, computed from a trace or a decoding (no plotting, no Streamlit):
attention rollout, the beam search tree up to a step, where two decodings first differ,
the pieces of a word, attention summed over several tokens, two sentences' tokens aligned,
and a matrix as CSV."""
from __future__ import annotations

import csv
import difflib
import io
from collections.abc import Callable, Sequence

import numpy as np

from model.inference.decoding import StepRecord


def rollout(attn: np.ndarray) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema, 2020) through a stack of self-attention layers.

    attn (L, H, T, T) -> (T, T): heads averaged, the residual added as 0.5 A + 0.5 I,
    rows renormalised, and the layers multiplied from the first to the last.
    """
    attn = np.asarray(attn, dtype=float)
    result = np.eye(attn.shape[-1])
    for layer in attn:
        a = 0.5 * layer.mean(axis=0) + 0.5 * np.eye(attn.shape[-1])
        a = a / a.sum(axis=-1, keepdims=True)
        result = a @ result
    return result


def tree_until(
    steps: Sequence[StepRecord], upto: int, pieces: Callable[[list[int]], list[str]], pruned_only_last: bool = True
) -> tuple[list[dict], list[tuple[int, int]], dict[tuple[int, int], int]]:
    """Nodes and edges of the search tree after the decisions of steps 0..upto.

    Node (s, j) is hypothesis j of step s (x = s, y = j); a kept candidate of step s
    is hypothesis (s+1, j) in the order kept. Finished (and, at the last step shown,
    pruned) candidates hang off their parent at x = s+1. Returns (nodes, edges, index)
    where index maps (step, hypothesis index) to the node number.
    """
    nodes: list[dict] = [{"x": 0, "y": 0, "token": "<s>", "text": "<s>", "score": 0.0, "status": "live"}]
    index = {(0, 0): 0}
    edges: list[tuple[int, int]] = []
    upto = min(upto, len(steps) - 1)
    for s in range(upto + 1):
        kept, extra = 0, 0
        n_kept = sum(c.status == "kept" for c in steps[s].candidates)
        for c in steps[s].candidates:
            if c.status == "pruned" and (pruned_only_last and s != upto):
                continue
            parent = index.get((s, c.parent))
            if parent is None:
                continue
            token = pieces([c.token])[0]
            node = {
                "x": s + 1,
                "token": token,
                "score": c.score,
                "status": c.status,
                "text": f"{nodes[parent]['text']} {token}",
            }
            if c.status == "kept":
                node["y"] = kept
                index[(s + 1, kept)] = len(nodes)
                kept += 1
            else:
                node["y"] = n_kept + extra
                extra += 1
            edges.append((parent, len(nodes)))
            nodes.append(node)
    return nodes, edges, index


def chosen_token(record: StepRecord, index: int) -> int | None:
    """The token hypothesis `index` of a step continued with (kept or finished), if any."""
    for c in record.candidates:
        if c.parent == index and c.status in ("kept", "finished"):
            return c.token
    return None


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    """First position where two token sequences differ (None if equal)."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def matrix_csv(matrix, rows: Sequence[str], cols: Sequence[str]) -> str:
    """A matrix as CSV, row and column tokens as headers (prefixed with their position,
    so repeated tokens stay distinct)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([""] + [f"{j}:{c}" for j, c in enumerate(cols)])
    for i, (r, values) in enumerate(zip(rows, matrix)):
        w.writerow([f"{i}:{r}"] + [f"{float(v):.6g}" for v in values])
    return buf.getvalue()


WORD_START = "▁"        # sentencepiece's mark of a piece that starts a word


def word_pieces(pieces: Sequence[str], i: int) -> list[int]:
    """The positions of every piece of the word piece i belongs to ("▁d", "id", "n", "'", "t": one word).
    A special token (<s>, </s>, <pad>) is a word of its own."""
    if pieces[i].startswith("<") and pieces[i].endswith(">"):
        return [i]
    start = i
    while start > 0 and not pieces[start].startswith(WORD_START) and not _special(pieces[start - 1]):
        start -= 1
    end = i + 1
    while end < len(pieces) and not pieces[end].startswith(WORD_START) and not _special(pieces[end]):
        end += 1
    return list(range(start, end))


def _special(piece: str) -> bool:
    return piece.startswith("<") and piece.endswith(">")


def whole_words(pieces: Sequence[str], chosen: Sequence[int]) -> list[int]:
    """`chosen` positions widened to the whole words they are pieces of, in order."""
    return sorted({j for i in chosen for j in word_pieces(pieces, i)})


def summed_attention(attn: np.ndarray, chosen: Sequence[int], side: str) -> np.ndarray:
    """attn (L, H, Tq, Tk) summed over several tokens, for every layer and head: side "keys": how much of each
    query's attention goes to the chosen keys, (L, H, Tq), each in [0, 1]; side "queries": the attention the
    chosen queries pay to each key, averaged over them, (L, H, Tk), each row a distribution."""
    attn = np.asarray(attn, dtype=float)
    idx = list(chosen)
    if not idx:
        raise ValueError("choose at least one token")
    if side == "keys":
        return attn[..., idx].sum(axis=-1)
    if side == "queries":
        return attn[:, :, idx, :].mean(axis=2)
    raise ValueError(f"side must be 'keys' or 'queries', not {side!r}")


def aligned(a: Sequence[str], b: Sequence[str]) -> list[tuple[int, int]]:
    """The positions (i in a, j in b) of the tokens two sentences share, in order (the longest matching
    blocks, as difflib finds them): an edit of one word leaves the rest aligned."""
    matcher = difflib.SequenceMatcher(a=list(a), b=list(b), autojunk=False)
    return [(block.a + k, block.b + k) for block in matcher.get_matching_blocks() for k in range(block.size)]
