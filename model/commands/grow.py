"""A deeper model from a trained checkpoint, to train on with `train.py --init-from` (model/training/grow.py
says how the new layers start). The trained layers keep their weights; the new ones start close to the
identity, so the grown model translates nearly as the trained one did, and training goes on from there
instead of from scratch.

  python -m model.grow --checkpoint checkpoints/multi30k-en-de --encoder-layers 6 --decoder-layers 4 \\
      --out runs/grown-en-de
  python train.py --init-from runs/grown-en-de --data DIR --src en --tgt de --epochs N --out runs/deep-en-de
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from model.commands import registry as command
from model.commands.shared import add_checkpoint_arg, fail, load_or_exit
from model.storage.checkpoint import save_checkpoint
from model.training.grow import grow

KEPT_FILES = ("training_log.jsonl",)          # the run so far: train.py --init-from continues its counts


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog=command.prog("model.grow"), description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_checkpoint_arg(p)
    p.add_argument("--encoder-layers", type=int, required=True, help="encoder layers of the grown model")
    p.add_argument("--decoder-layers", type=int, required=True, help="decoder layers of the grown model")
    p.add_argument("--out", required=True, help="directory for the grown checkpoint (must not exist)")
    args = p.parse_args(argv)
    out = Path(args.out)
    if out.exists():
        fail(f"{out} exists; choose a new directory")
    ckpt = load_or_exit(args)
    cfg = ckpt.model.cfg
    try:
        grown = grow(ckpt.model, args.encoder_layers, args.decoder_layers)
    except ValueError as exc:
        fail(str(exc))
    note = (f"grown from {args.checkpoint} ({cfg.n_encoder_layers}+{cfg.n_decoder_layers} layers -> "
            f"{args.encoder_layers}+{args.decoder_layers}, model.grow)")
    keep = {k: v for k, v in ckpt.meta.items() if k not in ("model", "tokenizer", "weights_dtype", "format",
                                                           "confidence", "faithfulness", "hand_check")}
    meta = {**keep, "parameters": grown.num_parameters(), "grown_from": note}
    extra = {name: (Path(args.checkpoint) / name).read_text() for name in KEPT_FILES
             if (Path(args.checkpoint) / name).is_file()}
    save_checkpoint(out, grown.eval(), ckpt.src_tokenizer, ckpt.tgt_tokenizer, meta=meta, extra_files=extra)
    print(f"{note}: {ckpt.model.num_parameters() / 1e6:.2f} M -> {grown.num_parameters() / 1e6:.2f} M "
          f"parameters, wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
