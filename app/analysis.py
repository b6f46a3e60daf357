"""Pure data shaping for the views (no Streamlit, no plotly): the beam tree up to a
step, the first step where two decodings diverge."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from model.decoding import StepRecord


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


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    """First position where two token sequences differ (None if equal)."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def parameter_counts(model) -> list[tuple[str, int]]:
    """Parameters per component of a Transformer; tied tensors are counted once."""
    seen: set[int] = set()
    rows = []
    for name, module in (
        ("embeddings (shared)" if model.cfg.tie_embeddings else "source embedding", model.src_embed),
        ("target embedding", model.tgt_embed),
        ("encoder", model.encoder),
        ("decoder", model.decoder),
        ("output projection (generator)", model.generator),
    ):
        n = 0
        for p in module.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                n += p.numel()
        if n:
            rows.append((name, n))
    return rows


def matrix_csv(matrix, rows: Sequence[str], cols: Sequence[str]) -> str:
    """A matrix as CSV, row and column tokens as headers (prefixed with their position,
    so repeated tokens stay distinct)."""
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([""] + [f"{j}:{c}" for j, c in enumerate(cols)])
    for i, (r, values) in enumerate(zip(rows, matrix)):
        w.writerow([f"{i}:{r}"] + [f"{float(v):.6g}" for v in values])
    return buf.getvalue()
