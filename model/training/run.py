"""The training loop of train.py: epochs of token-bucketed batches, a save every few minutes and at
the end of each epoch, validation (loss, greedy BLEU, attention snapshots), and at the end the
choice of the weights to ship (model/training/choice.py). One step is model/training/loop.py's.
Layout: OUT/ is the finished model (committed, loaded by the app); OUT.work/ holds what only
training needs (model/training/state.py)."""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from typing import Any

import torch
import torch.distributed as dist
from tqdm import tqdm

from model.inference.options import DecodeOptions
from model.inference.pipeline import explain
from model.network.batch import collate
from model.network.trace import Recording
from model.network.transformer import Transformer
from model.storage.card import write_card
from model.storage.checkpoint import (
    Checkpoint,
    load_checkpoint,
    save_checkpoint,
    save_weights,
)
from model.training.choice import as_checkpoint, candidate_weights, choose, translate_greedy
from model.training.data import mixed_batches, read_parallel
from model.training.loop import (
    NonFiniteLoss,
    Progress,
    Schedule,
    StepSettings,
    train_epoch,
    train_step,
    validation_loss,
)
from model.training.metrics import corpus_scores
from model.training.setup import Runtime, build_tokenizers, load_corpus, model_config, train_examples, with_dropout
from model.training.state import continued_from, finished_progress, load_last, run_meta, save_last, work_dir

SNAPSHOT_SENTENCES = 3


# ---- evaluation ------------------------------------------------------------------------
def attention_snapshot(ckpt: Checkpoint, texts: list[str]) -> list[dict[str, Any]]:
    """For a few fixed sentences: the greedy output and its cross-attention (L, H, T, S),
    rounded to 3 decimals to keep the per-epoch file small."""
    shots = []
    for text in texts:
        ex = explain(ckpt, text, DecodeOptions("greedy"), recording=Recording())
        # float64 before rounding: a rounded float32 prints as 0.0949999988079071 in JSON
        round3 = lambda t: torch.round(t[:, 0].double(), decimals=3).tolist()  # noqa: E731
        shots.append({"source": text, "output": ex.output,
                      "source_tokens": ex.trace.source_tokens[0], "target_tokens": ex.trace.target_tokens[0],
                      "cross": round3(ex.trace.attention("cross"))})
    return shots


# ---- the loop ---------------------------------------------------------------------------
class Trainer:
    def __init__(self, args: argparse.Namespace, rt: Runtime) -> None:
        self.args, self.rt = args, rt
        self.work = work_dir(args.out)
        random.seed(args.seed)
        torch.manual_seed(args.seed)
        train_src, train_tgt = read_parallel(args.data, "train", args.src, args.tgt)
        if args.resume or args.init_from:
            start = load_checkpoint(self.work / "last" if args.resume else args.init_from)
            self.src_tok, self.tgt_tok, self.model = start.src_tokenizer, start.tgt_tokenizer, start.model
            if args.init_from and args.dropout is not None:
                self.model = with_dropout(self.model, args.dropout)
        else:
            self.src_tok, self.tgt_tok = build_tokenizers(args, train_src, train_tgt)
            self.model = Transformer(model_config(args, self.src_tok, self.tgt_tok))
        self.model.to(rt.device)
        self.cfg = self.model.cfg
        self.corpus = load_corpus(args, self.src_tok, self.tgt_tok, self.cfg, train_src, train_tgt)
        self.step_settings = StepSettings(args.label_smoothing, args.clip, args.amp)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=args.lr, betas=(0.9, 0.98), eps=1e-9,
                                          fused=rt.device.type == "cuda")    # one kernel for all parameters
        self.progress, self.log = Progress(), []
        self.epoch_len = 1
        if args.resume:
            self.progress, self.log = load_last(self.work, self.optimizer)
        elif args.init_from:
            self.progress, self.log = finished_progress(start)
            args.continued_from = continued_from(start)     # saved with the args: a resume keeps it
        restart = (getattr(args, "continued_from", None) or {}).get("steps", 0)
        self.schedule = Schedule(args.lr, args.warmup, args.epochs, args.cooldown_epochs,
                                 restart=restart, rewarm=args.rewarm if restart else 0)
        self.ddp = (torch.nn.parallel.DistributedDataParallel(self.model) if rt.world > 1 else self.model)
        self.scaler = torch.amp.GradScaler("cuda") if args.amp == "fp16" and rt.device.type == "cuda" else None
        self.snapshot_texts = self.corpus.val_src[:SNAPSHOT_SENTENCES]
        self.session_start = time.time()
        self.seen_loss, self.last_rate = (0.0, 1), 0.0
        self.sync = rt.device.type == "cpu"        # on a GPU the host runs ahead; the loss is read now and then

    # ---- batches of this rank for one epoch
    def epoch_batches(self, epoch: int) -> list[list[int]]:
        """This rank's batches of an epoch: with --subword-alpha the pairs split into pieces anew (seeded by
        the epoch: a resumed epoch gets the same split), the lexicon entries at most --lexicon-share of a batch."""
        a, c, seed = self.args, self.corpus, self.args.seed * 1000 + epoch
        alpha = getattr(a, "subword_alpha", 0.0)
        if alpha:
            c.train = train_examples(self.src_tok, self.tgt_tok, self.cfg, c.train_src, c.train_tgt, c.kinds,
                                     a.max_len, alpha, seed)
        batches = mixed_batches(c.train, c.lexicon, a.batch_tokens, seed, getattr(a, "lexicon_share", 0.25))
        usable = len(batches) - len(batches) % (self.rt.world * self.args.accum)
        return batches[self.rt.rank:usable:self.rt.world]

    def out_of_time(self, start: float) -> bool:
        budget = self.args.time_budget
        return budget is not None and time.time() - start > budget * 60

    def time_cooldown(self) -> float:
        """With --cooldown-minutes: 1 until that many minutes of --time-budget are left, then linearly
        down to 0 at its end (this command's budget: a resumed run cools down in its own)."""
        minutes = getattr(self.args, "cooldown_minutes", 0.0)
        if not minutes or self.args.time_budget is None:
            return 1.0
        left = self.args.time_budget * 60 - (time.time() - self.session_start)
        return min(1.0, max(0.0, left / (minutes * 60)))

    def run(self) -> None:
        a, rt = self.args, self.rt
        if rt.main:
            n = self.model.num_parameters()
            print(f"model: {n / 1e6:.2f} M parameters, {self.model.cfg}", file=sys.stderr)
            print(f"data: {len(self.corpus.train)} training pairs, {len(self.corpus.val)} val", file=sys.stderr)
        start = self.session_start = time.time()
        stop = False
        while self.progress.epoch < a.epochs and not stop:
            stop = self.train_epoch(start)
            if self.progress.batch_in_epoch == 0:          # a whole epoch done
                self.end_of_epoch(start)
            elif rt.main and getattr(a, "keep_partial", False):
                self.keep_partial(start)
            elif rt.main:
                self.save_state(start)
        if rt.world > 1:
            self.check_replicas()
        if rt.main:
            self.finish()
        if rt.world > 1:
            dist.barrier()  # the others wait for rank 0's evaluation and save: none tears gloo down early

    def check_replicas(self) -> None:
        """Every process must end with the same weights (DDP keeps them in step)."""
        flat = torch.cat([p.detach().float().flatten().cpu() for p in self.model.parameters()])
        digest = (float(flat.sum()), float((flat * flat).sum()), flat[:: max(1, flat.numel() // 1000)].tolist())
        digests: list[Any] = [None] * self.rt.world
        dist.all_gather_object(digests, digest)
        if any(d != digests[0] for d in digests):
            raise SystemExit("error: the data-parallel replicas hold different weights")
        if self.rt.main:
            print(f"replica check: {self.rt.world} processes hold identical weights", file=sys.stderr)

    def train_epoch(self, start: float) -> bool:
        """Train on the rest of the current epoch. Returns True when a limit stopped it."""
        a, p = self.args, self.progress
        batches = self.epoch_batches(p.epoch)
        self.epoch_len = len(batches)
        bar = tqdm(total=len(batches), initial=p.batch_in_epoch, desc=f"epoch {p.epoch + 1}/{a.epochs}",
                   disable=a.no_progress or not self.rt.main, file=sys.stderr, dynamic_ncols=True)
        seen = {"tokens": 0, "loss": 0.0, "t0": time.time(), "batches0": p.batch_in_epoch}
        clocks = {"saved": time.time(), "logged": time.time()}

        def on_step(loss: float | torch.Tensor, tokens: int) -> None:
            seen["tokens"] += tokens
            seen["loss"] = seen["loss"] + loss * tokens     # on a GPU a device tensor, read only when needed
            rate = seen["tokens"] / max(time.time() - seen["t0"], 1e-6)
            bar.update(a.accum)
            if not bar.disable:
                bar.set_postfix(loss=f"{float(loss):.3f}", tok_s=f"{rate:,.0f}", lr=f"{self._lr():.2e}")
            self.seen_loss, self.last_rate = (seen["loss"], seen["tokens"]), rate   # this session's epoch mean
            if not self.sync and p.step % 100 == 0 and not math.isfinite(float(seen["loss"])):
                self.abort_nan()
            now = time.time()
            if a.no_progress and a.log_every and now - clocks["logged"] > a.log_every * 60 and self.rt.main:
                clocks["logged"] = now
                print(self.progress_line(seen, len(batches)), file=sys.stderr, flush=True)
            if a.save_every and now - clocks["saved"] > a.save_every * 60 and self.rt.main \
                    and p.batch_in_epoch < len(batches):
                clocks["saved"] = now
                self.save_state(start)

        def should_stop() -> bool:
            return bool(a.max_steps and p.step >= a.max_steps) or self.out_of_time(start)

        try:
            return train_epoch(batches, p, self.train_step, a.accum, should_stop, on_step)
        finally:
            bar.close()

    def progress_line(self, seen: dict[str, float], n_batches: int) -> str:
        """One line for a log file: where the run is and how long the epoch has left."""
        p, a = self.progress, self.args
        spent = time.time() - seen["t0"]
        done = p.batch_in_epoch - seen["batches0"]
        left = (n_batches - p.batch_in_epoch) * spent / max(done, 1)
        return (f"{time.strftime('%H:%M:%S')} epoch {p.epoch + 1}/{a.epochs} batch {p.batch_in_epoch}/{n_batches} "
                f"step {p.step} loss {float(seen['loss']) / max(seen['tokens'], 1):.3f} "
                f"tok/s {seen['tokens'] / max(spent, 1e-6):,.0f} lr {self._lr():.2e} epoch left {left / 60:.0f} min")

    @property
    def last_loss(self) -> float:
        """Mean training loss per target token of this session's epoch so far."""
        total, tokens = self.seen_loss
        loss = float(total) / max(tokens, 1)
        if not math.isfinite(loss):
            self.abort_nan()
        return loss

    def _lr(self) -> float:
        p = self.progress
        return (self.schedule.lr(p.step, p.epoch + p.batch_in_epoch / max(self.epoch_len, 1))
                * self.time_cooldown())

    def train_step(self, group: list[list[int]]) -> tuple[float, int]:
        """One optimizer step on a group of batches (gradient accumulation); the step
        itself is model.training.train_step."""
        batches = [collate([self.corpus.train[i] for i in b], self.cfg.pad_id) for b in group]
        try:
            loss, tokens = train_step(self.ddp, self.optimizer, batches, self._lr(), self.step_settings,
                                      self.cfg.pad_id, self.scaler, sync=self.sync)
        except NonFiniteLoss:
            self.abort_nan()
        return loss, tokens * self.rt.world

    def abort_nan(self) -> None:
        print(f"\nerror: the training loss became NaN/inf at step {self.progress.step}; stopping. "
              f"The last good checkpoint is in {self.work / 'last'} (try a lower --lr or longer --warmup).",
              file=sys.stderr)
        sys.exit(3)

    def save_state(self, start: float) -> None:
        self.progress.elapsed += time.time() - start
        save_last(self.work, self.model, self.optimizer, self.progress, self.args, self.src_tok,
                  self.tgt_tok, self.log)
        self.progress.elapsed -= time.time() - start   # keep counting from `start` in this session

    def end_of_epoch(self, start: float) -> None:
        p = self.progress
        p.epoch += 1
        if not self.rt.main:
            return
        scores, ckpt = self.evaluate(start, p.epoch)
        self.work.mkdir(parents=True, exist_ok=True)
        save_weights(self.work / f"epoch-{p.epoch}.safetensors", self.model)
        stale = self.work / f"epoch-{p.epoch - max(self.args.average_last, 1)}.safetensors"
        stale.unlink(missing_ok=True)
        snaps_path = self.work / "attention_snapshots.json"
        snaps = json.loads(snaps_path.read_text()) if snaps_path.exists() else []
        snaps.append({"epoch": p.epoch, "sentences": attention_snapshot(ckpt, self.snapshot_texts)})
        snaps_path.write_text(json.dumps(snaps, separators=(",", ":")))
        self.keep_if_best(scores.bleu)
        self.save_state(start)

    def keep_partial(self, start: float) -> None:
        """--keep-partial: a limit stopped the run inside an epoch; the weights as they are (the most
        annealed, with --cooldown-minutes) are scored like an epoch's and kept if they are the best."""
        p = self.progress
        scores, _ = self.evaluate(start, round(p.epoch + p.batch_in_epoch / max(self.epoch_len, 1), 3))
        self.log[-1]["partial"] = True
        self.keep_if_best(scores.bleu)
        self.save_state(start)

    def evaluate(self, start: float, epoch: float) -> tuple[Any, Checkpoint]:
        """Validation loss and greedy BLEU of the current weights, appended to the log."""
        p = self.progress
        val_loss = validation_loss(self.model, self.corpus.val, self.cfg.pad_id)
        n = self.args.eval_sentences or len(self.corpus.val_src)
        ckpt = as_checkpoint(self.model, self.src_tok, self.tgt_tok)
        hyps = translate_greedy(ckpt, self.corpus.val_src[:n])
        scores = corpus_scores(hyps, self.corpus.val_tgt[:n])
        record = {"step": p.step, "epoch": epoch, "train_loss": round(self.last_loss, 4),
                  "val_loss": round(val_loss, 4), "val_bleu": round(scores.bleu, 2),
                  "val_chrf": round(scores.chrf, 2), "tokens_per_s": round(self.last_rate),
                  "lr": self._lr(), "wall_time_s": round(p.elapsed + time.time() - start, 1)}
        self.log.append(record)
        print(json.dumps(record), file=sys.stderr, flush=True)
        return scores, ckpt

    def keep_if_best(self, bleu: float) -> None:
        if bleu > self.progress.best_bleu:
            self.progress.best_bleu = bleu
            save_checkpoint(self.work / "best", self.model, self.src_tok, self.tgt_tok, meta=run_meta(self.args))

    def finish(self) -> None:
        """Keep whichever of (best epoch, average of the last epochs) scores higher on val; write it to
        OUT with the log, snapshots and a model card."""
        if not (self.work / "best").is_dir():
            print(f"stopped before the first epoch ended; resume with: python train.py --resume {self.args.out}",
                  file=sys.stderr)
            return
        candidates = candidate_weights(self.work, self.model.cfg, self.progress.epoch, self.args.average_last)
        chosen, results = choose(candidates, self.src_tok, self.tgt_tok, self.corpus.val_src, self.corpus.val_tgt,
                                 self.rt.device)
        snaps = self.work / "attention_snapshots.json"
        extra = {"training_log.jsonl": "".join(json.dumps(r) + "\n" for r in self.log),
                 "attention_snapshots.json": snaps.read_text() if snaps.exists() else "[]"}
        meta = {**run_meta(self.args), "selected": chosen, "val_bleu": round(results[chosen].bleu, 2),
                "val_chrf": round(results[chosen].chrf, 2), "bleu_signature": results[chosen].bleu_signature,
                "training_time_min": round(self.log[-1]["wall_time_s"] / 60, 1), "epochs": self.progress.epoch,
                "steps": self.progress.step, "parameters": self.model.num_parameters(),
                "hardware": hardware(self.rt), "train_args": {k: v for k, v in vars(self.args).items()
                                                           if k not in ("resume",)}}
        save_checkpoint(self.args.out, candidates[chosen], self.src_tok, self.tgt_tok, meta=meta,
                        half=self.args.half, extra_files=extra)
        write_card(self.args.out)
        print(f"wrote {self.args.out} ({chosen}, val BLEU {results[chosen].bleu:.2f})", file=sys.stderr)


def hardware(rt: Runtime) -> str:
    if rt.device.type == "cuda":
        return f"{rt.world} x {torch.cuda.get_device_name(rt.device)}"
    return f"CPU, {torch.get_num_threads()} threads x {rt.world} process(es), {os.cpu_count()} cores"


