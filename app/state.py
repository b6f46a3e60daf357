"""Where every piece of one session's state lives.

Streamlit forgets a widget's value when a run does not draw the widget (a student
leaves the page it is on). So no value a student chose lives only in a widget: each
has one owner here, in the session's `st.session_state`:

    session_state["values"]   dict: every setting's current value (the sentence, the
                              decoding settings, layer, head, ...) by the setting's name,
                              which is also its widget's key (see app/settings.py)
    session_state["cursor"]   the step-through page's StepCursor (app/cursor.py)
    session_state["link_read"]  True once the link's parameters were read (app/links.py)
    session_state["page"]     the slug of the page drawn last (app/pages.py)
    session_state["model_alpha"]  the chosen model's own beam length penalty (config.json):
                              the alpha slider's default, left out of links (app/settings.py)
    session_state["admitted"] what the session's last whole page was drawn from (page,
                              model, sentence, options): a run with anything new there
                              passes the admission gate (app/pages.py, app/admission.py)

A widget mirrors its owner: `restore` before drawing it hands the widget its value,
and `remember` after drawing stores what the widget returned. Shared, read-only things
(the model, cached explanations) are not session state: see app/resources.py.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from app.cursor import StepCursor

VALUES, CURSOR, LINK_READ, PAGE, ADMITTED = "values", "cursor", "link_read", "page", "admitted"
MODEL_ALPHA = "model_alpha"


def values() -> dict[str, Any]:
    """The owner of every setting's value (created on a session's first run)."""
    return st.session_state.setdefault(VALUES, {})


def get(name: str, default: Any = None) -> Any:
    return values().get(name, default)


def put(name: str, value: Any) -> None:
    values()[name] = value


def cursor() -> StepCursor:
    return st.session_state.setdefault(CURSOR, StepCursor())


def restore(name: str, default: Any, fix: Callable[[Any], Any] = lambda v: v) -> None:
    """Before drawing the widget `name`: hand it its value through the Session State API.

    The value is the one a student just gave the widget (still in its key), else the
    owner's (or `default`), made valid by `fix` (e.g. layer 5 after switching to a
    3-layer model). It is set every time, not only when Streamlit forgot the key: a
    widget's identity includes the page it is drawn on, so the same key on another page
    is a new widget that would otherwise start from its default."""
    ss = st.session_state
    ss[name] = fix(ss[name] if name in ss else get(name, default))


def remember(name: str, value: Any) -> Any:
    """After drawing the widget `name`: its value becomes the owner's. Returns it."""
    put(name, value)
    return value


def set_widget(name: str, value: Any) -> None:
    """Change a setting from code (a callback, a language switch): owner and widget both."""
    put(name, value)
    st.session_state[name] = value
