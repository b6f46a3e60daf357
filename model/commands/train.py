"""Train the Transformer on a parallel corpus (Multi30K by default) and write checkpoints.

Examples:
  python train.py --data ../shared/data/multi30k --src en --tgt de --preset small \\
      --out checkpoints/multi30k-en-de --time-budget 110
  torchrun --nproc_per_node=2 train.py --data DIR --src de --tgt en --out checkpoints/x
  python train.py --data DIR --device cuda --amp bf16 --batch-tokens 24000 --time-budget 3 \
      --cooldown-minutes 1.2 --out runs/teacher     # a GPU: bf16 autocast, fused Adam, 3 minutes
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
import sys
from pathlib import Path

import torch.distributed as dist

from model.commands.registry import COMMAND
from model.network.config import PRESETS
from model.storage.checkpoint import (
    CheckpointError,
)
from model.training.data import DataError
from model.training.run import Trainer
from model.training.setup import setup_runtime
from model.training.state import work_dir


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
    g.add_argument("--subword-alpha", type=float, default=0.0, metavar="P",
                   help="subword sampling: each epoch splits the training *sources* into pieces anew, skipping each "
                        "BPE merge with probability P (BPE-dropout; ~0.1; default 0: the one best split); the targets "
                        "keep their best split")
    g.add_argument("--lexicon-share", type=float, default=0.25, metavar="F",
                   help="at most this share of a batch's pairs are dictionary entries (pairs of kind 'lexicon' "
                        "in {split}.tag; default 0.25)")
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
    g.add_argument("--cooldown-minutes", type=float, default=0.0, metavar="MIN",
                   help="with --time-budget: over its last MIN minutes, scale the learning rate linearly down to 0 "
                        "(an annealed end for a run whose length is set in time, e.g. on a lent GPU)")
    g.add_argument("--max-steps", type=int, help="stop after this many optimizer steps")
    g.add_argument("--keep-partial", action="store_true",
                   help="when a limit stops the run inside an epoch, score the weights as they are like an "
                        "epoch's and keep them if best (a run set in time: its end is its most annealed point)")
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
    elif args.cooldown_minutes and not args.time_budget:
        p.error("--cooldown-minutes needs --time-budget")
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
