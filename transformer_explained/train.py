"""Train the Transformer on a parallel corpus (Multi30K by default) and write checkpoints.

Examples:
  python train.py --data ../shared/data/multi30k --src en --tgt de --preset small \\
      --out checkpoints/multi30k-en-de --time-budget 110
  torchrun --nproc_per_node=2 train.py --data DIR --src de --tgt en --out checkpoints/x
  python train.py --resume checkpoints/multi30k-en-de      # continue an interrupted run
  python train.py --data ../shared/data/multi30k --init-from checkpoints/multi30k-en-de \
      --epochs 35 --cooldown-epochs 6 --out checkpoints/en-de-longer   # train a finished model on

The training step and the loop over an epoch are model/training/loop.py's; validation
translations go through model/inference/pipeline.py; weights are written and read by
model/storage/checkpoint.py. This file adds the data, resuming, torchrun and the final choice.

Layout: OUT/ is the finished model (committed, loaded by the app); OUT.work/ holds
what only training needs (last checkpoint with optimizer state, per-epoch weights
for averaging); it is git-ignored.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from tqdm import tqdm

from model.commands.registry import COMMAND
from model.inference.options import DecodeOptions
from model.inference.pipeline import explain, translate
from model.network.batch import Example, collate
from model.network.config import PRESETS, ModelConfig, preset
from model.network.tokenizer import Tokenizer
from model.network.trace import Recording
from model.network.transformer import Transformer
from model.storage.card import read_training_log, write_card
from model.storage.checkpoint import (
    Checkpoint,
    CheckpointError,
    load_checkpoint,
    load_weights,
    save_checkpoint,
    save_weights,
)
from model.training.data import DataError, make_examples, read_parallel, token_batches
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

SNAPSHOT_SENTENCES = 3


# ---- arguments -----------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=COMMAND.get() or "python train.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("data")
    g.add_argument("--data", help="directory with {train,val}.{lang}[.gz] (e.g. ../shared/data/multi30k)")
    g.add_argument("--src", default="en", help="source language suffix (default en)")
    g.add_argument("--tgt", default="de", help="target language suffix (default de)")
    g.add_argument("--vocab-size", type=int, default=8000, help="sentencepiece pieces (default 8000)")
    g.add_argument("--separate-vocab", action="store_true", help="one tokenizer per language (no tying)")
    g.add_argument("--tokenizer-from", help="reuse the tokenizer of this checkpoint directory")
    g.add_argument("--max-len", type=int, default=128, help="truncate training sentences to this many tokens")
    g.add_argument("--data-note", metavar="TEXT",
                   help="how --data was made, for the model card (e.g. 'targets translated by an ensemble')")
    g = p.add_argument_group("model")
    g.add_argument("--preset", default="small", choices=sorted(PRESETS), help="model shape (default small)")
    for name in ("d-model", "n-heads", "n-encoder-layers", "n-decoder-layers", "d-ff"):
        g.add_argument(f"--{name}", type=int, help="override the preset")
    g.add_argument("--dropout", type=float, help="override the preset")
    g.add_argument("--norm-first", action="store_true", help="pre-norm instead of the paper's post-norm")
    g = p.add_argument_group("optimisation")
    g.add_argument("--batch-tokens", type=int, default=2600, help="tokens per batch, padding included (default 2600)")
    g.add_argument("--accum", type=int, default=1, help="gradient accumulation steps (default 1)")
    g.add_argument("--lr", type=float, default=1e-3, help="peak learning rate after warm-up (default 1e-3)")
    g.add_argument("--warmup", type=int, default=600, help="warm-up steps, then inverse square root decay")
    g.add_argument("--label-smoothing", type=float, default=0.1)
    g.add_argument("--clip", type=float, default=1.0, help="gradient norm clipping (0: off)")
    g.add_argument("--epochs", type=int, default=20)
    g.add_argument("--cooldown-epochs", type=float, default=0.0,
                   help="over the last N of --epochs, scale the learning rate linearly down to 0 "
                        "(default 0: the paper's schedule alone)")
    g.add_argument("--max-steps", type=int, help="stop after this many optimizer steps")
    g.add_argument("--time-budget", type=float,
                   help="minutes for this command (a resumed run gets its own); stop and save when spent")
    g.add_argument("--average-last", type=int, default=3, help="average the last N epochs' weights (default 3)")
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--save-every", type=float, default=10.0, metavar="MIN",
                   help="also save the resumable state every MIN minutes within an epoch (default 10; 0: only at "
                        "the end of each epoch and when a limit stops the run), so a killed run loses at most that")
    g.add_argument("--log-every", type=float, default=5.0, metavar="MIN",
                   help="with --no-progress: print a progress line (epoch, batch, loss, tokens/s, time left in "
                        "the epoch) every MIN minutes (default 5)")
    g = p.add_argument_group("run")
    g.add_argument("--out", help="checkpoint directory to write (e.g. checkpoints/multi30k-en-de)")
    g.add_argument("--resume", help="continue the run whose --out was this directory")
    g.add_argument("--init-from", metavar="DIR",
                   help="continue training a finished checkpoint: its weights, tokenizer, shape, step and "
                        "epoch counts and log (--epochs counts all epochs); the optimizer starts empty. "
                        "--dropout may change the rate; the other shape options are ignored")
    g.add_argument("--rewarm", type=int, default=200,
                   help="with --init-from: steps over which the rate ramps up again (default 200)")
    g.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    g.add_argument("--amp", default="off", choices=["off", "bf16", "fp16"], help="autocast precision")
    g.add_argument("--threads", type=int, help="torch CPU threads")
    g.add_argument("--eval-sentences", type=int, default=0, help="val sentences for BLEU each epoch (0: all)")
    g.add_argument("--half", action="store_true", help="store the final weights in float16")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = p.parse_args(argv)
    if args.resume:
        args = _resumed_args(args, argv)
    elif not args.data or not args.out:
        p.error("--data and --out are required (or --resume DIR)")
    elif args.init_from and not (Path(args.init_from) / "config.json").is_file():
        p.error(f"--init-from {args.init_from}: not a checkpoint directory (no config.json)")
    return args


def _resumed_args(args: argparse.Namespace, argv: list[str] | None) -> argparse.Namespace:
    """Arguments of the interrupted run, with the stopping limits of this command line."""
    state_path = work_dir(args.resume) / "last" / "args.json"
    if not state_path.is_file():
        sys.exit(f"error: {state_path}: missing; nothing to resume")
    saved = {**vars(args), **json.loads(state_path.read_text())}   # options added since keep their defaults
    given = set(a.split("=")[0].lstrip("-").replace("-", "_") for a in (argv or sys.argv[1:]) if a.startswith("--"))
    for key in ("epochs", "max_steps", "time_budget", "device", "threads", "no_progress", "eval_sentences",
                "save_every", "log_every"):
        if key in given:
            saved[key] = getattr(args, key)
    saved["resume"] = args.resume
    return argparse.Namespace(**saved)


def work_dir(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.name + ".work")


# ---- distributed / device --------------------------------------------------------------
@dataclass
class Runtime:
    device: torch.device
    rank: int = 0
    world: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0


def setup_runtime(args: argparse.Namespace) -> Runtime:
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available()):
        device = torch.device("cuda")
    else:
        device = torch.device("cpu")
    if device.type == "cpu" and args.amp == "bf16" and cpu_has_native_bf16() is False:
        print("warning: this CPU has no native bfloat16 (no avx512_bf16 / amx_bf16 in /proc/cpuinfo): "
              "--amp bf16 is emulated here and was measured ~30x slower on such a machine (38 s per step "
              "instead of 1.2 s); --amp off is the fast choice", file=sys.stderr)
    if "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1:
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend)
        rank, world = dist.get_rank(), dist.get_world_size()
        if device.type == "cuda":
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
            torch.cuda.set_device(device)
        return Runtime(device, rank, world)
    return Runtime(device)


def cpu_has_native_bf16(cpuinfo: str | Path = "/proc/cpuinfo") -> bool | None:
    """Whether the CPU computes bfloat16 natively (None: cannot tell, e.g. not Linux)."""
    try:
        flags = Path(cpuinfo).read_text()
    except OSError:
        return None
    return any(f in flags.split() for f in ("avx512_bf16", "amx_bf16"))


# ---- data ----------------------------------------------------------------------------
@dataclass
class Corpus:
    train: list[Example]
    val_src: list[str]
    val_tgt: list[str]
    val: list[Example]


def build_tokenizers(
    args: argparse.Namespace, train_src: list[str], train_tgt: list[str]
) -> tuple[Tokenizer, Tokenizer]:
    if args.tokenizer_from:
        ckpt = load_checkpoint(args.tokenizer_from)
        return ckpt.src_tokenizer, ckpt.tgt_tokenizer
    if args.separate_vocab:
        return Tokenizer.train(train_src, args.vocab_size), Tokenizer.train(train_tgt, args.vocab_size)
    joint = Tokenizer.train(train_src + train_tgt, args.vocab_size)
    return joint, joint


def load_corpus(args: argparse.Namespace, src_tok: Tokenizer, tgt_tok: Tokenizer, cfg: ModelConfig,
                train_src: list[str], train_tgt: list[str]) -> Corpus:
    val_src, val_tgt = read_parallel(args.data, "val", args.src, args.tgt)
    encode = lambda tok, lines: [tok.encode(line) for line in lines]  # noqa: E731
    train = make_examples(encode(src_tok, train_src), encode(tgt_tok, train_tgt), cfg.bos_id, cfg.eos_id,
                          args.max_len)
    val = make_examples(encode(src_tok, val_src), encode(tgt_tok, val_tgt), cfg.bos_id, cfg.eos_id, args.max_len)
    return Corpus(train, val_src, val_tgt, val)


def model_config(args: argparse.Namespace, src_tok: Tokenizer, tgt_tok: Tokenizer) -> ModelConfig:
    overrides: dict[str, Any] = {k: getattr(args, k) for k in ("d_model", "n_heads", "n_encoder_layers",
                                                               "n_decoder_layers", "d_ff", "dropout")
                                 if getattr(args, k) is not None}
    if src_tok.special_ids != tgt_tok.special_ids:
        raise DataError(f"the source and target tokenizers disagree on special ids: "
                        f"{src_tok.special_ids} vs {tgt_tok.special_ids}")
    return preset(args.preset, src_vocab_size=src_tok.vocab_size, tgt_vocab_size=tgt_tok.vocab_size,
                  tie_embeddings=src_tok.proto == tgt_tok.proto, norm_first=args.norm_first,
                  max_positions=max(256, args.max_len + 2), **src_tok.special_ids, **overrides)


def with_dropout(model: Transformer, dropout: float) -> Transformer:
    """The same weights in a model whose dropout rate is `dropout` (the only setting of the
    shape that --init-from may change: it has no weights of its own)."""
    if dropout == model.cfg.dropout:
        return model
    changed = Transformer(replace(model.cfg, dropout=dropout))
    changed.load_state_dict(model.state_dict())          # strict: same shapes
    return changed


# ---- evaluation ------------------------------------------------------------------------
def as_checkpoint(model: Transformer, src_tok: Tokenizer, tgt_tok: Tokenizer) -> Checkpoint:
    return Checkpoint(model.eval(), src_tok, tgt_tok)


def translate_greedy(ckpt: Checkpoint, texts: list[str]) -> list[str]:
    """Greedy translations in input order, through the library's batched translation."""
    return translate(ckpt, texts, DecodeOptions("greedy"), batch_size=64)


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


# ---- state -------------------------------------------------------------------------------
def save_last(work: Path, model: Transformer, optimizer: torch.optim.Optimizer, progress: Progress,
              args: argparse.Namespace, src_tok: Tokenizer, tgt_tok: Tokenizer, log: list[dict]) -> None:
    """The resumable state, written atomically (checkpoint dir + optimizer + RNG)."""
    target = work / "last"
    save_checkpoint(target, model, src_tok, tgt_tok, meta=_meta(args), extra_files={
        "args.json": json.dumps(vars(args), indent=2),
        "progress.json": json.dumps(progress.__dict__),
        "training_log.jsonl": "".join(json.dumps(r) + "\n" for r in log)})
    state = {"optimizer": optimizer.state_dict(), "torch_rng": torch.get_rng_state(),
             "python_rng": random.getstate()}
    tmp = target / "training_state.pt.tmp"
    torch.save(state, tmp)
    tmp.rename(target / "training_state.pt")


def load_last(work: Path, optimizer: torch.optim.Optimizer) -> tuple[Progress, list[dict]]:
    last = work / "last"
    state = torch.load(last / "training_state.pt", weights_only=True)  # our own file, never a checkpoint's
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["torch_rng"])
    random.setstate(_to_tuple(state["python_rng"]))
    progress = Progress(**json.loads((last / "progress.json").read_text()))
    return progress, read_training_log(last)


def finished_progress(start: Checkpoint) -> tuple[Progress, list[dict]]:
    """Where a finished checkpoint's training ended: its step, epoch and time counts, its log."""
    meta, log = start.meta, read_training_log(start.path)
    elapsed = max(60.0 * float(meta.get("training_time_min", 0.0)), log[-1]["wall_time_s"] if log else 0.0)
    return Progress(step=int(meta.get("steps", 0)), epoch=int(meta.get("epochs", 0)), elapsed=elapsed), log


def continued_from(start: Checkpoint) -> dict[str, Any]:
    """What the model card says about the run a continued one started from."""
    meta = start.meta
    return {"checkpoint": str(start.path), "epochs": meta.get("epochs"), "steps": meta.get("steps"),
            "val_bleu": meta.get("val_bleu"), "selected": meta.get("selected"),
            "train_args": meta.get("train_args", {})}


def _to_tuple(x: Any) -> Any:
    return tuple(_to_tuple(v) for v in x) if isinstance(x, (list, tuple)) else x


def _meta(args: argparse.Namespace) -> dict[str, Any]:
    return {"src_lang": args.src, "tgt_lang": args.tgt, "preset": args.preset}


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
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=args.lr, betas=(0.9, 0.98), eps=1e-9)
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

    # ---- batches of this rank for one epoch
    def epoch_batches(self, epoch: int) -> list[list[int]]:
        batches = token_batches(self.corpus.train, self.args.batch_tokens, seed=self.args.seed * 1000 + epoch)
        usable = len(batches) - len(batches) % (self.rt.world * self.args.accum)
        return batches[self.rt.rank:usable:self.rt.world]

    def out_of_time(self, start: float) -> bool:
        budget = self.args.time_budget
        return budget is not None and time.time() - start > budget * 60

    def run(self) -> None:
        a, rt = self.args, self.rt
        if rt.main:
            n = self.model.num_parameters()
            print(f"model: {n / 1e6:.2f} M parameters, {self.model.cfg}", file=sys.stderr)
            print(f"data: {len(self.corpus.train)} training pairs, {len(self.corpus.val)} val", file=sys.stderr)
        start = time.time()
        stop = False
        while self.progress.epoch < a.epochs and not stop:
            stop = self.train_epoch(start)
            if self.progress.batch_in_epoch == 0:          # a whole epoch done
                self.end_of_epoch(start)
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

        def on_step(loss: float, tokens: int) -> None:
            seen["tokens"] += tokens
            seen["loss"] += loss * tokens
            rate = seen["tokens"] / max(time.time() - seen["t0"], 1e-6)
            bar.update(a.accum)
            bar.set_postfix(loss=f"{loss:.3f}", tok_s=f"{rate:,.0f}", lr=f"{self._lr():.2e}")
            self.last_loss, self.last_rate = seen["loss"] / seen["tokens"], rate   # this session's epoch mean
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
                f"step {p.step} loss {seen['loss'] / max(seen['tokens'], 1):.3f} "
                f"tok/s {seen['tokens'] / max(spent, 1e-6):,.0f} lr {self._lr():.2e} epoch left {left / 60:.0f} min")

    def _lr(self) -> float:
        p = self.progress
        return self.schedule.lr(p.step, p.epoch + p.batch_in_epoch / max(self.epoch_len, 1))

    def train_step(self, group: list[list[int]]) -> tuple[float, int]:
        """One optimizer step on a group of batches (gradient accumulation); the step
        itself is model.training.train_step."""
        batches = [collate([self.corpus.train[i] for i in b], self.cfg.pad_id) for b in group]
        try:
            loss, tokens = train_step(self.ddp, self.optimizer, batches, self._lr(), self.step_settings,
                                      self.cfg.pad_id, self.scaler)
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
        val_loss = validation_loss(self.model, self.corpus.val, self.cfg.pad_id)
        n = self.args.eval_sentences or len(self.corpus.val_src)
        ckpt = as_checkpoint(self.model, self.src_tok, self.tgt_tok)
        hyps = translate_greedy(ckpt, self.corpus.val_src[:n])
        scores = corpus_scores(hyps, self.corpus.val_tgt[:n])
        record = {"step": p.step, "epoch": p.epoch, "train_loss": round(self.last_loss, 4),
                  "val_loss": round(val_loss, 4), "val_bleu": round(scores.bleu, 2),
                  "val_chrf": round(scores.chrf, 2), "tokens_per_s": round(self.last_rate),
                  "lr": self._lr(), "wall_time_s": round(p.elapsed + time.time() - start, 1)}
        self.log.append(record)
        print(json.dumps(record), file=sys.stderr)
        self.work.mkdir(parents=True, exist_ok=True)
        save_weights(self.work / f"epoch-{p.epoch}.safetensors", self.model)
        stale = self.work / f"epoch-{p.epoch - max(self.args.average_last, 1)}.safetensors"
        stale.unlink(missing_ok=True)
        snaps_path = self.work / "attention_snapshots.json"
        snaps = json.loads(snaps_path.read_text()) if snaps_path.exists() else []
        snaps.append({"epoch": p.epoch, "sentences": attention_snapshot(ckpt, self.snapshot_texts)})
        snaps_path.write_text(json.dumps(snaps, separators=(",", ":")))
        if scores.bleu > p.best_bleu:
            p.best_bleu = scores.bleu
            save_checkpoint(self.work / "best", self.model, self.src_tok, self.tgt_tok, meta=_meta(self.args))
        self.save_state(start)

    def finish(self) -> None:
        """Average the last epochs, keep whichever of (average, best) scores higher on val,
        write it to OUT with the log, snapshots and a model card."""
        if not (self.work / "best").is_dir():
            print(f"stopped before the first epoch ended; resume with: python train.py --resume {self.args.out}",
                  file=sys.stderr)
            return
        candidates = {"best epoch": load_checkpoint(self.work / "best").model}
        averaged = average_epochs(self.model.cfg, self.work, self.progress.epoch, self.args.average_last)
        if averaged is not None:
            candidates[f"average of last {self.args.average_last} epochs"] = averaged
        results = {}
        for name, m in candidates.items():
            hyps = translate_greedy(as_checkpoint(m.to(self.rt.device), self.src_tok, self.tgt_tok),
                                    self.corpus.val_src)
            results[name] = corpus_scores(hyps, self.corpus.val_tgt)
            print(f"val {name}: {results[name]}", file=sys.stderr)
        chosen = max(results, key=lambda k: results[k].bleu)
        snaps = self.work / "attention_snapshots.json"
        extra = {"training_log.jsonl": "".join(json.dumps(r) + "\n" for r in self.log),
                 "attention_snapshots.json": snaps.read_text() if snaps.exists() else "[]"}
        meta = {**_meta(self.args), "selected": chosen, "val_bleu": round(results[chosen].bleu, 2),
                "val_chrf": round(results[chosen].chrf, 2), "bleu_signature": results[chosen].bleu_signature,
                "training_time_min": round(self.log[-1]["wall_time_s"] / 60, 1), "epochs": self.progress.epoch,
                "steps": self.progress.step, "parameters": self.model.num_parameters(),
                "hardware": hardware(self.rt), "train_args": {k: v for k, v in vars(self.args).items()
                                                           if k not in ("resume",)}}
        save_checkpoint(self.args.out, candidates[chosen], self.src_tok, self.tgt_tok, meta=meta,
                        half=self.args.half, extra_files=extra)
        write_card(self.args.out)
        print(f"wrote {self.args.out} ({chosen}, val BLEU {results[chosen].bleu:.2f})", file=sys.stderr)


def average_epochs(cfg: ModelConfig, work: Path, last_epoch: int, n: int) -> Transformer | None:
    """The mean of the last n epochs' weights (each loaded strictly), or None."""
    paths = [work / f"epoch-{e}.safetensors" for e in range(last_epoch - n + 1, last_epoch + 1)]
    if n < 2 or not all(p.is_file() for p in paths):
        return None
    states = [load_weights(p, cfg).state_dict() for p in paths]
    model = Transformer(cfg)
    model.load_state_dict({k: sum(s[k] for s in states) / n for k in states[0]})   # strict
    return model.eval()


def hardware(rt: Runtime) -> str:
    if rt.device.type == "cuda":
        return f"{rt.world} x {torch.cuda.get_device_name(rt.device)}"
    return f"CPU, {torch.get_num_threads()} threads x {rt.world} process(es), {os.cpu_count()} cores"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        rt = setup_runtime(args)
        Trainer(args, rt).run()
    except (DataError, CheckpointError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
