"""Cached resources: the model loads once per process; explanations are cached per
(checkpoint, text, settings); figures per what they are drawn from. All are shared by
every session and must stay read-only (st.plotly_chart only copies a figure)."""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable
from pathlib import Path

import plotly.graph_objects as go
import streamlit as st
import torch

from app.admission import Gate
from app.batching import Batcher
from app.lab_jobs import Scheduler, machine_slots_from_env
from model.checkpoint import Checkpoint, find_checkpoints, load_checkpoint
from model.decoding import DecodeOptions, DecodeResult
from model.pipeline import (
    Explanation,
    decode_many,
    encoder_trace,
    explain,
    explain_decoded,
    knockout_effects,
    source_ids,
)
from model.trace import Trace

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CHECKPOINT = "multi30k-en-de"
MAX_APP_TOKENS = 100  # subword tokens of input the app accepts (keeps every view interactive)


def checkpoints_dir() -> Path:
    return Path(os.environ.get("TRANSFORMER_CHECKPOINTS", ROOT / "checkpoints"))


def available_checkpoints() -> list[Path]:
    return find_checkpoints(checkpoints_dir())


@st.cache_resource(show_spinner=False)
def _configure_threads() -> bool:
    # torch.set_num_interop_threads raises on a second call: once per process.
    # deploy/serve.py sets TRANSFORMER_THREADS so that its processes share the cores.
    torch.set_num_threads(int(os.environ.get("TRANSFORMER_THREADS", 0)) or max(1, min(2, os.cpu_count() or 1)))
    return True


@st.cache_resource(show_spinner="Loading the model…")
def get_checkpoint(path: str) -> Checkpoint:
    _configure_threads()
    ckpt = load_checkpoint(path)
    with torch.inference_mode():  # warm-up: the first user does not wait
        explain(ckpt, "A dog runs.", DecodeOptions("greedy", record_steps=True))
    return ckpt


@st.cache_resource(show_spinner=False, max_entries=64)
def get_explanation(
    path: str, text: str, opts: DecodeOptions, reference: str | None = None, qkv: bool = False,
    knockout: frozenset[str] = frozenset(), stream: bool = False,
) -> Explanation:
    """qkv: also record each head's Q, K, V (for the inside-one-head view); knockout:
    heads switched off (for the knockout view); stream: the residual stream, Add & Norm
    steps, FFN units and logits (for the overview).

    The decoding itself is done once per (model, sentence, options): the plain
    explanation's, decoded together with other sessions' sentences of the same moment
    (`decode_batcher`); the other variants only trace their own teacher-forced pass over it."""
    ckpt = get_checkpoint(path)
    if knockout:                                   # heads switched off change the decoding itself
        return explain(ckpt, text, opts, reference=reference, record_scores=True, record_qkv=qkv,
                       knockout=knockout, record_stream=stream)
    if reference is None and not qkv and not stream:
        ids = source_ids(ckpt, text)               # raises InputError here, in its own session
        return explain_decoded(ckpt, text, ids, decode_batcher()((path, opts), ids))
    plain = get_explanation(path, text, opts)
    return explain_decoded(ckpt, text, plain.source_ids, plain.result, reference=reference, record_qkv=qkv,
                           record_stream=stream)


MAX_BATCH = int(os.environ.get("TRANSFORMER_MAX_BATCH", 16))


@st.cache_resource(show_spinner=False)
def decode_batcher() -> Batcher:
    """The process's batcher of decodings: sentences of one model and one set of options
    asked for at about the same time are decoded as one batch (at most MAX_BATCH,
    $TRANSFORMER_MAX_BATCH; 1 turns batching off)."""
    def run(group: tuple[str, DecodeOptions], ids: list[list[int]]) -> list[DecodeResult]:
        path, opts = group
        return decode_many(get_checkpoint(path), ids, opts)
    return Batcher(run, max_batch=MAX_BATCH, window=0.02 if MAX_BATCH > 1 else 0.0)


@st.cache_resource(show_spinner="Switching off each head in turn…", max_entries=32)
def get_knockout_effects(path: str, text: str, opts: DecodeOptions) -> dict[str, float]:
    """Every head's and every attention layer's effect on this sentence's translation."""
    ex = get_explanation(path, text, opts)
    return knockout_effects(get_checkpoint(path), ex.source_ids, ex.result.tokens)


@st.cache_resource(show_spinner=False, max_entries=32)
def get_encoder_batch(path: str, texts: tuple[str, ...]) -> Trace:
    return encoder_trace(get_checkpoint(path), list(texts))


@st.cache_resource(show_spinner=False, max_entries=256)
def get_figure(name: str, key: Hashable, _build: Callable[[], go.Figure]) -> go.Figure:
    """The figure `name` drawn from `key` (everything it depends on), built once per process.
    A widget change that does not touch `key` then costs no figure building."""
    return _build()


# ---- admission -------------------------------------------------------------------------------
# One heavy run at a time: the decoding is batched before the line (decode_early), and what is
# left (building and sending figures) holds the GIL, so a second one in parallel only slows the
# light runs beside it (BENCHMARKS.md, session 8: 30 students, admit 1 vs 2).
ADMIT = int(os.environ.get("TRANSFORMER_ADMIT", 0)) or 1
MAX_WAITING = int(os.environ.get("TRANSFORMER_MAX_WAITING", 60))


@st.cache_resource(show_spinner=False)
def admission_gate() -> Gate:
    """The process's admission gate: ADMIT heavy page runs at once ($TRANSFORMER_ADMIT,
    default 1), at most MAX_WAITING in line ($TRANSFORMER_MAX_WAITING, default 60)."""
    return Gate(ADMIT, MAX_WAITING)


# ---- the training lab --------------------------------------------------------------------------
LAB_SLOTS = int(os.environ.get("TRANSFORMER_LAB_SLOTS", 0)) or max(1, (os.cpu_count() or 2) // 2)
LAB_MAX_SECONDS = float(os.environ.get("TRANSFORMER_LAB_MAX_SECONDS", 180))


def session_alive(session_id: str) -> bool:
    """Whether a browser is still connected to this session (True outside a server, e.g. AppTest)."""
    from streamlit.runtime import Runtime
    return not Runtime.exists() or Runtime.instance().is_active_session(session_id)


@st.cache_resource(show_spinner=False)
def lab_scheduler() -> Scheduler:
    """The process's training-lab scheduler: at most LAB_SLOTS runs train at once
    ($TRANSFORMER_LAB_SLOTS; default one per two cores), the others queue. Under
    `make serve` the limit holds for the machine ($TRANSFORMER_LAB_LOCKS)."""
    _configure_threads()
    return Scheduler(LAB_SLOTS, alive=session_alive, machine=machine_slots_from_env(LAB_SLOTS))
