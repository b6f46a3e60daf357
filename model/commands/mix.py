"""Write the training mix of issue 81 for one direction: a corpus directory that train.py reads
({train,val}.{src,tgt}.gz and train.tag.gz, the kind of each pair; model/training/everyday.py).

  python -m model.mix --src en --tgt de --out runs/mix81-en-de
  python train.py --data runs/mix81-en-de --init-from checkpoints/multi30k-en-de --subword-alpha 0.1 ...

What goes in, for src -> tgt:
  - everyday-extra's 47,583 pairs, all (never in a shipped model before);
  - Tatoeba's train: every pair of 8 or more English words, and --tatoeba-short others (what the shipped
    model learnt, so that it is not forgotten);
  - --multi30k pairs of Multi30K's train (the same);
  - the Ding lexicon as --lexicon short pairs, kind "lexicon" (the most common English words first);
  - the generated shards (data/generated/, python -m model.backtranslate) whose *target* side is real
    text in tgt: their model-written side becomes the source, kind "back";
  - val: Multi30K val + Tatoeba val + val-long.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path

from model.commands import registry as command
from model.commands.shared import fail
from model.training.data import DataError, read_parallel
from model.training.everyday import (
    lexicon_pairs,
    read_gz,
    read_shards,
    usable_translation,
    write_corpus,
)

# generated shard folders by the language of their real (source) side: "<corpus>.<from>-<to>"
GENERATED = {"de": "cv-de.de-en", "en": "sgd.en-de"}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=command.prog("model.mix"), description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--src", required=True, choices=("en", "de"))
    p.add_argument("--tgt", required=True, choices=("en", "de"))
    p.add_argument("--shared", default="../shared/data", help="the shared data directory")
    p.add_argument("--generated", default="data/generated", help="the back-translation shards")
    p.add_argument("--out", required=True, help="the corpus directory to write")
    p.add_argument("--tatoeba-short", type=int, default=30_000, help="Tatoeba pairs of under 8 English words")
    p.add_argument("--multi30k", type=int, default=8_000, help="Multi30K training pairs")
    p.add_argument("--lexicon", type=int, default=100_000,
                   help="lexicon pairs (train.py puts at most --lexicon-share of a batch: a draw each epoch)")
    p.add_argument("--seed", type=int, default=81)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if a.src == a.tgt:
        fail("--src and --tgt must differ")
    shared, rng = Path(a.shared), random.Random(a.seed)
    try:
        counts: dict[str, int] = {}
        rows: list[tuple[str, str, str]] = []

        def add(name: str, en: list[str], de: list[str], kind: str = "sentence") -> None:
            pairs = [(e, d) if a.src == "en" else (d, e) for e, d in zip(en, de)]
            rows.extend((s, t, kind) for s, t in pairs)
            counts[name] = len(pairs)

        add("everyday-extra", *read_parallel(shared / "everyday-extra", "train", "en", "de"))
        en, de = read_parallel(shared / "tatoeba-en-de", "train", "en", "de")
        long = [i for i, e in enumerate(en) if len(e.split()) >= 8]
        short = [i for i, e in enumerate(en) if len(e.split()) < 8]
        picked = long + rng.sample(short, min(a.tatoeba_short, len(short)))
        add("tatoeba", [en[i] for i in picked], [de[i] for i in picked])
        en, de = read_parallel(shared / "multi30k", "train", "en", "de")
        picked = rng.sample(range(len(en)), min(a.multi30k, len(en)))
        add("multi30k", [en[i] for i in picked], [de[i] for i in picked])
        def text(lang: str) -> Iterator[str]:
            for name in ("tatoeba-en-de/train", "everyday-extra/train", "everyday-extra/mono/commonvoice"):
                yield from read_gz(shared / f"{name}.{lang}.gz")
            if lang == "en":
                yield from read_gz(shared / "everyday-extra/mono/sgd-dialogues.en.gz")

        entries = lexicon_pairs(read_gz(shared / "everyday-extra/lexicon.en-de.tsv.gz"), text("en"), text("de"),
                                limit=a.lexicon)
        add("lexicon", [e for e, _ in entries], [d for _, d in entries], "lexicon")
        folder = Path(a.generated) / GENERATED[a.tgt]
        made = [(src, out) for src, out in read_shards(folder) if usable_translation(src, out)]
        real, written = [s for s, _ in made], [o for _, o in made]
        # the real side is tgt; the model-written one becomes the source
        add("back-translated", *((real, written) if a.tgt == "en" else (written, real)), "back")
        val = [read_parallel(shared / d, s, "en", "de") for d, s in (("multi30k", "val"), ("tatoeba-en-de", "val"),
                                                                     ("tatoeba-en-de", "val-long"))]
    except (DataError, OSError) as exc:
        fail(str(exc))
    rng.shuffle(rows)
    out = Path(a.out)
    write_corpus(out, "train", rows, a.src, a.tgt)
    val_rows = [((e, d) if a.src == "en" else (d, e)) + ("sentence",) for en, de in val for e, d in zip(en, de)]
    write_corpus(out, "val", val_rows, a.src, a.tgt)
    (out / "MIX.json").write_text(json.dumps({"pairs": counts, "val": len(val_rows), "args": vars(a)}, indent=1))
    print(json.dumps(counts), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
