"""Training, as a library: the schedule, the loss, one optimizer step, the loop over an epoch.

`train.py` (Multi30K, resumable, `torchrun` data-parallel) calls these, and so can any
other trainer (the app's training lab): there is one training step in the project.

    lr = Schedule(peak=1e-3, warmup=600).lr(step, epochs_done)
    loss, tokens = train_step(model, optimizer, [(src, tgt), ...], lr, StepSettings(), pad_id)
    stopped = train_epoch(batches, progress, take_step, accum=1, should_stop=..., on_step=...)

Batches are token ids: src (B, S) ending in EOS, tgt (B, T) = BOS, tokens, EOS, both
padded with the config's pad id. The loss is the mean label-smoothed cross entropy per
non-pad target token (teacher forcing: the decoder reads tgt[:, :-1], predicts tgt[:, 1:]).
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from model.network.batch import Example, collate
from model.network.layers import DecoderCache
from model.training.data import token_batches


# ---- the learning-rate schedule ----------------------------------------------------------------
def learning_rate(step: int, peak: float, warmup: int, ramp: bool = True) -> float:
    """The paper's schedule, scaled to reach `peak` at the end of warm-up:
    linear warm-up, then decay with the inverse square root of the step.
    ramp=False (a lab experiment): no warm-up, the peak from the first step on."""
    step = max(step, 1)
    return peak * min(step / warmup if ramp else 1.0, math.sqrt(warmup / step))


def cooldown_factor(epochs_done: float, epochs: int, cooldown: float) -> float:
    """1 until the last `cooldown` epochs of an `epochs`-long run, then linearly down to 0
    at its end: an annealed end point for a run whose length is fixed in advance."""
    if cooldown <= 0:
        return 1.0
    return min(1.0, max(0.0, (epochs - epochs_done) / cooldown))


def rewarm_factor(step: int, restart: int, rewarm: int) -> float:
    """Linear from 0 to 1 over the `rewarm` steps after `restart` (1 when rewarm is 0): Adam's
    moment estimates start empty, and its first steps would otherwise be full-size."""
    if rewarm <= 0:
        return 1.0
    return min(1.0, max(step - restart, 1) / rewarm)


@dataclass(frozen=True)
class Schedule:
    peak: float = 1e-3
    warmup: int = 600
    epochs: int = 0            # planned length, for the cooldown
    cooldown: float = 0.0      # epochs at the end over which the rate falls linearly to 0
    ramp: bool = True          # False: skip the warm-up ramp (the decay still starts at `warmup`)
    # A run continued from finished weights with a fresh optimizer (train.py --init-from):
    # from step `restart` on, the rate ramps up again linearly over `rewarm` steps.
    restart: int = 0
    rewarm: int = 0

    def lr(self, step: int, epochs_done: float = 0.0) -> float:
        return (learning_rate(step, self.peak, self.warmup, self.ramp)
                * cooldown_factor(epochs_done, self.epochs, self.cooldown)
                * rewarm_factor(step, self.restart, self.rewarm))


# ---- one step ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class StepSettings:
    label_smoothing: float = 0.1
    clip: float = 1.0          # gradient-norm clipping (0: off)
    amp: str = "off"           # "off" | "bf16" | "fp16": autocast precision
    # True: the decoder reads the reference (teacher forcing, the paper). False (a lab
    # experiment): it reads its own greedy predictions, made step by step without gradient.
    teacher_forcing: bool = True


class NonFiniteLoss(RuntimeError):
    """The loss became NaN or infinite; the optimizer step was not taken."""


def autocast(amp: str, device: torch.device) -> contextlib.AbstractContextManager:
    if amp == "off":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16 if amp == "bf16" else torch.float16)


def loss_and_tokens(model: torch.nn.Module, src: Tensor, tgt: Tensor, smoothing: float,
                    pad_id: int, decoder_input: Tensor | None = None) -> tuple[Tensor, int]:
    """Mean label-smoothed cross entropy over the non-pad target tokens, and their count.
    decoder_input (B, T-1): what the decoder reads instead of the reference tgt[:, :-1]."""
    logits = model(src, tgt[:, :-1] if decoder_input is None else decoder_input)   # (B, T-1, V)
    gold = tgt[:, 1:]                                                  # (B, T-1)
    loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), gold.reshape(-1),
                           ignore_index=pad_id, label_smoothing=smoothing)
    return loss, int((gold != pad_id).sum())


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batches: Sequence[tuple[Tensor, Tensor]],
               lr: float, settings: StepSettings, pad_id: int,
               scaler: torch.amp.GradScaler | None = None, sync: bool = True) -> tuple[float | Tensor, int]:
    """One optimizer step over `batches` (gradient accumulation, each batch weighted by its
    target tokens). `model` may be a DistributedDataParallel wrapper: gradients are then
    synchronised once, on the last batch. Returns (mean loss per target token, target
    tokens). Raises NonFiniteLoss before stepping on a NaN/inf loss.

    sync=False (a GPU run): the loss comes back as a 0-dim tensor on the device, not read, so the host
    queues the next step while the device works; the caller checks it is finite now and then
    (model/training/run.py), and a non-finite loss is not caught before this step."""
    model.train()
    for group in optimizer.param_groups:
        group["lr"] = lr
    total = sum(int((tgt[:, 1:] != pad_id).sum()) for _, tgt in batches)
    device = next(model.parameters()).device
    loss_sum = 0.0
    for j, (src, tgt) in enumerate(batches):
        last = j == len(batches) - 1
        grads_apart = model.no_sync() if hasattr(model, "no_sync") and not last else contextlib.nullcontext()
        src, tgt = src.to(device, non_blocking=True), tgt.to(device, non_blocking=True)
        fed = None if settings.teacher_forcing else own_predictions(model, src, tgt[:, :-1], pad_id)
        with grads_apart, autocast(settings.amp, device):
            loss, ntok = loss_and_tokens(model, src, tgt, settings.label_smoothing, pad_id, fed)
        scaled = loss * (ntok / max(total, 1))
        (scaler.scale(scaled) if scaler else scaled).backward()
        loss_sum = loss_sum + (float(loss.detach()) if sync else loss.detach().float()) * ntok
    if sync and not math.isfinite(loss_sum):
        optimizer.zero_grad(set_to_none=True)
        raise NonFiniteLoss(f"the training loss became {loss_sum}")
    _apply(model, optimizer, settings.clip, scaler)
    return loss_sum / max(total, 1), total


@torch.no_grad()
def own_predictions(model: torch.nn.Module, src: Tensor, reference_input: Tensor, pad_id: int) -> Tensor:
    """The decoder input a model gives itself: the start symbol, then its own greedy choice
    at each position, decoded step by step in eval mode. reference_input (B, T) gives the
    length and where the padding is. -> (B, T)."""
    net = model.module if hasattr(model, "module") else model          # under DistributedDataParallel
    was_training = net.training
    net.eval()
    src_mask = net.src_mask(src)
    memory = net.encode(src, src_mask)
    cache = DecoderCache.empty(net.cfg.n_decoder_layers)
    fed = reference_input[:, :1]                                       # (B, 1) start symbols
    for _ in range(reference_input.size(1) - 1):
        hidden = net.decode(fed[:, -1:], memory, src_mask, cache)      # (B, 1, D)
        fed = torch.cat([fed, net.generator(hidden[:, -1]).argmax(-1, keepdim=True)], dim=1)
    net.train(was_training)
    return fed.masked_fill(reference_input == pad_id, pad_id)


def _apply(model: torch.nn.Module, optimizer: torch.optim.Optimizer, clip: float,
           scaler: torch.amp.GradScaler | None) -> None:
    if scaler:
        scaler.unscale_(optimizer)
    if clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    if scaler:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)


# ---- the loop ----------------------------------------------------------------------------------
@dataclass
class Progress:
    step: int = 0
    epoch: int = 0           # epochs completed
    batch_in_epoch: int = 0  # batches of the current epoch already consumed
    best_bleu: float = -1.0
    elapsed: float = 0.0     # training seconds over all sessions


def train_epoch(batches: Sequence[list[int]], progress: Progress,
                take_step: Callable[[Sequence[list[int]]], tuple[float, int]], accum: int = 1,
                should_stop: Callable[[], bool] = lambda: False,
                on_step: Callable[[float, int], None] = lambda loss, tokens: None) -> bool:
    """Train on the rest of one epoch's `batches` (lists of example indices), `accum` at
    a time, from `progress.batch_in_epoch` on. take_step(group) trains on one group and
    returns (loss, tokens). Returns True when should_stop() ended it early; otherwise the
    epoch is complete and progress.batch_in_epoch is back to 0."""
    while progress.batch_in_epoch < len(batches):
        group = batches[progress.batch_in_epoch:progress.batch_in_epoch + accum]
        progress.step += 1
        loss, tokens = take_step(group)
        progress.batch_in_epoch += len(group)
        on_step(loss, tokens)
        if should_stop():
            if progress.batch_in_epoch >= len(batches):
                progress.batch_in_epoch = 0
            return True
    progress.batch_in_epoch = 0
    return False


# ---- evaluation --------------------------------------------------------------------------------
@torch.no_grad()
def validation_loss(model: torch.nn.Module, examples: Sequence[Example], pad_id: int,
                    batch_tokens: int = 4000) -> float:
    """Mean cross entropy per target token (no label smoothing) over examples."""
    model.eval()
    device = next(model.parameters()).device
    total, count = 0.0, 0
    for batch in token_batches(list(examples), batch_tokens, seed=0):
        src, tgt = (t.to(device) for t in collate([examples[i] for i in batch], pad_id))
        loss, n = loss_and_tokens(model, src, tgt, 0.0, pad_id)
        total, count = total + float(loss) * n, count + n
    return total / max(count, 1)
