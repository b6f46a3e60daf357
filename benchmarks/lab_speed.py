"""Training-lab measurements (issue 15): how fast the default task is learned, and what
each switched-off part of the paper does to it. The lab page's captions quote these.

  .venv/bin/python -m benchmarks.lab_speed [--seeds 0,1,2] [--steps 1500] [--only base,no_pe]

For each experiment and seed: one LabRun of the default reverse task (length 4-10, 20
symbols, d_model 64, 2+2 layers, 4 heads) with one change, evaluated on 500 held-out
examples every 50 steps (as in the app), ending at 100 % held-out whole-sequence accuracy or after
`--steps` steps. Reported per experiment, median over seeds: wall seconds and steps to
99 % held-out whole-sequence accuracy ("never" if not reached), the best held-out
accuracy, and the training loss at a few steps (mean of the 50 steps before).
Run it on a quiet machine: wall seconds are the point.
"""
from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass

import torch

from benchmarks.common import machine
from model.training.lab import LabRun, LabSettings

EXPERIMENTS: dict[str, dict] = {
    "base": {},
    "no_pe": {"positional_encoding": False},
    "no_scale": {"scale_attention": False},
    "no_causal": {"causal_mask": False},
    "no_residual": {"residual": False},
    "no_smoothing": {"label_smoothing": 0.0},
    "no_causal_no_smoothing": {"causal_mask": False, "label_smoothing": 0.0},
    "no_warmup": {"warmup": False},
    "own_predictions": {"teacher_forcing": False},
}
LOSS_AT = (100, 200, 300, 500, 1000)


@dataclass
class Outcome:
    seconds_to_99: float | None
    steps_to_99: int | None
    best_seq: float
    final_seq: float
    final_token: float
    loss_at: dict[int, float]


def one_run(changes: dict, seed: int, steps: int) -> Outcome:
    run = LabRun(LabSettings(seed=seed, max_steps=steps, time_cap_s=10_000, **changes))
    run.train()
    hit = next((p for p in run.history if p.seq_acc >= 0.99), None)
    loss_at = {p.step: p.train_loss for p in run.history if p.step in LOSS_AT}
    last = run.history[-1]
    return Outcome(hit.seconds if hit else None, hit.step if hit else None, max(p.seq_acc for p in run.history),
                   last.seq_acc, last.token_acc, loss_at)


def _median(values: list) -> str:
    known = [v for v in values if v is not None]
    if len(known) < len(values):
        return f"never ({len(values) - len(known)}/{len(values)})" if not known else \
            f"{statistics.median(known):.0f} ({len(known)}/{len(values)} runs)"
    return f"{statistics.median(known):.1f}"


def report(name: str, outcomes: list[Outcome]) -> str:
    losses = []
    for step in LOSS_AT:
        at = [o.loss_at[step] for o in outcomes if step in o.loss_at]
        losses.append(f"{statistics.median(at):.3f}" if len(at) == len(outcomes) else "-")
    cells = [name, _median([o.seconds_to_99 for o in outcomes]), _median([o.steps_to_99 for o in outcomes])]
    for f in ("best_seq", "final_seq", "final_token"):
        cells.append(f"{statistics.median(getattr(o, f) for o in outcomes):.1%}")
    return "| " + " | ".join(cells + losses) + " |"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")], default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=1500, help="step limit per run")
    ap.add_argument("--only", type=lambda s: s.split(","), default=list(EXPERIMENTS),
                    help=f"comma-separated experiments out of {', '.join(EXPERIMENTS)}")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    unknown = set(args.only) - set(EXPERIMENTS)
    if unknown:
        ap.error(f"unknown experiments: {', '.join(sorted(unknown))}")
    torch.set_num_threads(args.threads)
    print(f"machine: {machine()}; seeds {args.seeds}; at most {args.steps} steps")
    print("| experiment | s to 99 % | steps to 99 % | best seq acc | final seq acc | final token acc | "
          + " | ".join(f"train loss @{s}" for s in LOSS_AT) + " |")
    print("|---" * (6 + len(LOSS_AT)) + "|")
    for name in args.only:
        outcomes = [one_run(EXPERIMENTS[name], seed, args.steps) for seed in args.seeds]
        print(report(name, outcomes), flush=True)


if __name__ == "__main__":
    main()
