"""A run's resumable state on disk: OUT.work/last holds the weights, the optimizer, the progress
(epoch, batch within it, step), the random generators and the log, written atomically, so a
stopped or killed run resumes exactly where its last save left it (`train.py --resume OUT`)."""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

import torch

from model.network.tokenizer import Tokenizer
from model.network.transformer import Transformer
from model.storage.card import read_training_log
from model.storage.checkpoint import (
    Checkpoint,
    save_checkpoint,
)
from model.training.loop import (
    Progress,
)


def work_dir(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.name + ".work")


# ---- state -------------------------------------------------------------------------------
def save_last(work: Path, model: Transformer, optimizer: torch.optim.Optimizer, progress: Progress,
              args: argparse.Namespace, src_tok: Tokenizer, tgt_tok: Tokenizer, log: list[dict]) -> None:
    """The resumable state, written atomically (checkpoint dir + optimizer + RNG)."""
    target = work / "last"
    save_checkpoint(target, model, src_tok, tgt_tok, meta=run_meta(args), extra_files={
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
    out = {"checkpoint": str(start.path), "epochs": meta.get("epochs"), "steps": meta.get("steps"),
           "val_bleu": meta.get("val_bleu"), "selected": meta.get("selected"),
           "train_args": meta.get("train_args", {})}
    if meta.get("grown_from"):           # made deeper by model.grow before this part: the card says so
        out["grown_from"] = meta["grown_from"]
    return out


def _to_tuple(x: Any) -> Any:
    return tuple(_to_tuple(v) for v in x) if isinstance(x, (list, tuple)) else x


def run_meta(args: argparse.Namespace) -> dict[str, Any]:
    return {"src_lang": args.src, "tgt_lang": args.tgt, "preset": args.preset}


