"""Does the confidence flag catch the translations a reader calls wrong? Judged by hand.

Step 1 writes a sample of test sentences with the model's translation, the references and the
app's verdict (flagged or not) to a TSV whose `judgment` column is empty:

  .venv/bin/python -m benchmarks.confidence_sample sample --checkpoint checkpoints/multi30k-en-de \\
      --data ../shared/data/tatoeba-en-de:test --data ../shared/data/multi30k:test_2016_flickr \\
      --per-set 30 --out benchmarks/judged/en-de.tsv

A person then reads each row and writes `right` or `wrong` in `judgment` (meaning preserved and
grammatical enough that a reader would accept it: `right`; otherwise `wrong`), without looking at
the verdict column first. Step 2 counts:

  .venv/bin/python -m benchmarks.confidence_sample count benchmarks/judged/en-de.tsv

printing how many of the wrong ones were flagged, how many of the right ones were, and what share of the
unflagged ("Confident") ones is wrong. A table judged before (issue 52's trust tables: `source`, `output`,
`right` yes/no) is scored again with a checkpoint's current calibration, its outputs checked to be the
ones judged, its `p_wrong` and `flagged` columns written anew (added where missing):

  .venv/bin/python -m benchmarks.confidence_sample rescore --checkpoint checkpoints/multi30k-en-de \\
      benchmarks/judged/trust-en-de-shipped.tsv benchmarks/judged/everyday-en-de-deep.tsv

A new model's table starts from the judged ones: each source of the first table translated by the new
checkpoint as the app decodes; where the output is one a person judged before for that source (in any of
the tables given), the judgment and its note are carried over (`carried` yes), otherwise `right` is left
empty for a person to fill in. It prints what is left to judge, and how the carried ones stand:

  .venv/bin/python -m benchmarks.confidence_sample carry --checkpoint runs/x52/extra-en-de \\
      --out benchmarks/judged/trust-en-de-extra.tsv benchmarks/judged/trust-en-de-shipped.tsv
"""
from __future__ import annotations

import argparse
import csv
import random
import sys
from pathlib import Path

from model.commands.calibrate import split_spec
from model.inference.options import DecodeOptions
from model.inference.pipeline import explain
from model.storage.checkpoint import load_checkpoint
from model.training.data import group_references, read_parallel

COLUMNS = ("set", "source", "translation", "references", "p_wrong", "flagged", "judgment")


def sample(args: argparse.Namespace) -> int:
    ckpt = load_checkpoint(args.checkpoint)
    opts = DecodeOptions("beam", beam_size=4, alpha=ckpt.beam_alpha, record_steps=False)
    rows = []
    for directory, split in args.data:
        sources, refs = group_references(*read_parallel(directory, split, ckpt.src_lang, ckpt.tgt_lang))
        picked = random.Random(args.seed).sample(range(len(sources)), args.per_set)
        for i in picked:
            ex = explain(ckpt, sources[i], opts)
            conf = ex.confidence(ckpt)
            rows.append({"set": f"{Path(directory).name}:{split}", "source": sources[i], "translation": ex.output,
                         "references": " | ".join(refs[i]), "p_wrong": f"{conf.p_wrong:.3f}",
                         "flagged": "yes" if conf.flagged else "no", "judgment": ""})
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, COLUMNS, delimiter="\t")
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {len(rows)} rows to {args.out}; fill in the judgment column", file=sys.stderr)
    return 0


def read_table(path: str) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, encoding="utf-8") as f:
        reader = csv.DictReader(f, delimiter="\t")
        return list(reader.fieldnames or []), list(reader)


def write_table(path: str, columns: list[str], rows: list[dict[str, str]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, columns, delimiter="\t", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def verdict(row: dict[str, str]) -> str:
    """right, wrong or "" (not judged yet), from a `judgment` column or a trust table's `right` yes/no."""
    if "judgment" in row:
        return row["judgment"]
    return {"yes": "right", "no": "wrong"}.get(row.get("right", ""), "")


def counts(name: str, rows: list[dict[str, str]]) -> str:
    wrong = [r for r in rows if verdict(r) == "wrong"]
    right = [r for r in rows if verdict(r) == "right"]
    flagged_wrong = sum(r["flagged"] == "yes" for r in wrong)
    flagged_right = sum(r["flagged"] == "yes" for r in right)
    confident = len(wrong) + len(right) - flagged_wrong - flagged_right
    share = f" ({(len(wrong) - flagged_wrong) / confident:.0%})" if confident else ""
    return (f"{name}: {len(rows)} judged, {len(wrong)} wrong, {len(right)} right; flagged {flagged_wrong} of "
            f"{len(wrong)} wrong, {flagged_right} of {len(right)} right; of {confident} not flagged, "
            f"{len(wrong) - flagged_wrong} wrong{share}")


def count(args: argparse.Namespace) -> int:
    _, rows = read_table(args.tsv)
    for name in [*(n for n in dict.fromkeys(r.get("set", "") for r in rows) if n), "all"]:
        print(counts(name, [r for r in rows if name in ("all", r.get("set", ""))]))
    return 0


def rescore(args: argparse.Namespace) -> int:
    ckpt = load_checkpoint(args.checkpoint)
    if ckpt.calibration is None:
        print(f"{args.checkpoint} has no calibration: run python -m model.calibrate first", file=sys.stderr)
        return 2
    opts = DecodeOptions("beam", beam_size=4, alpha=ckpt.beam_alpha, record_steps=False)
    together = []
    for path in args.tsv:
        columns, rows = read_table(path)
        key = "output" if "output" in columns else "translation"
        for row in rows:
            ex = explain(ckpt, row["source"], opts)
            if ex.output != row[key]:
                print(f"{path}: {row['source']!r} now translates as {ex.output!r}, not the judged "
                      f"{row[key]!r}: judge this model's outputs in a table of its own", file=sys.stderr)
                return 1
            conf = ex.confidence(ckpt)
            row["p_wrong"], row["flagged"] = f"{conf.p_wrong:.3f}", "yes" if conf.flagged else "no"
        at = columns.index(key) + 1
        columns = columns[:at] + [c for c in ("p_wrong", "flagged") if c not in columns] + columns[at:]
        write_table(path, columns, rows)
        print(counts(Path(path).name, rows))
        together += rows
    print(counts("all", together))
    return 0


def judged_outputs(tables: list[list[dict[str, str]]]) -> dict[tuple[str, str], dict[str, str]]:
    """(source, output) -> its row, for every judged row of the tables (a later table's judgment wins)."""
    known = {}
    for rows in tables:
        for row in rows:
            output = row.get("output", row.get("translation", ""))
            if verdict(row):
                known[row["source"], output] = row
    return known


def carry_row(source: str, output: str, known: dict[tuple[str, str], dict[str, str]]) -> dict[str, str]:
    """A trust table's row for `output`: the judgment and note of the same output judged before, else empty."""
    before = known.get((source, output), {})
    return {"source": source, "output": output, "p_wrong": "", "flagged": "",
            "right": {"right": "yes", "wrong": "no"}.get(verdict(before), ""), "note": before.get("note", ""),
            "carried": "yes" if before else "no"}


def carry(args: argparse.Namespace) -> int:
    ckpt = load_checkpoint(args.checkpoint)
    opts = DecodeOptions("beam", beam_size=4, alpha=ckpt.beam_alpha, record_steps=False)
    tables = [read_table(path)[1] for path in args.tsv]
    known, rows = judged_outputs(tables), []
    for source in dict.fromkeys(row["source"] for row in tables[0]):
        ex = explain(ckpt, source, opts)
        row = carry_row(source, ex.output, known)
        if ckpt.calibration is not None:
            conf = ex.confidence(ckpt)
            row["p_wrong"], row["flagged"] = f"{conf.p_wrong:.3f}", "yes" if conf.flagged else "no"
        rows.append(row)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_table(args.out, list(rows[0]), rows)
    carried = [r for r in rows if r["carried"] == "yes"]
    print(f"{args.out}: {len(rows)} sources, {len(carried)} outputs judged before ("
          f"{sum(r['right'] == 'yes' for r in carried)} right), {len(rows) - len(carried)} new to judge:")
    for r in rows:
        if r["carried"] == "no":
            print(f"  {r['source']}\n    -> {r['output']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.confidence_sample", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample", help="write a sample to judge")
    s.add_argument("--checkpoint", required=True)
    s.add_argument("--data", type=split_spec, action="append", required=True, metavar="DIR:SPLIT")
    s.add_argument("--per-set", type=int, default=30)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", required=True)
    c = sub.add_parser("count", help="count flagged among the judged rows")
    c.add_argument("tsv")
    r = sub.add_parser("rescore", help="score judged tables again with a checkpoint's current calibration")
    r.add_argument("--checkpoint", required=True)
    r.add_argument("tsv", nargs="+")
    k = sub.add_parser("carry", help="a new model's table: judgments carried where its output was judged before")
    k.add_argument("--checkpoint", required=True)
    k.add_argument("--out", required=True)
    k.add_argument("tsv", nargs="+", help="judged tables of this direction (the first gives the sources)")
    args = p.parse_args(argv)
    return {"sample": sample, "count": count, "rescore": rescore, "carry": carry}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
