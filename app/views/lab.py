"""Training lab: train a small Transformer live on a generated task, watch its attention
form, switch off a part of the paper and see what breaks; then decode with it, save it.

The run itself belongs to serving/lab_jobs.py (off the script thread, K at once per server);
this page only draws its settings, its progress and its results. The session's job is
kept in session state (app/state.py, LAB_JOB): a rerun finds it again instead of starting another.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from functools import cached_property

import plotly.graph_objects as go
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

import figures
from app import lab_models, resources, state
from app.context import Context, greedy_options
from app.links import Site
from app.settings import SidebarChoices, declare, radio, range_slider, selectbox, slider, text_input, toggle
from app.state import StepCursor
from app.ui import chart, fragment
from app.views import stepper
from i18n import N_, _, language, num
from model.analysis.attribution import Attribution, Cost
from model.inference.options import DecodeOptions
from model.inference.pipeline import Explanation, InputError, explain
from model.storage.checkpoint import Checkpoint
from model.training import tasks
from model.training.lab import SWITCHES, LabRun, LabSettings, Snapshot
from model.training.tasks import TASKS, TaskSpec
from serving.lab_jobs import Job

LAB_TASK = declare("lab_task", None, "reverse", choices=tuple(TASKS))
LAB_LENGTHS = declare("lab_lengths", None, (4, 10), bounds=(1, 20))
LAB_SYMBOLS = declare("lab_symbols", None, 20, int, bounds=(2, 26))
LAB_D_MODEL = declare("lab_d_model", None, 64, int, choices=(16, 32, 64, 128))
LAB_HEADS = declare("lab_heads", None, 4, int, choices=(1, 2, 4, 8))
LAB_LAYERS = declare("lab_layers", None, 2, int, bounds=(1, 3))
LAB_D_FF = declare("lab_d_ff", None, 256, int, choices=(32, 64, 128, 256, 512))
LAB_SWITCHES = {name: declare(f"lab_{name}", None, True) for name in SWITCHES}
LAB_SMOOTHING = declare("lab_smoothing", None, 0.1, float, choices=(0.0, 0.1))
LAB_WARMUP = declare("lab_warmup", None, True)
LAB_TEACHER = declare("lab_teacher_forcing", None, True)
LAB_STEPS = declare("lab_steps", None, 3000, int, bounds=(50, 20_000))
LAB_SEED = declare("lab_seed", None, 0, int, bounds=(0, 10_000))
LAB_SNAPSHOT = declare("lab_snapshot", None, -1, int)   # step of the attention snapshot shown (-1: the last)
LAB_TEXT = declare("lab_text", None, "")                 # the lab model's input to decode
LAB_SAVE_NAME = declare("lab_save_name", None, "")
PROGRESS_EVERY_S = 1.0     # the progress bar's refresh while a job is live
CHARTS_EVERY_S = 2.5       # the curves' and heatmaps' (points and snapshots come every eval_every steps)
# What happens without each part, on the default task (reverse, length 4-10, 20 letters, d_model 64, 2+2
# layers): measured by `python -m benchmarks.lab_speed`, medians of 3 seeds (BENCHMARKS.md, "Training lab").
PREDICTIONS = {    # every text marked for the catalog (i18n/): _() where shown
    "positional_encoding": (N_("Positional encoding"), N_(
        "Without it the model sees a bag of letters and cannot tell which came last. Measured on reverse: 2 % of "
        "held-out sequences right at best in 1,500 steps, against 99 % after 500 steps with it.")),
    "scale_attention": (N_("Scale scores by 1/√d_k"), N_(
        "Without it the scores grow with √d_k, the softmax saturates and its gradients shrink. Measured on reverse: "
        "99 % after 800 steps instead of 500.")),
    "causal_mask": (N_("Causal mask while training"), N_(
        "Without it each decoder position can read the next reference token: the training loss falls lower than "
        "with the mask (0.63 against 0.66 at step 500; without label smoothing 0.030 against 0.051). Decoding alone "
        "has no next token to read: 0 % of held-out sequences right.")),
    "residual": (N_("Residual connections"), N_(
        "Without them the signal and the gradient must pass through every sublayer. Measured on reverse: the "
        "training loss still above 2.1 after 1,000 steps, no held-out sequence right in 1,500.")),
}
SMOOTHING, WARMUP, TEACHER = "smoothing", "warmup", "teacher"
OTHER = {
    "smoothing": N_("Label smoothing 0.1 moves 10 % of each target's probability onto the other tokens: the training "
                    "loss cannot fall below about 0.62 here, and the model is less over-confident. Measured on "
                    "reverse without it: 99 % after 850 steps instead of 500."),
    "warmup": N_("Warm-up raises the learning rate over the first 200 steps. Measured: at this size and peak rate "
                 "(0.001) reverse learns without it too (99 % after 400 steps instead of 500); warm-up matters more "
                 "for deeper models and higher rates."),
    "teacher": N_("Teacher forcing feeds the decoder the reference. Off, it reads its own greedy guesses, made step "
                  "by step without gradient. Measured on reverse, where each output depends on the source alone: it "
                  "still learns (99 % after 500 steps), each step slower by the extra decoding."),
}


def render(ctx: Context) -> None:
    st.header(_("Training lab"))
    st.caption(_("Train a small Transformer, the same model and the same training step as the shipped ones, on a "
                 "task made up in code. Watch the held-out accuracy rise and the attention form; then switch off "
                 "one part of the paper and train again to see what that part is for."))
    job: Job | None = state.held(state.LAB_JOB)
    busy = job is not None and job.active
    lab = _settings_ui(disabled=busy)
    _buttons(lab, job)
    if job is None:
        return
    state.hold(state.LAB_PHASE, _phase(job))
    fragment(_live, run_every=PROGRESS_EVERY_S if job.active else None)(ctx, job)
    if job.run is None or not job.run.history:
        return
    if job.active:
        fragment(_charts, run_every=CHARTS_EVERY_S)(ctx, job.run)
    else:
        _curves(ctx, job.run)
        _afterwards(ctx, job)


# ---- the settings ------------------------------------------------------------------------------
def _settings_ui(disabled: bool) -> LabSettings:
    c = st.columns(3)
    with c[0]:
        st.markdown(_("**Task**"))
        name = selectbox(st, LAB_TASK, _("Task"), list(tasks.TASKS), disabled=disabled,
                         format_func=lambda n: f"{_(tasks.TASK_TITLES[n])}: {tasks.TASKS[n].example}")
        letters = name != "dates"
        lo, hi = range_slider(st, LAB_LENGTHS, _("Sequence length"), disabled=disabled or not letters)
        symbols = slider(st, LAB_SYMBOLS, _("Symbols (letters a, b, c, ...)"), disabled=disabled or not letters)
        st.caption(_(tasks.TASKS[name].describe) + ("" if letters else " " + _("(years 1950-2049)")) + ".")
    with c[1]:
        st.markdown(_("**Model**"))
        d_model = selectbox(st, LAB_D_MODEL, "d_model", LAB_D_MODEL.choices, disabled=disabled)
        fitting = [h for h in LAB_HEADS.choices if d_model % h == 0 and d_model // h >= 2]
        heads = selectbox(st, LAB_HEADS, _("Heads"), fitting, disabled=disabled)
        layers = slider(st, LAB_LAYERS, _("Layers per stack"), disabled=disabled)
        d_ff = selectbox(st, LAB_D_FF, "d_ff", LAB_D_FF.choices, disabled=disabled)
        steps = slider(st, LAB_STEPS, _("At most this many steps"), step=50, disabled=disabled)
        seed = slider(st, LAB_SEED, _("Seed"), bounds=(0, 99), disabled=disabled)
    with c[2]:
        st.markdown(_("**The paper's parts** (switch one off)"))
        switches = {name: toggle(st, LAB_SWITCHES[name], _(label), help=_(prediction), disabled=disabled)
                    for name, (label, prediction) in PREDICTIONS.items()}
        smoothing = radio(st, LAB_SMOOTHING, _("Label smoothing"), horizontal=True, help=_(OTHER[SMOOTHING]),
                          disabled=disabled)
        warmup = toggle(st, LAB_WARMUP, _("Learning-rate warm-up"), help=_(OTHER[WARMUP]), disabled=disabled)
        teacher = toggle(st, LAB_TEACHER, _("Teacher forcing"), help=_(OTHER[TEACHER]), disabled=disabled)
    for part, on in switches.items():
        if not on:
            st.info(_("**{part} off.** {prediction}").format(part=_(PREDICTIONS[part][0]),
                                                              prediction=_(PREDICTIONS[part][1])))
    for flag, key in ((warmup, "warmup"), (teacher, "teacher")):
        if not flag:
            st.info(_(OTHER[key]))
    spec = TaskSpec(name, lo, hi, symbols)
    return LabSettings(task=spec, d_model=d_model, n_heads=heads, n_layers=layers, d_ff=d_ff, label_smoothing=smoothing,
                       warmup=warmup, teacher_forcing=teacher, max_steps=steps, seed=seed,
                       time_cap_s=resources.config().lab_max_seconds, **switches)


def _buttons(lab: LabSettings, job: Job | None) -> None:
    """Train / Stop act in callbacks, before the page is drawn, so every disabled state is current."""
    busy = job is not None and job.active
    c = st.columns([1, 1, 4])
    c[0].button(_("Train"), key="lab_train", type="primary", icon=":material/play_arrow:", disabled=busy,
                on_click=_start, args=(lab,))
    c[1].button(_("Stop"), key="lab_stop", icon=":material/stop:", disabled=not busy, on_click=_stop)
    c[2].caption(_("Each run stops by itself at 100 % held-out accuracy, at its step limit, or after {s} s; closing "
                   "the tab stops it too.").format(s=num(resources.config().lab_max_seconds, ".0f")))


def _start(lab: LabSettings) -> None:
    state.hold(state.LAB_JOB, resources.lab_scheduler().submit(_session_id(), lab))
    state.put(LAB_SNAPSHOT.name, -1)


def _stop() -> None:
    job = state.held(state.LAB_JOB)
    if job is not None:
        resources.lab_scheduler().stop(job)


def _session_id() -> str:
    run_ctx = get_script_run_ctx()
    return run_ctx.session_id if run_ctx is not None else "local"


# ---- while it trains (fragments that rerun by themselves) ----------------------------------------
def _phase(job: Job) -> tuple[str, bool]:
    """What changes the page's layout: the job's state, and whether it has points to draw."""
    return job.state, job.run is not None and bool(job.run.history)


def _live(ctx: Context, job: Job) -> None:
    """The queue position or the progress bar; the whole page again when the layout changes
    (the run starts drawing, or ends: the settings unlock, the results appear)."""
    if _phase(job) != state.held(state.LAB_PHASE):
        st.rerun()
    if job.state == "queued":
        sched = resources.lab_scheduler()
        st.info(_("Waiting for a free training slot: you are number {n} in the queue ({training} training now). "
                  "Your run starts by itself.").format(n=sched.position(job), training=sched.training),
                icon=":material/hourglass_top:")
    elif job.error:
        st.error(_("The run failed: {error}").format(error=job.error))
    elif job.run is None and not job.active:
        st.warning(_("The run {ended} before it started.").format(ended=_ended(job)))
    elif job.run is None or not job.run.history:
        st.info(_("Starting a training process…"), icon=":material/hourglass_top:")
    else:
        _progress(job, job.run)


def _charts(ctx: Context, run: LabRun) -> None:
    _curves(ctx, run)
    _attention(ctx, run, run.snapshots[-1])


ENDINGS = {"reached": N_("reached 100 % held-out accuracy"), "steps": N_("reached its step limit"),
           "time": N_("reached the time limit"), "stopped": N_("was stopped"), "left": N_("ended (the tab was closed)"),
           "diverged": N_("diverged (the loss became NaN)"), "failed": N_("failed")}


def _ended(job: Job) -> str:
    return _(ENDINGS[job.ended]) if job.ended in ENDINGS else str(job.ended)


def _progress(job: Job, run: LabRun) -> None:
    s, last = run.settings, (run.history[-1] if run.history else None)
    acc = "" if last is None else " · " + _("held-out whole-sequence accuracy {acc}").format(
        acc=num(last.seq_acc, ".0%"))
    text = _("step {step} of {max} · {s} s of at most {cap} s").format(
        step=run.step, max=s.max_steps, s=num(run.seconds, ".0f"), cap=num(s.time_cap_s, ".0f")) + acc
    fraction = min(1.0, max(run.step / s.max_steps, run.seconds / s.time_cap_s))
    if job.active:
        st.progress(fraction, text=_("Training: {progress}").format(progress=text))
    else:
        st.success(_("The run {ended}: {progress}.").format(ended=_ended(job), progress=text))


def _figure(ctx: Context, run: LabRun, name: str, key: tuple, build) -> go.Figure:
    """A lab figure, built once per (run, what it shows, display) and not every second:
    the live view redraws each second, new points and snapshots come every `eval_every` steps."""
    return resources.get_figure(f"lab_{name}", (run.uid, key), ctx.settings.display, language(), build)


def _curves(ctx: Context, run: LabRun) -> None:
    h = list(run.history)
    fig = _figure(ctx, run, "curves", (len(h), h[-1].step), lambda: figures.lab_curves(
        [p.step for p in h], [p.train_loss for p in h], [p.heldout_loss for p in h], [p.token_acc for p in h],
        [p.seq_acc for p in h]))
    chart(st, fig, key="lab_curves", settings=ctx.settings)


def _attention(ctx: Context, run: LabRun, snap: Snapshot) -> None:
    """The watched example's attention at one snapshot: cross-attention first (the alignment)."""
    src, dec = run.tokens(run.example)
    st.markdown(_("**Attention of one held-out example** at step {step}: `{source}` → `{target}`").format(
        step=snap.step, source=tasks.text(run.example[0]), target=tasks.text(run.example[1])))
    left, right = st.columns([2, 3])
    mean = _figure(ctx, run, "cross_mean", snap.step, lambda: figures.attention_heatmap(
        snap.attention["decoder.cross_attn"][-1].mean(axis=0), dec, src, row_title=_("decoder input"),
        col_title=_("source"), title=_("cross-attention, last layer, mean of the heads")))
    chart(left, mean, key="lab_cross_mean", settings=ctx.settings)
    # lazy tabs: only the open one's grid is built, sent and drawn (while a model trains the charts come again every
    # few seconds; three grids kept a browser's core over half busy: BENCHMARKS.md, "The training lab")
    tabs = right.tabs([_("cross-attention"), _("decoder self-attention"), _("encoder self-attention")],
                      key="lab_attention_kind", on_change="rerun")
    for tab, name, rows, cols in zip(tabs, ("decoder.cross_attn", "decoder.self_attn", "encoder.self_attn"),
                                     (dec, dec, src), (src, dec, src)):
        if not tab.open:
            continue
        grid = _figure(ctx, run, name, snap.step, lambda name=name, rows=rows, cols=cols: figures.attention_grid(
            snap.attention[name], rows, cols))
        chart(tab, grid, key=f"lab_grid_{name}", settings=ctx.settings)


# ---- afterwards ---------------------------------------------------------------------------------
def _afterwards(ctx: Context, job: Job) -> None:
    run = job.run
    st.subheader(_("Replay the training"))
    steps = [s.step for s in run.snapshots]
    state.restore(LAB_SNAPSHOT.name, steps[-1], lambda v: v if v in steps else steps[-1])
    chosen = state.remember(LAB_SNAPSHOT.name, st.select_slider(_("Attention at step"), steps, key=LAB_SNAPSHOT.name))
    _attention(ctx, run, run.snapshots[steps.index(chosen)])
    _decode(ctx, job)
    _save(job)


@dataclass
class LabStepping:
    """What the step-through needs (stepper.Stepping), over a lab model, which is in no checkpoint
    directory: its figures and attribution are cached under the job's id, its decodings come from
    the session's own memo."""
    checkpoint: Checkpoint
    settings: SidebarChoices
    text: str
    explanation: Explanation
    path: str                                              # "lab:<job id>": the cache key, not a directory
    explained: Callable[[str, DecodeOptions], Explanation]
    site: Site | None = None

    @cached_property
    def greedy(self) -> Explanation:
        if self.settings.opts.method == "greedy":
            return self.explanation
        return self.explained(self.explanation.text, greedy_options(self.settings.opts))

    @property
    def cursor(self) -> StepCursor:
        return state.cursor()

    @property
    def figure_key(self) -> tuple:
        return self.path, self.explanation.text, self.settings.opts

    def figure(self, name: str, key: Hashable, build: Callable[[], go.Figure], cache: bool = True) -> go.Figure:
        if not cache:
            return self.settings.display.apply(build())
        return resources.get_figure(name, (self.figure_key, key), self.settings.display, language(), build)

    def attribution(self, upto: Cost, on_progress: Callable[[int, int], None] | None = None) -> Attribution:
        return resources.get_attribution(self.checkpoint, self.explanation, self.figure_key, upto, on_progress)


def _decode(ctx: Context, job: Job) -> None:
    st.subheader(_("Decode with it, step by step"))
    run = job.run
    text = text_input(st, LAB_TEXT, _("Input (words separated by spaces)"), default=tasks.text(run.example[0]))
    text = tasks.normalise(run.settings.task, text)
    ckpt = _lab_checkpoint(job)
    settings = dataclasses.replace(ctx.settings, opts=dataclasses.replace(ctx.settings.opts, prefix=()))  # a forced
    try:                                     # start (the step page's "what if") is the page model's, not this one's
        ex = _explained(text, settings.opts)
    except InputError as exc:
        st.warning(str(exc))
        return
    unknown = [w for w, i in zip(text.split(), ckpt.src_tokenizer.encode(text)) if i == ckpt.config.unk_id]
    if unknown:
        st.warning(_("Not in this task's vocabulary (read as <unk>): {words}").format(words=", ".join(unknown)))
    st.markdown(_("**Output** ({method}, the sidebar's choice): `{output}`").format(
        method=_(settings.opts.method), output=ex.output or _("(nothing)")))
    stepper.stepping(LabStepping(ckpt, settings, text, ex, f"lab:{job.id}", _explained, ctx.site))


def _lab_checkpoint(job: Job):
    cached = state.held(state.LAB_MODEL)
    if cached is None or cached[0] != job.id:
        cached = (job.id, job.run.checkpoint(), {})
        state.hold(state.LAB_MODEL, cached)
    return cached[1]


def _explained(text: str, opts: DecodeOptions) -> Explanation:
    """The lab model's decoding of `text`, kept in the session for the last few (text, options):
    a Next press in the step view reruns its fragment, and must not decode again."""
    _job_id, ckpt, memo = state.held(state.LAB_MODEL)
    if (text, opts) not in memo:
        while len(memo) >= 4:
            memo.pop(next(iter(memo)))
        memo[(text, opts)] = explain(ckpt, text, opts)
    return memo[(text, opts)]


def _save(job: Job) -> None:
    st.subheader(_("Keep it"))
    run = job.run
    c = st.columns([2, 1, 1])
    name = text_input(c[0], LAB_SAVE_NAME, _("Checkpoint name"), default=f"lab-{run.settings.task.name}-{job.id[:6]}")
    owned = resources.lab_shelf() is not None
    if c[1].button(_("Save, for me") if owned else _("Save to checkpoints/"), key="lab_save", icon=":material/save:"):
        lab_models.save(run, name)
    file = name or "lab-model"
    c[2].download_button(_("Download (.zip)"), data=lambda: lab_models.zipped(run, file), file_name=f"{file}.zip",
                         mime="application/zip", key="lab_download", icon=":material/download:", on_click="ignore")
    lab_models.yours()
