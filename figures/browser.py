"""Attention charts the browser draws: what figures/attention_charts.mjs needs to draw the grid of every layer
× head (`attention_grid`) and the one-head chart with its head menu (`attention_heads`) of one attention kind,
as compact numbers and the words around them.

The server sends a sentence's attention once (later runs only its name, `numbers_ref`) as 16-bit fixed-point
numbers (a weight w in [0, 1] as round(w · 65535): off by at most 7.7e-6, under the hover's four decimals), about
a third of the float32 figure JSON of the two charts, and builds no plotly figure at all: the browser builds both
(the same figures, tests/test_browser_charts.py compares them with the Python builders) and switches heads without
the server.
Pure functions: arrays and words in, plain JSON-able dicts out.
"""
from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence

import numpy as np

from figures.attention import GRID_HOVER, grid_names, head_names, heads_hover
from figures.common import MARGIN, STATUS_COLORS, Display, labels, scale
from i18n import _, marks

STEPS = 65535          # the fixed point's full scale: 1.0


def packed(values: np.ndarray) -> dict:
    """Weights in [0, 1], any shape, as {"shape": [...], "u16": base64 of little-endian uint16}."""
    values = np.asarray(values, dtype=np.float64)
    fixed = np.rint(np.clip(values, 0.0, 1.0) * STEPS).astype("<u2")
    return {"shape": list(values.shape), "u16": base64.b64encode(fixed.tobytes()).decode()}


def numbers_ref(numbers: dict) -> str:
    """A name for packed numbers that changes when they do: a browser that holds them already is sent this
    name instead of them again (app/attention_charts.py)."""
    digest = hashlib.blake2b(numbers["u16"].encode(), digest_size=12)
    digest.update(repr(numbers["shape"]).encode())
    return digest.hexdigest()


def unpacked(numbers: dict) -> np.ndarray:
    """What `packed` packed, as float32 (what the browser reads)."""
    fixed = np.frombuffer(base64.b64decode(numbers["u16"]), dtype="<u2")
    return (fixed.astype(np.float32) / STEPS).reshape(numbers["shape"])


def attention_charts(
    attn: np.ndarray,
    rows: Sequence[str],
    cols: Sequence[str],
    layer: int,
    head: int,
    title: str,
    row_title: str,
    col_title: str,
    display: Display,
    highlight_row: int | None = None,
) -> dict:
    """Both charts of one kind's attention attn (L, H, Tq, Tk): its numbers, tokens (as the axes show them),
    titles, hover words, the chosen head and highlighted row, and the display (font size, colour scale, the
    language's number marks). `title` heads the grid; `row_title`/`col_title` name the one-head chart's axes."""
    attn = np.asarray(attn)
    n_l, n_h, tq, tk = attn.shape
    if (tq, tk) != (len(rows), len(cols)):
        raise ValueError(f"matrices ({tq}, {tk}) do not match {len(rows)} row and {len(cols)} column tokens")
    if not (0 <= layer < n_l and 0 <= head < n_h):
        raise ValueError(f"no head ({layer}, {head}) in {n_l} layers of {n_h} heads")
    layers, heads = grid_names(n_l, n_h)
    return {
        "numbers": packed(attn),
        "rows": labels(rows), "cols": labels(cols),
        "layer": layer, "head": head, "highlight": highlight_row,
        "names": head_names(n_l, n_h),
        "grid": {"title": title, "layers": layers, "heads": heads, "hover": _(GRID_HOVER)},
        "single": {"row_title": row_title, "col_title": col_title, "hover": heads_hover(row_title, col_title)},
        "display": {"font": display.font_size, "separators": marks(), "colorscale": scale(display.sequential)},
        "chosen_colour": STATUS_COLORS["chosen"],
        "margin": MARGIN,
    }
