"""python -m model.heads: every head's statistics over a set of sentences, written as JSON.

    python -m model.heads --checkpoint checkpoints/multi30k-en-de
    python -m model.heads --checkpoint DIR --input sentences.txt --out stats.json --knockout-sentences 50
"""
from __future__ import annotations

import argparse
import sys

from tqdm import tqdm

from model.analysis.heads import (
    AGREEMENT_SENTENCES,
    DEFAULT_DATA,
    DEFAULT_SPLIT,
    KNOCKOUT_SENTENCES,
    HeadStatistics,
    StatisticsError,
    compute,
    read_set,
)
from model.analysis.heads.store import default_path, save, to_json
from model.commands import registry as command
from model.commands import shared as cli


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog=command.prog("model.heads"),
        description="Run a checkpoint over a set of sentences and measure every attention head of the three kinds "
                    "(encoder self-, decoder self- and cross-attention): entropy, offset profile, share on the "
                    "monotonic diagonal, on the end-of-sentence token and on punctuation, attention distance, "
                    "concentration, a role, the cost of switching it off, its agreement with ALTI+ and a map of "
                    "its queries and keys. Written as JSON (docs/head-statistics.md); the app's page "
                    "\"Heads across the corpus\" reads it.")
    cli.add_checkpoint_arg(p)
    p.add_argument("--input", metavar="FILE",
                   help=f"sentences in the checkpoint's source language, one per line (default: {DEFAULT_SPLIT}'s "
                        "sources from --data); blank lines and sentences over the token limit are skipped and counted")
    p.add_argument("--data", default=DEFAULT_DATA,
                   help=f"Multi30K directory for the default set (default {DEFAULT_DATA})")
    p.add_argument("--limit", type=int, help="only the first N usable sentences")
    p.add_argument("--out", help="JSON file to write ('-': standard output; default: head_statistics.json in the "
                                 "checkpoint directory, where the app finds it)")
    p.add_argument("--knockout-sentences", type=int, default=KNOCKOUT_SENTENCES, metavar="N",
                   help=f"switch every head off on the first N sentences (default {KNOCKOUT_SENTENCES}; each costs "
                        "one pass per head; 0: none)")
    p.add_argument("--agreement-sentences", type=int, default=AGREEMENT_SENTENCES, metavar="N",
                   help=f"compare cross-attention heads with ALTI+ on the first N sentences (default "
                        f"{AGREEMENT_SENTENCES}; 0: none)")
    cli.add_decode_args(p)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    ckpt = cli.load_or_exit(args)
    try:
        sentences = read_set(ckpt, args.input, args.data).first(args.limit)
    except StatisticsError as exc:
        cli.fail(str(exc))
    if sentences.skipped:
        print(f"skipped {len(sentences.skipped)} of {len(sentences.skipped) + len(sentences.texts)} lines: "
              f"{sentences.skipped_summary()} (first: line {sentences.skipped[0][0]})", file=sys.stderr)
    bars: dict[str, tqdm] = {}

    def progress(stage: str, done: int, total: int) -> None:
        if stage not in bars:                     # one bar per stage, the previous one closed
            for bar in bars.values():
                bar.close()
            bars[stage] = tqdm(total=total, desc=stage, unit="sentence")
        bars[stage].update(done - bars[stage].n)
    stats = compute(ckpt, sentences, cli.decode_options(args, ckpt), args.knockout_sentences,
                    args.agreement_sentences, on_progress=progress)
    for bar in bars.values():
        bar.close()
    out = args.out or str(default_path(args.checkpoint))
    if out == "-":
        cli.write_json("-", to_json(stats))
    else:
        try:
            save(stats, out)
        except OSError as exc:
            cli.fail(f"{out}: cannot be written ({exc})")
        print(f"wrote {out}", file=sys.stderr)
    print(summary(stats), file=sys.stderr)
    return 0


def summary(stats: HeadStatistics) -> str:
    seconds = sum(stats.seconds.values())
    lines = [f"{len(stats.sentences)} sentences in {seconds:.1f} s "
             f"({', '.join(f'{k} {v:.1f} s' for k, v in stats.seconds.items())}); knockout on the first "
             f"{stats.knockout_sentences}, ALTI+ agreement on the first {stats.agreement_sentences}"]
    for name, k in stats.kinds.items():
        counts: dict[str, int] = {}
        for row in k.roles:
            for r in row:
                counts[r] = counts.get(r, 0) + 1
        lines.append(f"  {name}: " + ", ".join(f"{n} {r}" for r, n in sorted(counts.items(), key=lambda x: -x[1])))
    lines += [f"  note: {n}" for n in stats.notes]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
