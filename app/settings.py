"""Every setting a student can choose, described once.

A `Setting` names its widget key (= its name in app/state.py's owner), its link
parameter, its default, and its bounds or choices. The same spec draws the widget
(`slider`, `selectbox`, ... below), checks a link's value (app/links.py) and writes
the link back. Decoding choices and defaults come from `DecodeOptions`.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import streamlit as st

from app import figures, state
from app.diagram import BLOCK_IDS
from model.checkpoint import Checkpoint, CheckpointError
from model.decoding import ALPHAS, BEAM_SIZES, METHODS, DecodeOptions
from model.kinds import KIND_NAMES
from model.lab import SWITCHES
from model.tasks import TASKS

MAX_TEXT_CHARS = 1000


def _flag(raw: str) -> bool:
    return raw.lower() in ("1", "true", "yes")


@dataclass(frozen=True)
class Setting:
    name: str                              # widget key, and the owner's key in app/state.py
    param: str | None                      # URL query parameter (None: not in links)
    default: Any
    parse: Callable[[str], Any] = str      # link text -> value (raises ValueError)
    bounds: tuple[float, float] | None = None
    choices: tuple | None = None
    step: float | None = None              # slider step

    def valid(self, value: Any) -> bool:
        if self.choices is not None and value not in self.choices:
            return False
        if self.bounds is not None and not self.bounds[0] <= value <= self.bounds[1]:
            return False
        return not (isinstance(value, str) and len(value) > MAX_TEXT_CHARS)

    def from_link(self, raw: str) -> Any | None:
        """The value a link's text stands for, or None when it does not fit."""
        try:
            value = self.parse(raw)
        except (TypeError, ValueError):
            return None
        return value if self.valid(value) else None

    def to_link(self, value: Any) -> str:
        return "1" if value is True else str(value)


_D = DecodeOptions()
TEXT = Setting("text", "text", "")
CHECKPOINT = Setting("checkpoint", "checkpoint", "multi30k-en-de")
METHOD = Setting("method", "method", "beam", choices=METHODS)
BEAM = Setting("beam_size", "beam", _D.beam_size, int, bounds=BEAM_SIZES)
ALPHA = Setting("alpha", "alpha", _D.alpha, float, bounds=ALPHAS, step=0.1)   # default: the model's own
NO_REPEAT = Setting("no_repeat_ngram", "no_repeat", _D.no_repeat_ngram, int, bounds=(0, 6))
TEMPERATURE = Setting("temperature", "temperature", _D.temperature, float, bounds=(0.05, 2.0), step=0.05)
TOP_K = Setting("top_k", "top_k", _D.top_k, int, bounds=(0, 50))
TOP_P = Setting("top_p", "top_p", _D.top_p, float, bounds=(0.05, 1.0), step=0.05)
SEED = Setting("seed", "seed", _D.seed, int, bounds=(0, 10_000))
PROJECTOR = Setting("projector", "projector", False, _flag)
IMAGE_FORMAT = Setting("image_format", "format", "png", choices=("png", "svg"))
KIND = Setting("kind", "kind", "cross", choices=KIND_NAMES)
LAYER = Setting("layer", "layer", 0, int, bounds=(0, 63))
HEAD = Setting("head", "head", 0, int, bounds=(0, 63))
QUERY = Setting("query", "query", None, int, bounds=(0, 1000))
HEAD_KIND = Setting("head_kind", "head_kind", "cross", choices=KIND_NAMES)
HEAD_QUERY = Setting("head_query", "head_query", 0, int, bounds=(0, 1000))
MASK_KIND = Setting("mask_kind", "mask_kind", "decoder_self", choices=KIND_NAMES)
SNAP_LAYER = Setting("snap_layer", None, -1, int)   # -1: the last layer
SNAP_HEAD = Setting("snap_head", None, 0, int)
KO_LAYERS = Setting("ko_layers", None, ())          # knockout: whole layers switched off
KO_HEADS = Setting("ko_heads", None, ())            # knockout: single heads switched off
KO_CELL = Setting("ko_cell", None, None)            # knockout: the (module, head) cell clicked in the grid
PE_DIMS = Setting("pe_dims", None, None)            # positional page: dimensions plotted (None: the page's choice)
PE_POSITIONS = Setting("pe_positions", None, 100, int)
NO_SCALE = Setting("no_scale", None, False)         # inside one head: drop 1/sqrt(d_k)
ALL_PRUNED = Setting("all_pruned", None, False)     # step page: pruned candidates of every step
# the whole-model overview (app/views/overview.py)
OV_BLOCK = Setting("ov_block", "block", "encoder.self_attn", choices=BLOCK_IDS)
OV_TOKEN = Setting("ov_token", "token", 0, int, bounds=(0, 1000))      # the source token followed
OV_POS = Setting("ov_pos", "pos", 0, int, bounds=(0, 1000))            # the decoder position followed
OV_LAYER = Setting("ov_layer", "ov_layer", 0, int, bounds=(0, 63))
OV_TEMPERATURE = Setting("ov_temperature", None, 1.0, float, bounds=(0.1, 3.0), step=0.1)
OV_TOP_K = Setting("ov_top_k", None, 0, int, bounds=(0, 50))
OV_TOP_P = Setting("ov_top_p", None, 1.0, float, bounds=(0.05, 1.0), step=0.05)
OV_UNIT = Setting("ov_unit", None, None, int)
LESSON_STEP = Setting("lesson_step", "lesson", 1, int, bounds=(1, 14))   # the guided lesson's step
# the training lab (app/views/lab.py)
LAB_TASK = Setting("lab_task", None, "reverse", choices=tuple(TASKS))
LAB_LENGTHS = Setting("lab_lengths", None, (4, 10), bounds=(1, 20))
LAB_SYMBOLS = Setting("lab_symbols", None, 20, int, bounds=(2, 26))
LAB_D_MODEL = Setting("lab_d_model", None, 64, int, choices=(16, 32, 64, 128))
LAB_HEADS = Setting("lab_heads", None, 4, int, choices=(1, 2, 4, 8))
LAB_LAYERS = Setting("lab_layers", None, 2, int, bounds=(1, 3))
LAB_D_FF = Setting("lab_d_ff", None, 256, int, choices=(32, 64, 128, 256, 512))
LAB_SWITCHES = {name: Setting(f"lab_{name}", None, True) for name in SWITCHES}
LAB_SMOOTHING = Setting("lab_smoothing", None, 0.1, float, choices=(0.0, 0.1))
LAB_WARMUP = Setting("lab_warmup", None, True)
LAB_TEACHER = Setting("lab_teacher_forcing", None, True)
LAB_STEPS = Setting("lab_steps", None, 3000, int, bounds=(50, 20_000))
LAB_SEED = Setting("lab_seed", None, 0, int, bounds=(0, 10_000))
LAB_SNAPSHOT = Setting("lab_snapshot", None, -1, int)   # step of the attention snapshot shown (-1: the last)
LAB_TEXT = Setting("lab_text", None, "")                 # the lab model's input to decode
LAB_SAVE_NAME = Setting("lab_save_name", None, "")

# Every setting that a link carries, by link parameter. The step of the step-through
# page is in links too, but its owner is the cursor (app/links.py).
LINKED: dict[str, Setting] = {s.param: s for s in (
    TEXT, CHECKPOINT, KIND, LAYER, HEAD, QUERY, METHOD, BEAM, ALPHA, NO_REPEAT, TEMPERATURE, TOP_K, TOP_P, SEED,
    PROJECTOR, IMAGE_FORMAT, HEAD_KIND, HEAD_QUERY, MASK_KIND, OV_BLOCK, OV_TOKEN, OV_POS, OV_LAYER, LESSON_STEP)
    if s.param}


# ---- widgets drawn from a spec -------------------------------------------------------------------
def _within(options: Sequence, fallback: Any) -> Callable[[Any], Any]:
    return lambda v: v if v in options else fallback


def _clamped(s: Setting) -> Callable[[Any], Any]:
    lo, hi = s.bounds
    return lambda v: min(max(v, lo), hi) if isinstance(v, int | float) else s.default


def selectbox(where: Any, s: Setting, label: str, options: Sequence, default: Any = None, **kw: Any) -> Any:
    options = list(options)
    fallback = default if default in options else s.default if s.default in options else options[0]
    state.restore(s.name, fallback, _within(options, fallback))
    return state.remember(s.name, where.selectbox(label, options, key=s.name, **kw))


def radio(where: Any, s: Setting, label: str, options: Sequence | None = None, **kw: Any) -> Any:
    options = list(options or s.choices)
    fallback = s.default if s.default in options else options[0]
    state.restore(s.name, fallback, _within(options, fallback))
    return state.remember(s.name, where.radio(label, options, key=s.name, **kw))


def slider(where: Any, s: Setting, label: str, bounds: tuple | None = None, default: Any = None, **kw: Any) -> Any:
    """A slider over the spec's bounds (or `bounds`, for ranges that depend on the model)."""
    lo, hi = bounds or s.bounds
    state.restore(s.name, s.default if default is None else default, _clamped(replace(s, bounds=(lo, hi))))
    if s.step is not None:
        kw["step"] = s.step
    return state.remember(s.name, where.slider(label, lo, hi, key=s.name, **kw))


def number_input(where: Any, s: Setting, label: str, **kw: Any) -> Any:
    state.restore(s.name, s.default, _clamped(s))
    return state.remember(s.name, where.number_input(label, s.bounds[0], s.bounds[1], key=s.name, **kw))


def multiselect(where: Any, s: Setting, label: str, options: Sequence, default: Sequence | None = None,
                **kw: Any) -> list:
    options = list(options)
    start = list(default if default is not None else s.default or ())
    state.restore(s.name, start, lambda v: [x for x in v if x in options])
    return state.remember(s.name, where.multiselect(label, options, key=s.name, **kw))


def range_slider(where: Any, s: Setting, label: str, **kw: Any) -> tuple:
    """A two-handle slider over the spec's bounds; its value is a (low, high) tuple."""
    lo, hi = s.bounds

    def fix(v: Any) -> tuple:
        ok = isinstance(v, tuple | list) and len(v) == 2 and lo <= v[0] <= v[1] <= hi
        return tuple(v) if ok else s.default
    state.restore(s.name, s.default, fix)
    return state.remember(s.name, tuple(where.slider(label, lo, hi, key=s.name, **kw)))


def text_input(where: Any, s: Setting, label: str, default: str = "", **kw: Any) -> str:
    state.restore(s.name, default or s.default, lambda v: v if isinstance(v, str) else default)
    return state.remember(s.name, where.text_input(label, key=s.name, **kw))


def toggle(where: Any, s: Setting, label: str, **kw: Any) -> bool:
    state.restore(s.name, s.default, bool)
    return state.remember(s.name, where.toggle(label, key=s.name, **kw))


def layer_head(columns: Sequence[Any], n_layers: int, n_heads: int, layer: Setting = LAYER, head: Setting = HEAD,
               default_layer: int = 0) -> tuple[int, int]:
    """The one layer / head picker: two selectboxes in the first two of `columns`."""
    chosen_layer = selectbox(columns[0], layer, "Layer", range(n_layers), default=default_layer)
    return chosen_layer, selectbox(columns[1], head, "Head", range(n_heads))


# ---- the sidebar -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Settings:
    checkpoint: Path
    opts: DecodeOptions
    projector: bool = False
    image_format: str = "png"

    @property
    def font_size(self) -> int:
        return 18 if self.projector else 12

    @property
    def colorscale(self) -> str:
        return figures.CONTRAST_COLORSCALE if self.projector else figures.COLORSCALE


HELP = {
    "method": "greedy: the likeliest token each step; beam: keep the k best partial translations; "
              "sample: draw each token at random from the model's distribution",
    "alpha": "score = log p / ((5 + length) / 6)^α; 0 = no normalisation",
    "no_repeat": "forbid the output to contain the same n subword tokens in a row twice (0 = off); "
                 "a repeat the model wanted then shows what it says instead",
    "temperature": "divides the logits: below 1 sharper, above 1 flatter",
    "top_p": "keep the smallest set of likeliest tokens whose probabilities add up to p (1 = all)",
}


def follow_model_alpha(alpha: float) -> None:
    """The alpha slider starts at the chosen model's alpha and follows it when the model
    changes, unless the student moved it away from the previous model's. The model's
    alpha is kept for the link (a link leaves out an alpha equal to its model's)."""
    ss = st.session_state
    before = ss.get(state.MODEL_ALPHA)
    if before is not None and before != alpha and state.get(ALPHA.name, before) == before:
        state.set_widget(ALPHA.name, alpha)
    ss[state.MODEL_ALPHA] = alpha


def decoding_ui(alpha: float = ALPHA.default) -> DecodeOptions:
    """The decoding widgets; `alpha` is the model's own length penalty."""
    sb = st.sidebar
    sb.subheader("Decoding")
    follow_model_alpha(alpha)
    method = radio(sb, METHOD, "Method", horizontal=True, help=HELP["method"])
    kw: dict = {"method": method, "record_steps": True, "record_top_k": 8}
    if method == "beam":
        kw["beam_size"] = slider(sb, BEAM, "Beam size")
        kw["alpha"] = slider(sb, ALPHA, "Length penalty α (GNMT)", default=alpha,
                             help=f"{HELP['alpha']}; this model's own: {alpha:g}")
    kw["no_repeat_ngram"] = number_input(sb, NO_REPEAT, "Block repeated n-grams (n, 0 = off)", help=HELP["no_repeat"])
    if method == "sample":
        kw["temperature"] = slider(sb, TEMPERATURE, "Temperature", help=HELP["temperature"])
        kw["top_k"] = slider(sb, TOP_K, "Top-k (0 = all tokens)")
        kw["top_p"] = slider(sb, TOP_P, "Top-p (nucleus)", help=HELP["top_p"])
        kw["seed"] = number_input(sb, SEED, "Seed")
    return DecodeOptions(**kw)


def sidebar(checkpoints: list[Path], default: str, load: Callable[[Path], Checkpoint]) -> Settings:
    """`load`: the (cached) model of a checkpoint directory; its beam length penalty is the
    alpha slider's default. A checkpoint that cannot be loaded gets the usual default (the
    page then says what is wrong with it)."""
    names = [p.name for p in checkpoints]
    name = selectbox(st.sidebar, CHECKPOINT, "Checkpoint", names, default=default,
                     help="every checkpoint directory found in checkpoints/")
    chosen = checkpoints[names.index(name)]
    try:
        alpha = load(chosen).beam_alpha
    except CheckpointError:
        alpha = ALPHA.default
    opts = decoding_ui(alpha)
    st.sidebar.subheader("Display")
    projector = toggle(st.sidebar, PROJECTOR, "Projector mode (large fonts, high contrast)")
    image_format = radio(st.sidebar, IMAGE_FORMAT, "Figure download format", horizontal=True,
                         help="the camera icon above each figure downloads it in this format")
    return Settings(chosen, opts, projector, image_format)
