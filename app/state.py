"""Where every piece of one session's state lives: the only module that touches
`st.session_state` (tests/test_structure.py fails on any other access).

Streamlit forgets a widget's value when a run does not draw the widget (a student
leaves the page it is on). So no value a student chose lives only in a widget: each
has one owner here, in the session's `st.session_state`:

    "values"      dict: every setting's current value (the sentence, the decoding settings,
                  layer, head, ...) by the setting's name, which is also its widget's key
                  (app/settings.py). The widget's own key holds a mirror while it is drawn:
                  `restore` hands it the owner's value, `remember` takes back what it returned
                  (Streamlit needs the value under the widget's key to draw it with that value).
    "cursor"      the step-through page's StepCursor (below)
    "link_read"   True once the link's parameters were read (app/links.py); "link_problems" what did not
                  fit in it, said once (links.problems_once)
    "page"        the slug of the page drawn last (app/pages.py)
    "model_alpha" the chosen model's own beam length penalty (config.json): the alpha
                  slider's default, left out of links (app/settings.py)
    "admitted"    what the session's last whole page was drawn from (page, model, sentence,
                  options): a run with anything new there passes the admission gate (app/pages.py)
    "ov_clicked"  the last click on the overview's figure already applied (app/views/overview.py)
    "lab_job"     the session's training-lab Job; "lab_phase" the layout it was drawn in;
    "lab_model"   (job id, its checkpoint, a memo of its last decodings) (app/views/lab.py)
    "charts_sent" the names of the attention numbers this session's browser was sent, most recent last: the
                  explorer's charts send a name instead of numbers the browser holds (app/attention_charts.py);
    "explore_head_inline" True while the explorer's run draws its chosen head's fragment, which then leaves
                  the run's end (classroom.end_of_run) to the explorer (app/views/explore.py); "explore_blocks_layer"
                  the layer the explorer's blocks below the head (change a word) were drawn for;
                  "explore_pickers_inline" the same for the browser's layer and head pickers inside the head's
    "class"       the class this session leads or follows, a Membership (app/classroom.py), or None;
                  "class_link_read" True once the link's `class` parameter was read

Widget events that Streamlit keeps under a widget's key (a plotly chart's selection, a
slider's value inside its callback) are read with `widget`. Shared, read-only things (the
model, cached explanations, figures) are not session state: see app/resources.py.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import streamlit as st

VALUES, CURSOR, LINK_READ, PAGE, ADMITTED = "values", "cursor", "link_read", "page", "admitted"
LINK_PROBLEMS = "link_problems"
MODEL_ALPHA, OV_CLICKED = "model_alpha", "ov_clicked"
LAB_JOB, LAB_PHASE, LAB_MODEL, LAB_OWNER = "lab_job", "lab_phase", "lab_model", "lab_owner"
CLASS, CLASS_LINK_READ, SENTENCE_TIMES = "class", "class_link_read", "page_rate"
CHARTS_SENT, HEAD_INLINE, BLOCKS_LAYER = "charts_sent", "explore_head_inline", "explore_blocks_layer"
PICKERS_INLINE = "explore_pickers_inline"
OWNED = frozenset({VALUES, CURSOR, LINK_READ, LINK_PROBLEMS, PAGE, ADMITTED, MODEL_ALPHA, OV_CLICKED, LAB_JOB,
                   LAB_PHASE, LAB_MODEL, LAB_OWNER, CLASS, CLASS_LINK_READ,
                   SENTENCE_TIMES, CHARTS_SENT, HEAD_INLINE, BLOCKS_LAYER, PICKERS_INLINE})


# ---- settings: one owner, widgets mirror it ---------------------------------------------------------
def values() -> dict[str, Any]:
    """The owner of every setting's value (created on a session's first run)."""
    return st.session_state.setdefault(VALUES, {})


def get(name: str, default: Any = None) -> Any:
    return values().get(name, default)


def put(name: str, value: Any) -> None:
    values()[name] = value


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


def forget(name: str) -> None:
    """A setting back to its default (the widget's, which may be the model's own): owner and widget
    both forget it. Only before its widget is drawn in this run."""
    values().pop(name, None)
    st.session_state.pop(name, None)


def choose_next_run(name: str, value: Any) -> None:
    """Change a setting whose widget this run has already drawn: the owner takes the value and the
    widget's key is dropped, so that the next run (st.rerun) draws it with the owner's value."""
    put(name, value)
    st.session_state.pop(name, None)


def widget(key: str, default: Any = None) -> Any:
    """What Streamlit keeps under a widget's key: its value, or a chart's selection event."""
    return st.session_state.get(key, default)


def mirror(key: str, value: Any) -> None:
    """Set a widget's displayed value from its owner (a value owned outside `values()`)."""
    st.session_state[key] = value


# ---- the session's other owners ------------------------------------------------------------------
def held(key: str, default: Any = None) -> Any:
    """One of the owners listed above (OWNED)."""
    if key not in OWNED:
        raise KeyError(f"{key!r} is not an owner of app/state.py")
    return st.session_state.get(key, default)


def hold(key: str, value: Any) -> None:
    if key not in OWNED:
        raise KeyError(f"{key!r} is not an owner of app/state.py")
    st.session_state[key] = value


# ---- the step-through page's cursor ----------------------------------------------------------------
@dataclass
class StepCursor:
    """Which step of a decoding the step-through page shows.

    It belongs to one decoding (the sentence and the decoding settings, as a key): when the
    decoding changes it goes back to step 0, unless a link (or the class's teacher) asked for a
    step (`pending`), which applies to the next decoding shown. When the student leaves the page and comes
    back to the same decoding, it is where they left it. The page's buttons and slider
    only call its methods.

    `moves` counts the steps set by anything but the slider; the slider's key carries it. A
    browser's request sent before it saw a move (a second quick click, a class's half-second
    check) carries the slider's old position, and Streamlit would take that for the student
    dragging the slider back: under a new key the old position names a slider no longer drawn."""
    decoding: str | None = None   # key of the decoding the step belongs to
    step: int = 0
    playing: bool = False
    pending: int | None = None    # a step asked for by a link, not yet applied
    moves: int = 0

    def follow(self, decoding: str, n_steps: int) -> int:
        """Point at `decoding` (n_steps steps long); returns the step to show."""
        if decoding != self.decoding:
            self.decoding, self.playing = decoding, False
            self._to(0)
        if self.pending is not None:                  # a link's step (or a teacher's, for a class)
            step, self.pending = self.pending, None
            self._to(step)
        self._to(max(0, min(self.step, n_steps - 1)))
        return self.step

    @property
    def slider_key(self) -> str:
        return f"step-{self.moves}"

    def _to(self, step: int) -> None:
        if step != self.step:
            self.step, self.moves = step, self.moves + 1

    def slide(self, step: int) -> None:
        """The slider's own change: its key stays (and with it the keyboard's focus)."""
        self.step = step

    def go(self, step: int, n_steps: int) -> None:
        self._to(max(0, min(step, n_steps - 1)))

    def move(self, delta: int, n_steps: int) -> None:
        self.go(self.step + delta, n_steps)

    def reset(self) -> None:
        self.playing = False
        self._to(0)

    def toggle_play(self) -> None:
        self.playing = not self.playing

    def tick(self, n_steps: int) -> bool:
        """While playing: one step on. Returns False (and stops) at the last step."""
        if self.playing and self.step < n_steps - 1:
            self._to(self.step + 1)
            return True
        self.playing = False
        return False


def cursor() -> StepCursor:
    return st.session_state.setdefault(CURSOR, StepCursor())
