"""What one app process sets up once, whatever page its first student opens: torch's threads, how often
Streamlit looks at its config files, and what its garbage collector need not look at again."""
from __future__ import annotations

import gc

import streamlit as st
import torch

CONFIG_POLL_SECONDS = 5.0     # how often Streamlit looks at its config files here (its own default: 0.2 s)


@st.cache_resource(show_spinner=False)
def configure(threads: int) -> bool:
    """Once per process (torch.set_num_interop_threads raises on a second call). threads: torch's, from
    TRANSFORMER_THREADS, which the launcher sets so that its processes share the cores."""
    torch.set_num_threads(threads)
    slower_config_polling()
    return True


def slower_config_polling(seconds: float = CONFIG_POLL_SECONDS) -> float | None:
    """Streamlit 1.67 polls its config and secrets files five times a second in every app process, whatever
    server.fileWatcherType says: 0.50-0.57 % of a core per idle process, ~6 % of a busy one's samples
    (BENCHMARKS.md, session 33). A class's server never edits them: once every `seconds`. The period is a module
    global that each poll reads; returns the one before, or None (nothing changed) where a Streamlit names it
    otherwise."""
    from streamlit.watcher import polling_path_watcher
    before = getattr(polling_path_watcher, "_POLLING_PERIOD_SECS", None)
    if before is not None:
        polling_path_watcher._POLLING_PERIOD_SECS = seconds
    return before


@st.cache_resource(show_spinner=False)
def freeze_what_is_loaded() -> bool:
    """Once per process, when its first model is loaded: what is alive then (every import, the model, Streamlit's
    own objects: ~300k) leaves the garbage collector's sight (gc.freeze), so that a full collection walks only what
    came after. In a class of 30, each app process made one full collection among the first pages, 0.16-0.17 s
    long; now none (the ~0.05 s of younger ones stay as they were; BENCHMARKS.md, session 42). What is frozen is
    still freed when its last reference goes; only a reference cycle in it would stay."""
    gc.collect()
    gc.freeze()
    return True
