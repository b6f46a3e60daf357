"""Links: the address bar always names the page and holds the state a teacher shares.

The URL path names the page (`/step`, `/masks`, ...; the first page is at `/`); the
query parameters hold the settings a link carries (`Site.linked`, handed over by app/pages.py)
and the step of the step-through page. On a session's first run the parameters are read into the owners of
app/state.py (each checked by its spec; anything malformed is ignored); at the end of
every run the owners' values are written back, those that differ from their defaults.

Links made before pages had paths name the page as `view=<slug>`: `read` returns that
page so the app can open it. Links made while the attention explorer was the first page
(before the whole-model overview took `/`) have parameters at `/` but no `block`: they
open the explorer. Every link made on the overview carries `block`, so it stays there.
"""
from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import streamlit as st

from app import state
from app.settings import ALPHA, CHECKPOINT, MAX_TEXT_CHARS, TEXT, Setting, flag, index
from i18n import N_, Later

STEP, VIEW = "step", "view"   # the cursor's parameter; the old links' page parameter
CLASS, TEACHER = "class", "teacher"   # a class's join code, its teacher's secret (app/classroom.py)
SEAT = "seat"                         # a student's anonymous id in a class: a reload keeps it (one answer per poll)
BLOCK = "block"               # the overview's block (app/views/overview.py)
FORMER_LANDING = "explore"    # the page at / before the overview (the site's landing page now)
MAX_STEP = 1000



# What links and the class code know of the pages, handed to them by app/pages.py (they cannot import
# the pages, whose views import them); a `Context` carries it to a page's fragments, which write the link.
@dataclass(frozen=True, eq=False)
class Site:
    slugs: tuple[str, ...]               # every page's URL path, the first page first (it is also at /)
    linked: Mapping[str, Setting]        # every setting a link carries, by its link parameter

    @property
    def landing(self) -> str:
        return self.slugs[0]


def parse(params: Mapping[str, str], checkpoints: Iterable[str], specs: Mapping[str, Setting]) -> dict[str, Any]:
    """URL parameters -> {setting name: value} for the settings (`specs`, by parameter) that fit their spec."""
    return check(params, checkpoints, specs)[0]


def check(params: Mapping[str, str], checkpoints: Iterable[str],
          specs: Mapping[str, Setting]) -> tuple[dict[str, Any], list[Later]]:
    """URL parameters -> ({setting name: value} for the settings that fit their spec, a message for each
    parameter the app reads that does not fit: nothing is dropped in silence). A message never repeats
    the link's text: it names the parameter and what it takes."""
    out: dict[str, Any] = {}
    problems: list[Later] = []
    known = set(checkpoints)
    for param, raw in params.items():
        spec = specs.get(param)
        if spec is None:
            continue
        value = spec.from_link(raw)
        if value is None or (spec is CHECKPOINT and value not in known):
            problems.append(_problem(spec, raw, value))
            continue
        out[spec.name] = value
    if STEP in params and linked_step(params) is None:
        problems.append(Later(N_("The link's step is not a step number (0 to {most}); the page starts at step 0."),
                              most=MAX_STEP))
    return out, problems


def _problem(spec: Setting, raw: str, value: Any) -> Later:
    if spec is TEXT:
        return Later(N_("The link's sentence is {n} characters long; the app takes at most {limit}. Type or paste "
                        "a shorter one."), n=len(raw), limit=MAX_TEXT_CHARS)
    if spec is CHECKPOINT and value is not None:
        return Later(N_("The link names a model this server does not have; it opens on {default} instead."),
                     default=spec.default)
    return Later(N_("The link's “{param}” is not a value this page takes ({takes}); it shows {default} instead."),
                 param=spec.param, takes=_takes(spec), default=spec.to_link(spec.default))


def _takes(spec: Setting) -> str:
    if spec.choices is not None:
        return ", ".join(map(str, spec.choices[:6])) + (" …" if len(spec.choices) > 6 else "")
    if spec.bounds is not None:
        return f"{spec.bounds[0]:g} … {spec.bounds[1]:g}"
    return {flag: "0 | 1", index: "0, 1, 2, …"}.get(spec.parse, "…")      # in symbols: any language reads them


def linked_step(params: Mapping[str, str]) -> int | None:
    try:
        step = int(params.get(STEP, ""))
    except ValueError:
        return None
    return step if 0 <= step <= MAX_STEP else None


def read(site: Site, checkpoints: Iterable[str]) -> str | None:
    """Once per session: the link's state into the owners. Returns the page an old-style
    link (`view=...`) names, if any; on later runs too, if `view` is set again (AppTest opens
    pages this way: it has no public switch to a page that is a function)."""
    pages = site.slugs
    if state.held(state.LINK_READ):
        view = st.query_params.get(VIEW)
        return view if view in set(pages) else None
    state.hold(state.LINK_READ, True)
    params = {k: st.query_params[k] for k in st.query_params}
    values, problems = check(params, checkpoints, site.linked)
    for name, value in values.items():
        state.put(name, value)
    if VIEW in params and params[VIEW] not in set(pages):
        problems.append(Later(N_("The link names a page this app does not have; here is the first page.")))
    state.hold(state.LINK_PROBLEMS, problems)
    state.cursor().pending = linked_step(params)
    view = params.get(VIEW)
    if view in set(pages):
        return view
    if set(params) - {CLASS, TEACHER, SEAT} and BLOCK not in params and _opened_at_root(pages):
        return FORMER_LANDING
    return None


def _opened_at_root(pages: Iterable[str]) -> bool:
    """Whether the browser asked for the app's root (no page's path at the end of the URL)."""
    url = st.context.url
    if not url:
        return False                     # no browser (AppTest): pages are chosen by script hash
    return urllib.parse.urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1] not in set(pages)


def current(site: Site, values: Mapping[str, Any], step: int, page: str | None = None,
            defaults: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The owners' values -> URL parameters: the sentence, and every other setting that
    differs from its default (on the overview, its block always: see the module's text).
    `defaults` overrides a spec's default by setting name (the model's own alpha)."""
    out = {}
    specs = site.linked
    always = {TEXT} | ({specs[BLOCK]} if page == site.landing else set())
    defaults = defaults or {}
    for param, spec in specs.items():
        default = defaults.get(spec.name, spec.default)
        value = values.get(spec.name, default if spec in always else None)
        if value is None or (value == default and spec not in always):
            continue
        out[param] = spec.to_link(value)
    if step:
        out[STEP] = str(step)
    return out


def problems_once() -> list[str]:
    """What did not fit in the link this session opened, in the reader's language: said on the run that
    read it, then forgotten."""
    problems = state.held(state.LINK_PROBLEMS) or []
    state.hold(state.LINK_PROBLEMS, [])
    return [str(p) for p in problems]


def publish(site: Site, extra: Mapping[str, str] | None = None) -> dict[str, str] | None:
    """Write the current state (and `extra` parameters: a student's class) into the address bar.
    Returns the state's own parameters (what a teacher's class follows), None before the link was read."""
    if not state.held(state.LINK_READ):
        return None
    cursor = state.cursor()
    model_alpha = state.held(state.MODEL_ALPHA)
    wanted = current(site, state.values(), cursor.pending if cursor.pending is not None else cursor.step,
                     state.held(state.PAGE),
                     {ALPHA.name: model_alpha} if model_alpha is not None else None)
    shown = {**wanted, **(extra or {})}
    if dict(st.query_params) != shown:
        st.query_params.from_dict(shown)
    return wanted
