"""head_statistics.json: writing, reading, and telling a usable file from a stale one.

The format (docs/head-statistics.md) is FORMAT; a file holds the fingerprint of the weights it was
computed from, so a file left beside retrained or replaced weights is recognised as stale."""
from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from i18n import N_, Later
from model.analysis.heads import FILE, FORMAT, HeadStatistics, KindStatistics, StatisticsError
from model.analysis.heads.measures import MEASURES
from model.analysis.heads.statistics import Progress, SentenceSet, compute, fingerprint
from model.inference.options import DecodeOptions
from model.storage.checkpoint import Checkpoint

ARRAYS = ("typical", "atypical", "knockout", "agreement", "queries", "keys", "shown")
PACKED = ("queries", "keys")     # the map's points: float16 (finer than a pixel) in base64, quick to read


def default_path(checkpoint_dir: str | Path) -> Path:
    return Path(checkpoint_dir) / FILE


def to_json(stats: HeadStatistics) -> dict[str, Any]:
    out = {k: getattr(stats, k) for k in ("format", "checkpoint", "fingerprint", "input", "decoding", "sentences",
                                           "translations", "source_tokens", "target_tokens", "knockout_sentences",
                                           "agreement_sentences", "notes")}
    out["seconds"] = {k: round(v, 3) for k, v in stats.seconds.items()}
    out["skipped"] = [list(s) for s in stats.skipped]
    out["measures"] = list(MEASURES)
    out["kinds"] = {name: _kind_json(k) for name, k in stats.kinds.items()}
    return out


def _kind_json(k: KindStatistics) -> dict[str, Any]:
    out: dict[str, Any] = {"rows": k.rows, "roles": k.roles,
                           "means": {m: _plain(v, 6) for m, v in k.means.items()},
                           "query_tokens": [list(t) for t in k.query_tokens],
                           "key_tokens": [list(t) for t in k.key_tokens]}
    for name in ARRAYS:
        value = getattr(k, name)
        out[name] = None if value is None else _packed(value) if name in PACKED else _plain(value, 6)
    return out


def _packed(a: np.ndarray) -> dict[str, Any]:
    return {"float16": base64.b64encode(np.asarray(a, dtype="<f2").tobytes()).decode("ascii"), "shape": list(a.shape)}


def _unpacked(d: dict[str, Any]) -> np.ndarray:
    return np.frombuffer(base64.b64decode(d["float16"]), dtype="<f2").astype(float).reshape(d["shape"])


def _plain(a: np.ndarray, digits: int) -> list:
    """Nested lists; nan as None (JSON has no nan)."""
    a = np.asarray(a)
    if a.dtype.kind in "iu":
        return a.tolist()
    rounded = np.round(a.astype(float), digits)
    return np.where(np.isnan(rounded), None, rounded).tolist()


def from_json(d: dict[str, Any]) -> HeadStatistics:
    """Raises StatisticsError for another format."""
    if d.get("format") != FORMAT:
        raise StatisticsError(f"format {d.get('format')!r}, not {FORMAT!r}")
    kinds = {name: _kind(k) for name, k in d["kinds"].items()}
    return HeadStatistics(d["checkpoint"], d["fingerprint"], d["input"], d["decoding"], d["sentences"],
                          d["source_tokens"], d["target_tokens"], d["translations"],
                          [tuple(s) for s in d["skipped"]], d["knockout_sentences"], d["agreement_sentences"],
                          d["notes"], kinds, d["seconds"])


def _kind(d: dict[str, Any]) -> KindStatistics:
    arrays = {name: None if d[name] is None else _unpacked(d[name]) if name in PACKED else
              _array(d[name], int if name in ("typical", "atypical") else float) for name in ARRAYS}
    return KindStatistics({m: _array(v, float) for m, v in d["means"].items()}, d["rows"], d["roles"],
                          query_tokens=[tuple(t) for t in d["query_tokens"]],
                          key_tokens=[tuple(t) for t in d["key_tokens"]], **arrays)


def _array(value: list, dtype: type) -> np.ndarray:
    if dtype is int:
        return np.array(value, dtype=int)
    return np.array(value, dtype=object).astype(float)      # None -> nan


def save(stats: HeadStatistics, path: str | Path) -> Path:
    """Write atomically (a page reading it meanwhile sees the old file or the new one)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(to_json(stats), ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
    tmp.replace(path)
    return path


def load(path: str | Path) -> HeadStatistics:
    """Raises StatisticsError when the file is missing, unreadable or of another format."""
    try:
        return from_json(json.loads(Path(path).read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise StatisticsError(f"{path}: no such file") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StatisticsError(f"{path}: cannot be read ({exc})") from None


def current(path: str | Path, weights: str) -> tuple[HeadStatistics | None, str]:
    """The statistics in `path` if they were computed from the weights with fingerprint `weights`
    in this format; else (None, why not: missing, unreadable, older format or other weights)."""
    try:
        stats = load(path)
    except StatisticsError as exc:
        return None, str(exc)
    if stats.fingerprint != weights:
        return None, Later(N_("{path} was computed from other weights (the checkpoint has changed since)"), path=path)
    return stats, ""


def load_or_compute(ckpt: Checkpoint, read: Callable[[], SentenceSet], path: str | Path | None = None,
                    opts: DecodeOptions | None = None, weights: str | None = None,
                    on_progress: Progress | None = None, replace: bool = False, **kw: Any) -> HeadStatistics:
    """The statistics in `path` (default: the checkpoint's own file) when they are current (and
    not `replace`), else computed over read() (raises StatisticsError) and written there; a
    directory that cannot be written keeps them in memory only (said in the result's notes).
    kw: compute()'s limits."""
    path = Path(path) if path is not None else default_path(ckpt.path)
    weights = weights or fingerprint(ckpt.model)
    stats, _ = current(path, weights)
    if stats is not None and not replace:
        return stats
    stats = compute(ckpt, read(), opts, on_progress=on_progress, weights=weights, **kw)
    try:
        save(stats, path)
    except OSError as exc:
        stats.notes.append(f"not saved ({path}: {exc.strerror or exc})")
    return stats
