"""Deep links: the URL's query parameters hold the state a teacher wants to share.

On a session's first run the parameters are copied into session state (each checked
and converted; anything malformed is ignored); on every run the current state is
written back, so the address bar is always a link to what is on screen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

# URL parameter -> (session-state key, converter)
PARAMS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "text": ("text", str),
    "checkpoint": ("checkpoint", str),
    "view": ("view", str),
    "kind": ("kind", str),
    "layer": ("layer", int),
    "head": ("head", int),
    "query": ("query", int),
    "step": ("next_step", int),
    "method": ("method", str),
    "beam": ("beam_size", int),
    "alpha": ("alpha", float),
    "temperature": ("temperature", float),
    "top_k": ("top_k", int),
    "seed": ("seed", int),
    "projector": ("projector", lambda v: v.lower() in ("1", "true", "yes")),
}
CHOICES = {"method": ("beam", "greedy", "sample"), "kind": ("cross", "encoder_self", "decoder_self")}
RANGES = {
    "beam_size": (1, 16),
    "alpha": (0.0, 2.0),
    "temperature": (0.05, 2.0),
    "top_k": (0, 50),
    "seed": (0, 10_000),
    "layer": (0, 63),
    "head": (0, 63),
    "query": (0, 1000),
    "next_step": (0, 1000),
}


def parse(params: dict[str, str], views: tuple[str, ...], checkpoints: tuple[str, ...]) -> dict[str, Any]:
    """URL parameters -> session-state values, dropping what does not fit."""
    out: dict[str, Any] = {}
    for name, raw in params.items():
        if name not in PARAMS:
            continue
        key, convert = PARAMS[name]
        try:
            value = convert(raw)
        except (TypeError, ValueError):
            continue
        if key in CHOICES and value not in CHOICES[key]:
            continue
        if key == "view" and value not in views or key == "checkpoint" and value not in checkpoints:
            continue
        if key in RANGES and not RANGES[key][0] <= value <= RANGES[key][1]:
            continue
        if key == "text" and len(value) > 1000:
            continue
        out[key] = value
    return out


def restore(views: tuple[str, ...], checkpoints: tuple[str, ...]) -> None:
    """Once per session: the link's state into session state."""
    if st.session_state.get("_links_restored"):
        return
    st.session_state["_links_restored"] = True
    for key, value in parse(dict(st.query_params), views, checkpoints).items():
        st.session_state[key] = value


def current(state: Any) -> dict[str, str]:
    """Session state -> URL parameters (only what is set)."""
    out = {}
    for name, (key, _) in PARAMS.items():
        if key == "next_step":
            key = "current_step"        # what the step view showed on this run
        value = state.get(key)
        if value is None or value is False:
            continue
        out[name] = "1" if value is True else str(value)
    return out


def publish() -> None:
    """Write the current state into the address bar."""
    wanted = current(st.session_state)
    if dict(st.query_params) != wanted:
        st.query_params.from_dict(wanted)
