"""Settings a student can choose: the `Setting` spec, declared with `declare(...)`, the widgets drawn from it,
and the settings every page shares (the sentence, the model, decoding, display, layer/head).

A `Setting` names its widget key (= its name in app/state.py's owner), its link
parameter, its default, and its bounds or choices. The same spec draws the widget
(`slider`, `selectbox`, ... below), checks a link's value (app/links.py) and writes
the link back. A page declares its own settings beside its code with `declare(...)`,
which enters them in the registry; app/pages.py gives each page the settings its module declares
(`declared`) and hands `linked(...)` of them all to links and the class (`app.links.Site`). Bounds
that depend on the model (layers, heads, token positions) are not written here: the widget's
options come from the model and clamp the value. Decoding choices and defaults come from `DecodeOptions`.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import streamlit as st

import i18n
from app import state
from figures import Display
from i18n import N_, _, num
from model.inference.options import ALPHAS, BEAM_SIZES, METHODS, DecodeOptions
from model.inference.precision import DESCRIPTIONS as PRECISION_NAMES
from model.inference.precision import FP32 as FP32_NAME
from model.inference.precision import available as precision_available
from model.storage import places
from model.storage.checkpoint import Checkpoint, CheckpointError

MAX_TEXT_CHARS = 1000


def flag(raw: str) -> bool:
    """On or off: 1 / true / yes, 0 / false / no (any case); anything else is not a flag (ValueError),
    which a link's reader says instead of reading it as off."""
    word = raw.strip().lower()
    if word not in ("1", "true", "yes", "0", "false", "no"):
        raise ValueError(f"{raw!r} is not on or off")
    return word in ("1", "true", "yes")


def index(raw: str) -> int:
    """A position, a layer, a head: a non-negative integer (the model bounds it when drawn)."""
    value = int(raw)
    if value < 0:
        raise ValueError(f"{value} < 0")
    return value


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


REGISTRY: dict[str, Setting] = {}


def declare(name: str, param: str | None, default: Any, parse: Callable[[str], Any] = str, **kw: Any) -> Setting:
    """Declare a setting (beside the page that draws it) and enter it in the registry."""
    spec = Setting(name, param, default, parse, **kw)
    if REGISTRY.get(name, spec) != spec:
        raise ValueError(f"two different settings named {name!r}")
    REGISTRY[name] = spec
    return spec


def declared(module: ModuleType) -> tuple[Setting, ...]:
    """The settings a module declares or uses at its top level (its Setting objects), in order, once each."""
    return tuple({id(v): v for v in vars(module).values() if isinstance(v, Setting)}.values())


def linked(settings: Iterable[Setting]) -> dict[str, Setting]:
    """The settings a link carries, by link parameter. The step of the step-through page is in links
    too, but its owner is the cursor (app/links.py)."""
    return {s.param: s for s in settings if s.param}


_D = DecodeOptions()
TEXT = declare("text", "text", "")
CHECKPOINT = declare("checkpoint", "checkpoint", places.DEFAULT_CHECKPOINT)
METHOD = declare("method", "method", "beam", choices=METHODS)
BEAM = declare("beam_size", "beam", _D.beam_size, int, bounds=BEAM_SIZES)
ALPHA = declare("alpha", "alpha", _D.alpha, float, bounds=ALPHAS, step=0.1)   # default: the model's own
NO_REPEAT = declare("no_repeat_ngram", "no_repeat", _D.no_repeat_ngram, int, bounds=(0, 6))
TEMPERATURE = declare("temperature", "temperature", _D.temperature, float, bounds=(0.05, 2.0), step=0.05)
TOP_K = declare("top_k", "top_k", _D.top_k, int, bounds=(0, 50))
TOP_P = declare("top_p", "top_p", _D.top_p, float, bounds=(0.05, 1.0), step=0.05)
SEED = declare("seed", "seed", _D.seed, int, bounds=(0, 10_000))
def pieces_text(raw: str) -> str:
    """A forced start as a link holds it: the target pieces, space-separated ("▁Die ▁Katze"), "" for none."""
    text = " ".join(raw.split())
    if len(text) > 400:
        raise ValueError("too long")
    return text


FORCED = declare("forced", "forced", "", pieces_text)     # the step page's "what if": the output starts with these
EDITED = declare("edited", "edited", "")             # the explorer's "change a word": the sentence compared
PROJECTOR = declare("projector", "projector", False, flag)
FP32 = declare("fp32", "fp32", False, flag)     # decode with plain fp32 where the model is served faster
PRESENT = declare("present", "present", False, flag)     # the page's main chart alone, on the whole window
TABLES = declare("tables", None, False, flag)     # every chart's numbers as a table too (a reader's own choice)
IMAGE_FORMAT = declare("image_format", "format", "png", choices=("png", "svg"))
LANGUAGE = declare("language", "lang", i18n.SOURCE, choices=i18n.available())   # the interface's
LAYER = declare("layer", "layer", 0, index)      # the explorer's, masks' and one head's layer / head
HEAD = declare("head", "head", 0, index)


# ---- widgets drawn from a spec -------------------------------------------------------------------
def _within(options: Sequence, fallback: Any) -> Callable[[Any], Any]:
    return lambda v: v if v in options else fallback


def _clamped(s: Setting) -> Callable[[Any], Any]:
    lo, hi = s.bounds
    return lambda v: min(max(v, lo), hi) if isinstance(v, int | float) else s.default


def _drawn_now(options: Sequence, kw: dict) -> dict:
    """A `format_func`'s labels made while this run draws (in its interface language): Streamlit, and
    AppTest, may call it again later, from another thread, where no language is set."""
    if "format_func" in kw:
        labels = {o: kw["format_func"](o) for o in options}
        kw = kw | {"format_func": labels.__getitem__}
    return kw


def selectbox(where: Any, s: Setting, label: str, options: Sequence, default: Any = None, **kw: Any) -> Any:
    options = list(options)
    kw = _drawn_now(options, kw)
    fallback = default if default in options else s.default if s.default in options else options[0]
    state.restore(s.name, fallback, _within(options, fallback))
    return state.remember(s.name, where.selectbox(label, options, key=s.name, **kw))


def radio(where: Any, s: Setting, label: str, options: Sequence | None = None, **kw: Any) -> Any:
    options = list(options or s.choices)
    kw = _drawn_now(options, kw)
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
    kw = _drawn_now(options, kw)
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
    chosen_layer = selectbox(columns[0], layer, _("Layer"), range(n_layers), default=default_layer)
    return chosen_layer, selectbox(columns[1], head, _("Head"), range(n_heads))


def layer_head_owned(n_layers: int, n_heads: int) -> tuple[int, int]:
    """The chosen layer and head where the browser draws the pickers (app/attention_charts.py): the owners' values,
    within the model's layers and heads (else the first), with no widget."""
    chosen = []
    for s, count in ((LAYER, n_layers), (HEAD, n_heads)):
        value = state.get(s.name, s.default)
        chosen.append(value if isinstance(value, int) and 0 <= value < count else 0)
        state.put(s.name, chosen[-1])
    return chosen[0], chosen[1]


# ---- the sidebar -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class SidebarChoices:
    checkpoint: Path
    opts: DecodeOptions
    projector: bool = False
    image_format: str = "png"
    tables: bool = False          # every chart's numbers as a table below it
    present: bool = False         # the presentation view: the page's main chart alone (app/pages.py)
    precision: str = FP32_NAME    # how sentences are decoded and traced (model/inference/precision.py)

    @property
    def display(self) -> Display:
        """Font size and colour scale of every figure (projector mode: large, high contrast)."""
        return Display.for_projector(self.projector)


HELP = {
    "method": N_("greedy: the likeliest token each step; beam: keep the k best partial translations; "
                 "sample: draw each token at random from the model's distribution"),
    "alpha": N_("score = log p / ((5 + length) / 6)^α; 0 = no normalisation"),
    "no_repeat": N_("forbid the output to contain the same n subword tokens in a row twice (0 = off); "
                    "a repeat the model wanted then shows what it says instead"),
    "temperature": N_("divides the logits: below 1 sharper, above 1 flatter"),
    "top_p": N_("keep the smallest set of likeliest tokens whose probabilities add up to p (1 = all)"),
}


def _help(name: str) -> str:
    return _(HELP[name])


METHOD_NAMES = {"greedy": N_("greedy"), "beam": N_("beam"), "sample": N_("sample")}


def browser_language() -> str:
    """The browser's language when the app has it, else English."""
    return i18n.from_locale(st.context.locale) or LANGUAGE.default


def chosen_language() -> str:
    """This run's interface language, before any widget is drawn: the picker's value just chosen
    (its key), else the session's (a link's), else the browser's."""
    lang = state.widget(LANGUAGE.name) or state.get(LANGUAGE.name) or browser_language()
    return lang if lang in LANGUAGE.choices else LANGUAGE.default


def language_ui() -> str:
    """The interface language, first in the sidebar (its own name in each language)."""
    return selectbox(st.sidebar, LANGUAGE, ":material/translate: " + _("Language"), LANGUAGE.choices,
                     default=browser_language(), format_func=i18n.own_name)


def follow_model_alpha(alpha: float) -> None:
    """The alpha slider starts at the chosen model's alpha and follows it when the model
    changes, unless the student moved it away from the previous model's. The model's
    alpha is kept for the link (a link leaves out an alpha equal to its model's)."""
    before = state.held(state.MODEL_ALPHA)
    if before is not None and before != alpha and state.get(ALPHA.name, before) == before:
        state.set_widget(ALPHA.name, alpha)
    state.hold(state.MODEL_ALPHA, alpha)


def decoding_ui(alpha: float = ALPHA.default) -> DecodeOptions:
    """The decoding widgets; `alpha` is the model's own length penalty."""
    sb = st.sidebar
    sb.subheader(_("Decoding"))
    follow_model_alpha(alpha)
    method = radio(sb, METHOD, _("Method"), horizontal=True, help=_help("method"),
                   format_func=lambda m: _(METHOD_NAMES[m]))
    kw: dict = {"method": method, "record_steps": True, "record_top_k": 8}
    if method == "beam":
        kw["beam_size"] = slider(sb, BEAM, _("Beam size"))
        kw["alpha"] = slider(sb, ALPHA, _("Length penalty α (GNMT)"), default=alpha,
                             help=_("{formula}; this model's own: {alpha}").format(formula=_help("alpha"),
                                                                                   alpha=num(alpha, "g")))
    kw["no_repeat_ngram"] = number_input(sb, NO_REPEAT, _("Block repeated n-grams (n, 0 = off)"),
                                         help=_help("no_repeat"))
    if method == "sample":
        kw["temperature"] = slider(sb, TEMPERATURE, _("Temperature"), help=_help("temperature"))
        kw["top_k"] = slider(sb, TOP_K, _("Top-k (0 = all tokens)"))
        kw["top_p"] = slider(sb, TOP_P, _("Top-p (nucleus)"), help=_help("top_p"))
        kw["seed"] = number_input(sb, SEED, _("Seed"))
    return DecodeOptions(**kw)


def sidebar(checkpoints: list[Path], default: str, load: Callable[[Path], Checkpoint],
            below_checkpoint: Callable[[], None] | None = None) -> SidebarChoices:
    """`load`: the (cached) model of a checkpoint directory; its beam length penalty is the
    alpha slider's default. A checkpoint that cannot be loaded gets the usual default (the
    page then says what is wrong with it). `below_checkpoint` draws under the model's picker."""
    language_ui()
    names = [p.name for p in checkpoints]
    name = selectbox(st.sidebar, CHECKPOINT, _("Checkpoint"), names, default=default,
                     help=_("the shipped models and your own (model/storage/places.py says where they live)"))
    if below_checkpoint is not None:
        below_checkpoint()
    chosen = checkpoints[names.index(name)]
    try:
        ckpt = load(chosen)
    except CheckpointError:
        ckpt = None
    alpha = ckpt.beam_alpha if ckpt is not None else ALPHA.default
    precision = precision_ui(ckpt.precision if ckpt is not None else FP32_NAME)
    opts = replace(decoding_ui(alpha), prefix=forced_prefix(ckpt))
    st.sidebar.subheader(_("Display"))
    projector = toggle(st.sidebar, PROJECTOR, _("Projector mode (large fonts, high contrast)"))
    present = toggle(st.sidebar, PRESENT, _("Presentation view: the page's main chart alone"),
                     help=_("On the whole window, for the front of a room; ← and → step, Esc returns"))
    tables = toggle(st.sidebar, TABLES, _("Each chart's numbers as a table too"),
                    help=_("for screen readers and for reading exact values; a screen reader also hears each "
                           "chart described in one sentence"))
    image_format = radio(st.sidebar, IMAGE_FORMAT, _("Figure download format"), horizontal=True,
                         help=_("the camera icon above each figure downloads it in this format"))
    return SidebarChoices(chosen, opts, projector, image_format, tables, present, precision)


def forced_pieces() -> list[str]:
    """The forced start's pieces (the step page's "what if"), none when nothing is forced."""
    return str(state.get(FORCED.name, "")).split()


def forced_prefix(ckpt: Checkpoint | None) -> tuple[int, ...]:
    """The forced start as this model's token ids; () when nothing is forced or a piece is not in its
    vocabulary (another model's start: the step page says so)."""
    pieces = forced_pieces()
    ids = [ckpt.tgt_tokenizer.piece_id(p) for p in pieces] if ckpt is not None else []
    return tuple(ids) if pieces and None not in ids and len(ids) == len(pieces) else ()


def precision_ui(served: str) -> str:
    """How this model's sentences are computed: `served` (its card's choice, model.precision) unless the
    student asks for plain fp32, the reference. Said under the model's picker whenever it is not fp32."""
    if served == FP32_NAME or not precision_available(served):
        return FP32_NAME
    plain = toggle(st.sidebar, FP32, _("Plain fp32 (the reference, slower)"),
                   help=_("This model is served with {name}: {what}. Its translations matched plain fp32's on "
                          "the validation sets the model card names.").format(name=served,
                                                                             what=_(PRECISION_NAMES[served])))
    shown = FP32_NAME if plain else served
    st.sidebar.caption(_("Computed with {what}.").format(what=_(PRECISION_NAMES[shown])))
    return shown
