"""What one address or one student may ask of a shared server (issue 42), each limit said when reached.

    joins of a class        TRANSFORMER_JOINS_PER_MINUTE per address and minute (default 60)
    classes started         TRANSFORMER_CLASSES_PER_HOUR per address and hour (default 10)
    new pages (sentences)   TRANSFORMER_SENTENCES_PER_MINUTE per student and minute, only while the server
                            is busy (others wait in the admission line); past it the student's next page
                            waits its turn, with a countdown (default 20)

An address is the browser's: behind `make serve` the one HAProxy writes into X-Forwarded-For (it replaces
whatever a browser sent), else the connection's. The join and class counts live in the class store (Redis
under `make serve`: every app process shares them); a student's own pages are counted in their session.
"""
from __future__ import annotations

import time

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from app import resources, state
from serving.admission import Gate, PageRate
from serving.class_store import StoreDown

MINUTE, HOUR = 60.0, 3600.0


def address() -> str:
    """Whose request this is: the browser's address, or (none known: a test, a bare run) this session."""
    if resources.config().proxied:
        known = st.context.headers.get("X-Forwarded-For")
    else:
        known = st.context.ip_address
    if known:
        return known.split(",")[-1].strip()
    ctx = get_script_run_ctx()
    return f"session-{ctx.session_id if ctx else 'none'}"


def over(kind: str, limit: int, window: float) -> bool:
    """Count one `kind` event of this address; True when it passes `limit` in the current window. A class
    store out of reach counts nothing (the action itself then says that the store is down)."""
    store = resources.class_store()
    if store is None:
        return False
    try:
        return store.hit(f"{kind}:{address()}", window) > limit
    except StoreDown:
        return False


def _rate() -> PageRate:
    rate = state.held(state.SENTENCE_TIMES)
    limit = resources.config().sentences_per_minute
    if rate is None or rate.limit != limit:
        rate = PageRate(limit, MINUTE)
        state.hold(state.SENTENCE_TIMES, rate)
    return rate


def busy(gate: Gate) -> bool:
    """Others wait, or every place of the gate is taken."""
    return gate.waiting > 0 or gate.running >= gate.capacity


def page_wait(gate: Gate) -> float:
    """Seconds this student's next new page must wait (serving/admission.py: PageRate)."""
    return _rate().wait(time.monotonic(), busy(gate))


def count_page() -> None:
    _rate().count(time.monotonic())
