"""Cached resources, one of each per process, shared by every session and read-only: the configuration (read from
the environment once), the model, explanations per (checkpoint, text, options, recording), figures per what they are
drawn from, and the serving machinery (admission gate, decoding batcher, lab scheduler) of serving/."""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
import time
from collections.abc import Callable, Hashable
from pathlib import Path

import plotly.graph_objects as go
import plotly.io
import streamlit as st
import torch

from app import process
from figures import Display, shared
from i18n import _
from model.analysis import heads
from model.analysis.attribution import Attribution, Cost, attribute
from model.analysis.attribution.contrast import Contrast, contrast
from model.analysis.heads import HeadStatistics
from model.analysis.heads import store as heads_store
from model.inference.decoding import DecodeResult, ForcedResult
from model.inference.options import DecodeOptions
from model.inference.pipeline import (
    WEIGHTS,
    Explanation,
    check_prefix,
    decode_many,
    encoder_trace,
    explain,
    explain_decoded,
    explain_from_search,
    knockout_effects,
    source_ids,
    token_probabilities,
)
from model.inference.precision import FP32, quantized
from model.inference.precision import available as precision_available
from model.inference.stream import logit_lens
from model.network.trace import Recording, Trace
from model.storage import hub, places
from model.storage.checkpoint import Checkpoint, load_checkpoint
from model.storage.convert import import_marian
from serving import class_store as stores
from serving.admission import Gate
from serving.batching import Batcher
from serving.config import VARIABLES, ServingConfig
from serving.lab_jobs import MachineSlots, Scheduler, train_in_process
from serving.lab_shelf import LabShelf
from serving.once import Once, tensor_bytes

DEFAULT_CHECKPOINT = places.DEFAULT_CHECKPOINT
MAX_APP_TOKENS = 100  # subword tokens of input the app accepts (keeps every view interactive)


def config() -> ServingConfig:
    """The process's configuration (serving/config.py), made once from its environment, keyed by the TRANSFORMER_*
    variables (tests start several apps with other settings in one process)."""
    return _config(tuple(os.environ.get(name) for name in VARIABLES))


@functools.cache          # not st.cache_resource: this runs many times a run, and needs no Streamlit hashing
def _config(values: tuple[str | None, ...]) -> ServingConfig:
    return ServingConfig.from_env({k: v for k, v in zip(VARIABLES, values, strict=True) if v is not None})


def checkpoints_dir() -> Path:
    """Where new checkpoints go (the lab's, converted ones): the user's directory (model/storage/places.py)."""
    return config().checkpoints


def add_model(repo_id: str) -> Path:
    """A Marian model by its hub name, converted into the user's checkpoints (once: a model already
    there is kept). Raises HubError / ConvertError with what to do."""
    out = checkpoints_dir() / hub.local_name(repo_id)
    if (out / "config.json").is_file():
        return out
    return import_marian(hub.fetch(repo_id), out)


def available_checkpoints() -> list[Path]:
    """Every checkpoint of the shipped and the user's directories, one per name (the user's first)."""
    return places.find_in(config().search)


@st.cache_resource(show_spinner="Loading the model…", max_entries=24)   # bounded: students' lab models come and go
def get_checkpoint(path: str) -> Checkpoint:
    process.configure(config().threads)
    ckpt = load_checkpoint(path)
    with torch.inference_mode():  # warm-up: the first user does not wait (the notice's lexicon read now too)
        explain(ckpt, "A dog runs.", DecodeOptions("greedy", record_steps=True)).confidence(ckpt)
    process.freeze_what_is_loaded()
    return ckpt


@st.cache_resource(show_spinner="Preparing the fast model…", max_entries=24)
def get_served(path: str, precision: str) -> Checkpoint:
    """The checkpoint with the model that computes its sentences at `precision` (model/inference/precision.py: fp32,
    or a faster copy made once per process); what reads weights or gradients reads get_checkpoint's fp32 model."""
    ckpt = get_checkpoint(path)
    if precision == FP32 or not precision_available(precision):
        return ckpt
    served = dataclasses.replace(ckpt, model=quantized(ckpt.model, precision))
    with torch.inference_mode():  # warm-up, as get_checkpoint's
        explain(served, "A dog runs.", DecodeOptions("greedy", record_steps=True))
    return served


# ---- what a sentence's pages are drawn from ---------------------------------------------------
# Decodings, traces and the tensors read from them are kept in one cache bounded by the bytes of their tensors
# ($TRANSFORMER_CACHE_MB), not by a count: a trace recorded with the residual stream holds four times what a plain
# one does, a logit lens twice (BENCHMARKS.md, session 24). What nobody asked for in $TRANSFORMER_CACHE_IDLE_S seconds
# goes too (figures as well): a process holds the sentences its students look at now (BENCHMARKS.md, session 28).
def _kept() -> Once:
    return _cache_of(config().cache_mb * 2 ** 20, config().cache_idle_s)


KEPT_FRESH = 8       # a sentence's results kept however long nobody asked for them: the newest 8 (a page left open)
CLOCK = time.monotonic   # the caches' clock for "nobody asked for it in so many seconds" (a test moves it)


def _now() -> float:
    return CLOCK()


@st.cache_resource(show_spinner=False)
def _cache_of(max_bytes: int, idle_s: float) -> Once:
    return Once(keep=None, max_bytes=max_bytes, size=tensor_bytes, max_idle=idle_s or None, fresh=KEPT_FRESH,
                clock=_now)


def kept_bytes() -> tuple[int, int]:
    """The bytes of tensors the cache of sentences' decodings and traces holds now, and its bound."""
    return _kept().held(), _kept().max_bytes or 0


def get_explanation(path: str, text: str, opts: DecodeOptions, reference: str | None = None,
                    recording: Recording = WEIGHTS, knockout: frozenset[str] = frozenset(),
                    precision: str = FP32) -> Explanation:
    """The sentence's decoding and a trace recording what `recording` says; knockout: heads
    switched off (the knockout page); precision: the model computing it (`get_served`).

    The decoding is done once per (model, sentence, options): the plain explanation's (`WEIGHTS`), decoded with
    other sessions' sentences of the same moment (`decode_batcher`), its trace read from that search's records
    (model/inference/replay.py); the other variants trace their own teacher-forced pass over it."""
    return _kept().get(_explanation_key(path, precision, text, opts, reference, recording, knockout),
                       lambda: _explanation(path, precision, text, opts, reference, recording, knockout))


def _explanation_key(*what: object) -> tuple:    # path, precision, text, options, reference, recording, knockout
    return ("explanation", *what)


# A sentence's short model passes (a batch's decoding, a traced pass, a decoding with heads off) take turns in a
# process: at once in many sessions' threads they cost 1.5-2x the CPU each (BENCHMARKS.md, session 33). Long work
# (attribution, knockout effects, head statistics) does not take a turn: it would hold every first page up.
MODEL_TURN = threading.Lock()


def _explanation(path: str, precision: str, text: str, opts: DecodeOptions, reference: str | None,
                 recording: Recording, knockout: frozenset[str]) -> Explanation:
    ckpt = get_served(path, precision)
    if knockout:                                   # heads switched off change the decoding itself
        with MODEL_TURN:
            return explain(ckpt, text, opts, reference=reference, recording=recording, knockout=knockout)
    if reference is None and recording == WEIGHTS:
        ids = source_ids(ckpt, text)               # raises InputError here, in its own session
        check_prefix(ckpt, ids, opts)              # a forced start (the step page's "what if") that fits
        result = decode_batcher()((path, precision, opts), ids)
        if read := explain_from_search(ckpt, text, ids, result):   # no pass: the search's own records
            return read
        with MODEL_TURN:                           # a hypothesis cut at the length limit: a traced pass
            return explain_decoded(ckpt, text, ids, result, recording=WEIGHTS)
    plain = get_explanation(path, text, opts, precision=precision)
    with MODEL_TURN:
        return explain_decoded(ckpt, text, plain.source_ids, plain.result, reference=reference, recording=recording)


def explanation_ready(path: str, text: str, opts: DecodeOptions, precision: str = FP32) -> bool:
    """Whether get_explanation (the plain one) answers at once: no "Translating…" spinner is worth its thread then."""
    return _kept().ready(_explanation_key(path, precision, text, opts, None, WEIGHTS, frozenset()))


def get_token_probabilities(path: str, text: str, opts: DecodeOptions, knockout: frozenset[str] = frozenset(),
                            precision: str = FP32) -> ForcedResult:
    """Each token of the sentence's translation (then EOS): its probability and rank when the decoder is
    fed the translation so far, with `knockout`'s heads switched off (the knockout page's before/after)."""
    def compute() -> ForcedResult:
        ex = get_explanation(path, text, opts, precision=precision)
        return token_probabilities(get_served(path, precision), ex.source_ids, ex.result.tokens, knockout)
    return _kept().get(("probabilities", path, precision, text, opts, knockout), compute)


def get_logit_lens(path: str, text: str, opts: DecodeOptions, recording: Recording,
                   precision: str = FP32) -> torch.Tensor:
    """(L, T, V): each decoder layer's next-token log-probabilities over the translation, read from its trace recorded
    with the stream (`recording`); the last layer's is the model's own (the overview's output block, its logit lens)."""
    def compute() -> torch.Tensor:
        trace = get_explanation(path, text, opts, recording=recording, precision=precision).trace
        with torch.inference_mode():
            return logit_lens(get_served(path, precision).model, trace)[:, 0]
    return _kept().get(("logit lens", path, precision, text, opts, recording), compute)


@st.cache_resource(show_spinner=False)
def decode_batcher() -> Batcher:
    """The process's batcher of decodings: sentences of one model and one set of options
    asked for at about the same time are decoded as one batch (at most
    $TRANSFORMER_MAX_BATCH; 1 turns batching off)."""
    def run(group: tuple[str, str, DecodeOptions], ids: list[list[int]]) -> list[DecodeResult]:
        path, precision, opts = group
        ckpt = get_served(path, precision)
        with MODEL_TURN:
            return decode_many(ckpt, ids, opts)
    most = config().max_batch
    return Batcher(run, max_batch=most, window=0.02 if most > 1 else 0.0)


@st.cache_resource(show_spinner="Switching off each head in turn…", max_entries=32)
def get_knockout_effects(path: str, text: str, opts: DecodeOptions, precision: str = FP32) -> dict[str, float]:
    """Every head's and every attention layer's effect on this sentence's translation."""
    ex = get_explanation(path, text, opts, precision=precision)
    return knockout_effects(get_served(path, precision), ex.source_ids, ex.result.tokens)


def get_attribution(ckpt: Checkpoint, ex: Explanation, key: Hashable, upto: Cost,
                    on_progress: Callable[[int, int], None] | None = None) -> Attribution:
    """Every attribution method's reading of a translation (model/analysis/attribution) of `ckpt`, whose explanation
    `ex` is known by `key` (checkpoint path, text, options), up to the cost `upto` (Cost.INTEGRATED: seconds;
    on_progress(done, total) per token, for the session that computes). Once per process: a class on one link waits."""
    return _kept().get(("attribution", key, upto), lambda: attribute(ckpt, ex.source_ids, ex.result.tokens, upto,
                                                              on_progress=on_progress))


def get_contrast(ckpt: Checkpoint, ex: Explanation, key: Hashable, position: int, alternative: int) -> Contrast:
    """Why the translation's token at `position` and not `alternative` (model/analysis/attribution/contrast.py),
    once per process (a few seconds: integrated gradients of the difference)."""
    return _kept().get(("contrast", key, position, alternative),
                       lambda: contrast(ckpt, ex.source_ids, ex.result.tokens, position, alternative))


def attribution_ready(key: Hashable, upto: Cost) -> bool:
    """Whether get_attribution would answer at once."""
    return _kept().ready(("attribution", key, upto))


@st.cache_resource(show_spinner=False, max_entries=16)
def weights_fingerprint(path: str) -> str:
    """The fingerprint of a checkpoint's weights (model/analysis/heads), once per process (~0.04 s)."""
    return heads.fingerprint(get_checkpoint(path).model)


def get_head_statistics(path: str) -> tuple[HeadStatistics | None, str]:
    """The checkpoint's head statistics file if it is current (else None and why not), read once per
    process and version of the file."""
    file, weights = heads_store.default_path(path), weights_fingerprint(path)
    try:
        stats, why = _head_statistics(str(file), file.stat().st_mtime_ns, weights)
    except OSError:
        stats, why = None, _("{file} has not been computed for this model yet").format(file=file.name)
    if stats is None and (path, weights) in _computed_heads():      # computed here, not writable beside the model
        return _computed_heads()[(path, weights)], ""
    return stats, why


@st.cache_resource(show_spinner=False, max_entries=8)
def default_sentences(path: str) -> heads.SentenceSet | str:
    """The set a model without head statistics is offered (test2016 in its source language, from
    $TRANSFORMER_DATA), read and tokenized once per process; or why there is none."""
    try:
        return heads.read_set(get_checkpoint(path), data=config().data)
    except heads.StatisticsError as exc:          # its text, put into words where it is shown
        return exc.args[0] if exc.args else str(exc)


@st.cache_resource(show_spinner=False, max_entries=8)
def _head_statistics(file: str, version: int, weights: str) -> tuple[HeadStatistics | None, str]:
    return heads_store.current(file, weights)


@st.cache_resource(show_spinner=False)
def _head_computations() -> Once[HeadStatistics]:
    return Once(keep=4)


@st.cache_resource(show_spinner=False)
def _computed_heads() -> dict[tuple[str, str], HeadStatistics]:
    """The latest statistics computed in this process per (checkpoint, weights)."""
    return {}


def compute_head_statistics(path: str, sentences: heads.SentenceSet,
                            on_progress: heads.Progress | None = None) -> HeadStatistics:
    """Compute a checkpoint's head statistics over `sentences` and write them beside it, once per
    process (a second session asking meanwhile waits for the first)."""
    ckpt, weights = get_checkpoint(path), weights_fingerprint(path)
    key = (path, weights, heads.digest(sentences.texts))
    stats = _head_computations().get(key, lambda: heads_store.load_or_compute(
        ckpt, lambda: sentences, weights=weights, on_progress=on_progress, replace=True))
    _computed_heads()[(path, weights)] = stats
    return stats


def get_encoder_batch(path: str, texts: tuple[str, ...]) -> Trace:
    return _kept().get(("encoder batch", path, texts), lambda: encoder_trace(get_checkpoint(path), list(texts)))


def get_figure(name: str, key: Hashable, display: Display, lang: str, build: Callable[[], go.Figure]) -> go.Figure:
    """The figure `name` drawn from `key` (everything it depends on: hashable) on `display`, in the interface language
    `lang` (its titles and labels), built once per process and shared (never changed after: its dict, what
    st.plotly_chart sends, is made once too): a widget change that does not touch `key` builds no figure. Kept in one
    cache per process bounded by the bytes the figures send ($TRANSFORMER_FIGURES_MB) and by FIGURES_KEPT, oldest-used
    out first; its key is Python's own hash (a Streamlit cache hashed the key's every field on every call: ~2 ms of a
    follower's step, BENCHMARKS.md session 26)."""
    return _figures().get((name, key, display, lang), lambda: shared(display.apply(build())))


FIGURES_KEPT = 256
FIGURES_FRESH = 32   # figures kept however long nobody asked for them: the newest 32 (a few pages' worth)


def _figures() -> Once:
    return _figures_of(config().figures_mb * 2 ** 20, config().cache_idle_s)


@st.cache_resource(show_spinner=False)
def _figures_of(max_bytes: int, idle_s: float) -> Once:
    return Once(keep=FIGURES_KEPT, max_bytes=max_bytes, size=figure_bytes, max_idle=idle_s or None,
                fresh=FIGURES_FRESH, clock=_now)


def figure_bytes(fig: go.Figure) -> int:
    """What a shared figure costs the cache: the bytes of its JSON, as st.plotly_chart sends it."""
    return len(plotly.io.to_json(fig.to_dict(), validate=False))


def figures_held() -> tuple[int, int, int]:
    """The figures kept now: how many, their bytes (as sent), and the bound."""
    return len(_figures()), _figures().held(), _figures().max_bytes or 0


# ---- admission -------------------------------------------------------------------------------
# One heavy run at a time: the decoding is batched before the line (decode_early), and what is left (building and
# sending figures) holds the GIL, so a second one in parallel only slows the light runs beside it (BENCHMARKS.md,
# session 8: 30 students, admit 1 vs 2).
@st.cache_resource(show_spinner=False)
def admission_gate() -> Gate:
    """The process's admission gate: $TRANSFORMER_ADMIT heavy page runs at once (default 1), at
    most $TRANSFORMER_MAX_WAITING in line (default 60)."""
    return Gate(config().admit, config().max_waiting)


# ---- classes (serving/class_store.py) ----------------------------------------------------------
def class_store() -> stores.ClassStore | None:
    """Where this process's classes live: Redis when $TRANSFORMER_REDIS names it (`make serve`:
    every process sees every class), else this process's memory; None when class mode is off."""
    return _class_store(config().redis, config().classes)


@functools.cache          # one per process (and settings); called several times a run: no Streamlit hashing
def _class_store(redis: str | None, on: bool) -> stores.ClassStore | None:
    if not on:
        return None
    return stores.RedisStore(redis) if redis else stores.MemoryStore()


# ---- the training lab --------------------------------------------------------------------------
def session_alive(session_id: str) -> bool:
    """Whether a browser is still connected to this session (True outside a server, e.g. AppTest)."""
    from streamlit.runtime import Runtime
    return not Runtime.exists() or Runtime.instance().is_active_session(session_id)


@st.cache_resource(show_spinner=False)
def lab_scheduler() -> Scheduler:
    """The process's training-lab scheduler: at most $TRANSFORMER_LAB_SLOTS runs train at once (default one per two
    cores), the others queue. Under `make serve` the limit holds for the machine ($TRANSFORMER_LAB_LOCKS)."""
    process.configure(config().threads)
    cfg = config()
    machine = MachineSlots(cfg.lab_locks, cfg.lab_slots) if cfg.lab_locks else None
    return Scheduler(cfg.lab_slots, alive=session_alive, machine=machine,
                     runner=functools.partial(train_in_process, threads=cfg.lab_threads))


def lab_shelf() -> LabShelf | None:
    """Where a class server keeps its students' lab models (serving/lab_shelf.py); None on one's own
    machine (`make app`), where a saved lab model goes into the checkpoints folder for everybody."""
    cfg = config()
    return _lab_shelf(cfg) if cfg.lab_owned else None


@functools.cache          # one per configuration, as config()
def _lab_shelf(cfg: ServingConfig) -> LabShelf:
    return LabShelf.from_config(cfg)
