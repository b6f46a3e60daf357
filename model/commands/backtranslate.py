"""Translate a monolingual corpus of everyday-extra in shards that resume (issue 81): the English dialogue
sentences into German (sources for de->en), the German Common Voice sentences into English (sources for
en->de). Each finished shard of SHARD_SIZE sentences is one gzipped `source TAB translation` file; a run
skips the shards already there, so a stopped run loses at most the shard it was in, and nothing is
translated twice. Commit the shards (data/generated/).

  python -m model.backtranslate --corpus cv-de --checkpoint checkpoints/multi30k-de-en \\
      --out data/generated/cv-de.de-en
  python -m model.backtranslate --corpus sgd --checkpoint checkpoints/multi30k-en-de \\
      --out data/generated/sgd.en-de --time-budget 40 --threads 1
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from model.commands import registry as command
from model.commands.shared import add_checkpoint_arg, fail, load_or_exit
from model.inference.bulk import translate_corpus
from model.inference.options import DecodeOptions
from model.training.everyday import MONO, SHARD_SIZE, mono_sentences, shard_path, shards, write_shard


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=command.prog("model.backtranslate"), description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_checkpoint_arg(p)
    p.add_argument("--corpus", required=True, choices=sorted(MONO), help="which monolingual corpus")
    p.add_argument("--shared", default="../shared/data/everyday-extra", help="the everyday-extra directory")
    p.add_argument("--out", required=True, help="folder of the shards (created)")
    p.add_argument("--beam", type=int, default=4, help="beam size (default 4; 1: greedy)")
    p.add_argument("--alpha", type=float, default=1.0, help="GNMT length penalty (default 1.0)")
    p.add_argument("--batch-tokens", type=int, default=4000, help="source tokens x beam per batch")
    p.add_argument("--time-budget", type=float, metavar="MIN", help="start no new shard after MIN minutes")
    p.add_argument("--shards", type=int, help="translate at most this many new shards")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    ckpt = load_or_exit(a)
    lang = MONO[a.corpus][1]
    if ckpt.meta.get("src_lang") not in (None, lang):
        fail(f"--checkpoint translates from {ckpt.meta.get('src_lang')!r}, but --corpus {a.corpus} is {lang!r}")
    shared = Path(a.shared)
    if not shared.is_dir():
        fail(f"{shared}: not found (the everyday-extra data directory)")
    ckpt.model.eval()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    parts = shards(mono_sentences(shared, a.corpus), SHARD_SIZE)
    opts = DecodeOptions("beam", beam_size=a.beam, alpha=a.alpha)
    t0, made = time.time(), 0
    for i, part in enumerate(parts):
        path = shard_path(out, i)
        if path.exists():
            continue
        if (a.time_budget and time.time() - t0 > a.time_budget * 60) or (a.shards and made >= a.shards):
            break
        start = time.time()
        with torch.inference_mode():
            outputs = translate_corpus(ckpt, part, opts, batch_tokens=a.batch_tokens)
        write_shard(path, part, outputs)
        made += 1
        print(f"{time.strftime('%H:%M:%S')} {path}: {len(part)} sentences in {time.time() - start:.0f} s",
              file=sys.stderr, flush=True)
    done = sum(shard_path(out, i).exists() for i in range(len(parts)))
    print(f"{done} of {len(parts)} shards in {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
