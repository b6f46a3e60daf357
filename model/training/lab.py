"""The training lab: train a small Transformer of this project on a generated task, with
parts of the paper switched off, and keep what a student watches while it learns.

    run = LabRun(LabSettings(task=TaskSpec("reverse")))
    why = run.train(should_stop=lambda: False)       # "reached" | "steps" | "time" | ...
    run.history[-1].seq_acc, run.snapshots[-1].attention["decoder.0.cross_attn"]
    run.save("checkpoints/lab-reverse")               # the shipped checkpoint format

The model is `model.transformer.Transformer` and every optimizer step is
`model.training.train_step`, the step `train.py` takes. Training examples are drawn fresh
for every step from a seeded stream that never yields a held-out source; the held-out
examples are decoded greedily (free-running, as a user would) for the accuracies.

Thread use: `train` runs in one thread (the app runs it off the script thread); other
threads may read `history`, `snapshots`, `step` and `status` at any time, and call
`checkpoint()` for a copy of the model, taken between two steps.
"""
from __future__ import annotations

import copy
import math
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from model.inference.decoding import greedy_batch
from model.network.batch import Example, collate
from model.network.config import ModelConfig
from model.network.trace import Trace
from model.network.transformer import Transformer
from model.storage.checkpoint import Checkpoint, save_checkpoint
from model.training import tasks
from model.training.loop import NonFiniteLoss, Schedule, StepSettings, loss_and_tokens, train_step
from model.training.tasks import Pair, TaskSpec

SWITCHES = ("positional_encoding", "scale_attention", "causal_mask", "residual")   # ModelConfig fields


@dataclass(frozen=True)
class LabSettings:
    task: TaskSpec = field(default_factory=TaskSpec)
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2            # per stack
    d_ff: int = 256
    dropout: float = 0.0
    # the paper's parts (see ModelConfig): switch one off to see what it is for
    positional_encoding: bool = True
    scale_attention: bool = True
    causal_mask: bool = True
    residual: bool = True
    label_smoothing: float = 0.1
    warmup: bool = True
    teacher_forcing: bool = True
    # optimisation
    batch_size: int = 64
    peak_lr: float = 1e-3
    warmup_steps: int = 200
    max_steps: int = 3000
    time_cap_s: float = 180.0    # every run ends by this many seconds of training
    stop_at: float = 1.0         # end early once the held-out whole-sequence accuracy reaches this
    # measurement
    heldout: int = 500
    eval_every: int = 50         # steps between held-out evaluations (and attention snapshots)
    seed: int = 0

    def __post_init__(self) -> None:
        if not 8 <= self.d_model <= 512 or self.d_model % self.n_heads:
            raise ValueError(f"d_model must be 8..512 and divisible by the heads, got {self.d_model}/{self.n_heads}")
        if not 1 <= self.n_layers <= 6:
            raise ValueError(f"layers per stack must be 1..6, got {self.n_layers}")
        if self.max_steps < 1 or self.time_cap_s <= 0 or self.eval_every < 1 or self.batch_size < 1:
            raise ValueError("max_steps, time_cap_s, eval_every and batch_size must be positive")

    def model_config(self, vocab_size: int) -> ModelConfig:
        return ModelConfig(src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, d_model=self.d_model,
                           n_heads=self.n_heads, n_encoder_layers=self.n_layers, n_decoder_layers=self.n_layers,
                           d_ff=self.d_ff, dropout=self.dropout, max_positions=max(64, 2 * self.max_length + 4),
                           **{name: getattr(self, name) for name in SWITCHES})

    @property
    def max_length(self) -> int:
        return max(self.task.max_len, 5)       # dates: 4 source words, 5 target words

    @property
    def schedule(self) -> Schedule:
        return Schedule(peak=self.peak_lr, warmup=self.warmup_steps, ramp=self.warmup)

    @property
    def step_settings(self) -> StepSettings:
        return StepSettings(label_smoothing=self.label_smoothing, clip=1.0, teacher_forcing=self.teacher_forcing)

    def changed(self, **changes) -> "LabSettings":
        return replace(self, **changes)


@dataclass(frozen=True)
class Point:
    """One held-out evaluation."""
    step: int
    seconds: float          # training time so far
    train_loss: float       # mean training loss since the previous point (label-smoothed)
    heldout_loss: float     # teacher-forced cross entropy on the held-out examples
    token_acc: float        # free-running greedy: share of reference positions right
    seq_acc: float          # free-running greedy: share of examples entirely right


@dataclass(frozen=True)
class Snapshot:
    """The attention of the fixed example at one step: name -> (L, H, Tq, Tk)."""
    step: int
    attention: dict[str, np.ndarray]


class LabRun:
    def __init__(self, settings: LabSettings, device: str | torch.device = "cpu") -> None:
        self.settings = settings
        self.uid = uuid.uuid4().hex                      # names this run in caches shared by sessions
        self.device = torch.device(device)
        self.tokenizer = tasks.tokenizer_for(settings.task)
        torch.manual_seed(settings.seed)
        self.cfg = settings.model_config(self.tokenizer.vocab_size)
        self.model = Transformer(self.cfg).to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=settings.peak_lr, betas=(0.9, 0.98), eps=1e-9)
        self.heldout: list[Pair] = tasks.sample(settings.task, settings.heldout, seed=settings.seed + 10_000)
        self.example: Pair = self.heldout[0]             # the example whose attention is watched
        self.step = 0
        self.seconds = 0.0
        self.status = "ready"                            # ready | training | <why it ended>
        self.history: list[Point] = []
        self.snapshots: list[Snapshot] = []
        self._lock = threading.Lock()                    # held while the weights change

    # ---- data ------------------------------------------------------------------------------------
    def encode(self, pair: Pair) -> Example:
        ids = self.tokenizer.encode
        return Example(ids(tasks.text(pair[0])) + [self.cfg.eos_id],
                       [self.cfg.bos_id] + ids(tasks.text(pair[1])) + [self.cfg.eos_id])

    def training_batches(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """An endless stream of batches, never a held-out source."""
        spec, held = self.settings.task, {tuple(p[0]) for p in self.heldout}
        rng = random.Random(self.settings.seed)
        while True:
            pairs = tasks.sample(spec, self.settings.batch_size, seed=rng.getrandbits(32), exclude=held)
            if not pairs:
                raise ValueError("every possible source is held out: make the task larger")
            yield collate([self.encode(p) for p in pairs], self.cfg.pad_id)

    # ---- training --------------------------------------------------------------------------------
    def train(self, should_stop: Callable[[], bool] = lambda: False,
              on_point: Callable[[Point], None] = lambda p: None,
              on_step: Callable[[int, float], None] = lambda step, seconds: None) -> str:
        """Train until the held-out accuracy reaches `stop_at`, `max_steps`, the time cap,
        or should_stop() (checked after every step). on_point(point) follows each held-out
        measurement (its snapshot is `snapshots[-1]`), on_step(step, seconds) each step.
        Returns and sets `status`: reached, steps, time, stopped, diverged."""
        s = self.settings
        self.status = "training"
        if not self.history:
            self._measure(float("nan"), on_point)
        batches, losses = self.training_batches(), []
        started = time.perf_counter() - self.seconds
        while True:
            why = self._why_end(should_stop)
            if why:
                break
            try:
                with self._lock:
                    loss, _ = train_step(self.model, self.optimizer, [next(batches)], s.schedule.lr(self.step + 1),
                                         s.step_settings, self.cfg.pad_id)
            except NonFiniteLoss:
                why = "diverged"
                break
            self.step += 1
            self.seconds = time.perf_counter() - started
            on_step(self.step, self.seconds)
            losses.append(loss)
            if self.step % s.eval_every == 0:
                self._measure(sum(losses) / len(losses), on_point)
                losses = []
        if losses:
            self._measure(sum(losses) / len(losses), on_point)
        self.status = why
        return why

    def _why_end(self, should_stop: Callable[[], bool]) -> str:
        s = self.settings
        if self.history and self.history[-1].seq_acc >= s.stop_at:
            return "reached"
        if self.step >= s.max_steps:
            return "steps"
        if self.seconds >= s.time_cap_s:
            return "time"
        if should_stop():
            return "stopped"
        return ""

    def _measure(self, train_loss: float, on_point: Callable[[Point], None]) -> None:
        loss, token_acc, seq_acc = self.evaluate(self.heldout)
        point = Point(self.step, self.seconds, train_loss, loss, token_acc, seq_acc)
        self.history.append(point)
        self.snapshots.append(Snapshot(self.step, self.attention(self.example)))
        on_point(point)

    # ---- measurement -----------------------------------------------------------------------------
    @torch.no_grad()
    def evaluate(self, pairs: list[Pair], batch_size: int = 250) -> tuple[float, float, float]:
        """(teacher-forced loss per token, token accuracy, whole-sequence accuracy) over
        pairs; the accuracies from free-running greedy decoding."""
        self.model.eval()
        total_loss, loss_tokens, tokens, right_tokens, right_seqs = 0.0, 0, 0, 0, 0
        for start in range(0, len(pairs), batch_size):
            chunk = [self.encode(p) for p in pairs[start:start + batch_size]]
            src, tgt = (t.to(self.device) for t in collate(chunk, self.cfg.pad_id))
            loss, n = loss_and_tokens(self.model, src, tgt, 0.0, self.cfg.pad_id)
            total_loss, loss_tokens = total_loss + float(loss) * n, loss_tokens + n
            outputs = greedy_batch(self.model, src, tgt.size(1) + 2)
            for example, out in zip(chunk, outputs):
                gold = example.tgt[1:-1]
                right_tokens += sum(a == b for a, b in zip(out, gold))
                tokens += len(gold)
                right_seqs += out == gold
        return total_loss / max(loss_tokens, 1), right_tokens / max(tokens, 1), right_seqs / max(len(pairs), 1)

    @torch.no_grad()
    def attention(self, pair: Pair) -> dict[str, np.ndarray]:
        """Every attention of a teacher-forced pass over `pair`: kind name -> (L, H, Tq, Tk)."""
        self.model.eval()
        ex = self.encode(pair)
        trace = Trace()
        self.model(torch.tensor([ex.src], device=self.device), torch.tensor([ex.tgt[:-1]], device=self.device), trace)
        out = {}
        for side, module, n in (("encoder", "self_attn", self.cfg.n_encoder_layers),
                                ("decoder", "self_attn", self.cfg.n_decoder_layers),
                                ("decoder", "cross_attn", self.cfg.n_decoder_layers)):
            out[f"{side}.{module}"] = np.stack([trace[f"{side}.{i}.{module}"][0].cpu().numpy() for i in range(n)])
        return out

    def tokens(self, pair: Pair) -> tuple[list[str], list[str]]:
        """The axis labels of `attention(pair)`: source with </s>, decoder input with <s>."""
        ex = self.encode(pair)
        return self.tokenizer.pieces(ex.src), self.tokenizer.pieces(ex.tgt[:-1])

    # ---- the result ------------------------------------------------------------------------------
    def weights(self) -> dict[str, np.ndarray]:
        """The parameters as plain arrays (to send to another process)."""
        with self._lock:
            return {k: v.detach().cpu().numpy().copy() for k, v in self.model.state_dict().items()}

    def load_weights(self, weights: dict[str, np.ndarray]) -> None:
        with self._lock:
            self.model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=True)

    def checkpoint(self) -> Checkpoint:
        """A copy of the model as it is now (between two steps), in eval mode."""
        with self._lock:
            model = copy.deepcopy(self.model).eval()
        return Checkpoint(model, self.tokenizer, self.tokenizer, None, self.meta())

    def meta(self) -> dict:
        s = self.settings
        last = self.history[-1] if self.history else None
        return {"src_lang": s.task.name, "tgt_lang": s.task.name, "lab": {
            "task": s.task.__dict__, "settings": {k: v for k, v in s.__dict__.items() if k != "task"},
            "steps": self.step, "seconds": round(self.seconds, 1),
            "heldout_seq_acc": None if last is None else last.seq_acc}}

    def save(self, directory: str | Path) -> Path:
        ckpt = self.checkpoint()
        return save_checkpoint(directory, ckpt.model, self.tokenizer, self.tokenizer, ckpt.meta,
                               extra_files={"README.md": self.card()})

    def card(self) -> str:
        s, last = self.settings, (self.history[-1] if self.history else None)
        off = self.cfg.ablations
        lines = [f"# Lab model: {s.task.name}", "",
                 f"Trained in the app's training lab on the generated task **{s.task.name}** "
                 f"({tasks.TASKS[s.task.name].describe}; e.g. {tasks.TASKS[s.task.name].example}).", "",
                 f"- d_model {s.d_model}, {s.n_heads} heads, {s.n_layers}+{s.n_layers} layers, d_ff {s.d_ff}",
                 f"- built without: {', '.join(off)}" if off else "- every part of the paper on",
                 f"- label smoothing {s.label_smoothing}, warm-up {'on' if s.warmup else 'off'}, "
                 f"{'teacher forcing' if s.teacher_forcing else 'trained on its own predictions'}",
                 f"- {self.step} steps of {s.batch_size} examples, {self.seconds:.0f} s"]
        if last is not None and not math.isnan(last.seq_acc):
            lines.append(f"- held-out ({len(self.heldout)} examples, greedy): whole-sequence accuracy "
                         f"{last.seq_acc:.1%}, token accuracy {last.token_acc:.1%}")
        return "\n".join(lines) + "\n"
