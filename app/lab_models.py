"""The training lab's saved models: where they go and who sees them.

On one's own machine (`make app`) a saved lab model goes into the checkpoints folder, in everybody's list,
as it always did. On a class server (`make serve`: $TRANSFORMER_LAB_OWNED) it goes on the shelf
(serving/lab_shelf.py): the student's own (in their checkpoint list only), bounded per student and in total,
shown to the whole class only when the teacher publishes it. A student is known by their class seat (which
their link keeps: a reload is the same student), or, in no class, by this browser session.
"""
from __future__ import annotations

import io
import secrets
import tempfile
import time
import zipfile
from pathlib import Path

import streamlit as st

from app import resources, state
from i18n import _, num
from model.training.lab import LabRun
from serving.lab_shelf import NAME, SOLO, Entry, LabShelf, ShelfRefused


def owner(create: bool = True) -> tuple[str, str] | None:
    """(group, owner) of this session on the shelf: the class's code and the seat, or SOLO and an id of
    this browser session (made on its first save; None before when not `create`)."""
    m = state.held(state.CLASS)
    if m is not None:
        return m.code, m.student
    if state.held(state.LAB_OWNER) is None:
        if not create:
            return None
        state.hold(state.LAB_OWNER, secrets.token_hex(6))
    return SOLO, state.held(state.LAB_OWNER)


def _teacher() -> bool:
    m = state.held(state.CLASS)
    return m is not None and m.teacher


def _seen(shelf: LabShelf) -> list[Entry]:
    if owner(create=False) is None:
        return []
    group, who = owner()
    return shelf.group(group) if _teacher() else shelf.visible(group, who)


def checkpoints() -> list[Path]:
    """Every checkpoint this session may open: the shipped and the user's, then the lab models it sees
    (a name already listed keeps its first place: a lab model never hides a shipped one)."""
    found = resources.available_checkpoints()
    shelf = resources.lab_shelf()
    if shelf is None:
        return found
    names = {p.name for p in found}
    for e in _seen(shelf):
        if e.name not in names:
            names.add(e.name)
            found.append(e.path)
    return found


def _said(exc: ShelfRefused) -> str:
    return _(exc.template).format(**exc.values)


def save(run: LabRun, name: str) -> None:
    """Save the lab's model as `name`, and say what happened."""
    if not NAME.fullmatch(name or ""):
        st.error(_("A checkpoint name is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit."))
        return
    shelf = resources.lab_shelf()
    if shelf is None:
        target = resources.checkpoints_dir() / name
        if target.exists():
            st.error(_("“{name}” exists already: choose another name.").format(name=name))
            return
        run.save(target)
        st.success(_("Saved as `{name}`: choose it in the sidebar's checkpoint list and every page opens it.")
                   .format(name=name))
        return
    group, who = owner()
    taken = {p.name for p in resources.available_checkpoints()}
    try:
        shelf.save(group, who, name, run.save, taken=taken.__contains__, estimate=4 * run.model.num_parameters())
    except ShelfRefused as exc:
        st.error(_said(exc))
        return
    st.success(_("Saved as `{name}`, yours: it is in your checkpoint list, no one else's; your teacher can "
                 "show it to the class.").format(name=name))


def zipped(run: LabRun, name: str) -> bytes:
    """The checkpoint directory `name`, zipped (built when the button is clicked)."""
    buffer = io.BytesIO()
    with tempfile.TemporaryDirectory() as tmp:
        directory = run.save(Path(tmp) / (name if NAME.fullmatch(name) else "lab-model"))
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
            for f in sorted(directory.iterdir()):
                zf.write(f, f"{directory.name}/{f.name}")
    return buffer.getvalue()


def _age(entry: Entry) -> str:
    minutes = max(0, int((time.time() - entry.saved) // 60))
    return _("{n} min ago").format(n=num(minutes)) if minutes < 120 else _("{n} h ago").format(n=num(minutes // 60))


def yours() -> None:
    """On a class server: this student's saved lab models, how many they may keep, each with Delete."""
    shelf = resources.lab_shelf()
    if shelf is None:
        return
    if owner(create=False) is None:
        return
    group, who = owner()
    mine = shelf.owned(group, who)
    st.caption(_("Your saved lab models: {n} of {most}. Unpublished ones are removed after {hours} hours.").format(
        n=num(len(mine)), most=num(shelf.per_owner), hours=num(round(shelf.keep_seconds / 3600))))
    for e in mine:
        c = st.columns([3, 1])
        shown = _("shown to the class") if e.published else _("only you")
        c[0].markdown(f"`{e.name}` · {e.size / 1e6:.1f} MB · {_age(e)} · {shown}")
        if c[1].button(_("Delete"), key=f"lab_delete_{e.name}", icon=":material/delete:"):
            shelf.delete(group, who, e.name)
            st.rerun()


def class_models() -> None:
    """The teacher's list of the class's lab models (class sidebar), each published or withdrawn by a toggle."""
    shelf = resources.lab_shelf()
    if shelf is None or not _teacher():
        return
    group, _who = owner()
    models = shelf.group(group)
    with st.expander(_("Lab models of the class ({n})").format(n=num(len(models))), icon=":material/model_training:"):
        if not models:
            st.caption(_("None yet: a student's model saved in the training lab appears here."))
        for e in models:
            key = f"lab_publish_{e.owner}_{e.name}"
            on = st.toggle(_("Show `{name}` to the class").format(name=e.name), value=e.published, key=key,
                           help=_("Seat {seat}, saved {age}").format(seat=e.owner[:4], age=_age(e)))
            if on != e.published:
                try:
                    shelf.publish(group, e.owner, e.name, on)
                except ShelfRefused as exc:
                    st.error(_said(exc))
