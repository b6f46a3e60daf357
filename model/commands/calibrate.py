"""Fit when the app should say "do not trust this translation", on val sets, and store it.

Decodes each val sentence as the app does by default (beam 4, the checkpoint's alpha), reads
model/inference/confidence.py's three numbers for it (mean and lowest token log-probability, share of
source words unseen in training), labels it wrong when its sentence chrF against all references
of the sentence is below 60 (`WRONG_CHRF`), fits a logistic regression P(wrong | numbers) and picks the
threshold: the highest that flags at least --flag-share of the wrong val translations (default 0.8: a
warning that warns; `--flag-share 0`: the threshold that best separates wrong from right, the largest
difference of the two rates). Prints, for each val set, how many translations are wrong, what share of
wrong and right ones gets flagged, and what share of the unflagged ("Confident") ones is wrong. With
--write it stores the fit in config.json ("confidence") and the training sources' words in
familiar_words.txt.

  python -m model.calibrate --checkpoint checkpoints/multi30k-en-de \\
      --train ../shared/data/multi30k:train --train ../shared/data/tatoeba-en-de:train \\
      --val ../shared/data/multi30k:val --val ../shared/data/tatoeba-en-de:val --write

Fit on val splits only, never on a test split.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import sacrebleu
import torch
from tqdm import tqdm

from model.commands import registry as command
from model.commands.shared import add_checkpoint_arg, fail, load_or_exit
from model.inference.confidence import FAMILIAR_WORDS, FEATURES, WRONG_CHRF, Calibration, familiar_words_text, features
from model.inference.lexicon import LEXICON_FILE, Lexicon
from model.inference.options import DecodeOptions
from model.inference.pipeline import InputError, decode_many, explain_decoded, source_ids
from model.network.trace import Recording
from model.storage.checkpoint import Checkpoint, write_config_entry
from model.training.data import DataError, group_references, read_parallel


@dataclass(frozen=True)
class Judged:
    """One val sentence: its confidence numbers and whether its translation counts as wrong."""
    set_name: str
    x: tuple[float, ...]            # FEATURES
    wrong: bool


def read_tsv(path: str | Path) -> list[dict[str, str]]:
    """A TSV with a header line, as dicts; exits naming the file when it lacks `source` or `reference`."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"{path}: cannot be read ({exc})")
    head = lines[0].split("\t") if lines else []
    if not {"source", "reference"} <= set(head):
        fail(f"{path}: needs a header line with `source` and `reference` columns, has {head}")
    return [dict(zip(head, line.split("\t"))) for line in lines[1:] if line.strip()]


def split_spec(text: str) -> tuple[str, str]:
    """DIR:SPLIT, as --train and --val take it."""
    directory, _, split = text.rpartition(":")
    if not directory or not split:
        raise argparse.ArgumentTypeError(f"expected DIR:SPLIT (e.g. ../shared/data/multi30k:val), got {text!r}")
    return directory, split


def _read(ckpt: Checkpoint, spec: tuple[str, str]) -> tuple[list[str], list[str]]:
    try:
        return read_parallel(spec[0], spec[1], ckpt.src_lang, ckpt.tgt_lang)
    except DataError as exc:
        fail(str(exc))


def judge(ckpt: Checkpoint, name: str, sources: list[str], refs: list[list[str]], opts: DecodeOptions,
          familiar: frozenset[str] | None, batch_size: int = 64, lexicon: Lexicon | None = None,
          by_hand: dict[tuple[str, str], bool] | None = None) -> list[Judged]:
    """Decode every source, score it against its references, read its confidence numbers. by_hand:
    (source, output) -> right, a person's judgment, which replaces the chrF rule where it has the pair."""
    usable = []
    for text, r in zip(sources, refs):
        try:
            usable.append((text, source_ids(ckpt, text), r))
        except InputError:
            continue
    out: list[Judged] = []
    with tqdm(total=len(usable), file=sys.stderr, desc=name, unit="sent") as bar:
        for start in range(0, len(usable), batch_size):
            chunk = usable[start:start + batch_size]
            for (text, ids, r), result in zip(chunk, decode_many(ckpt, [c[1] for c in chunk], opts)):
                ex = explain_decoded(ckpt, text, ids, result, recording=Recording())   # the app's numbers
                hyp = ex.output
                right = (by_hand or {}).get((text, hyp))
                wrong = sacrebleu.sentence_chrf(hyp, r).score < WRONG_CHRF if right is None else not right
                check = lexicon.check(text, hyp) if lexicon is not None else ([], [])
                x = features(ex.output_probs, text, familiar, check, ex.source_coverage(ckpt))
                out.append(Judged(name, x, wrong))
            bar.update(len(chunk))
    return out


def fit(judged: list[Judged], l2: float = 1e-3, flag_share: float = 0.8) -> Calibration:
    """Logistic regression on standardised numbers, then the threshold on the same sentences: the
    highest that flags at least flag_share of the wrong ones (0: the best separating threshold)."""
    x = torch.tensor([j.x for j in judged], dtype=torch.float64)                      # (N, F)
    y = torch.tensor([float(j.wrong) for j in judged], dtype=torch.float64)           # (N,)
    mean, std = x.mean(0), x.std(0).clamp_min(1e-6)
    z = (x - mean) / std
    w = torch.zeros(z.shape[1] + 1, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w], max_iter=200, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(z @ w[1:] + w[0], y) + l2 * w[1:].square().sum()
        loss.backward()
        return loss

    opt.step(closure)
    cal = Calibration(tuple(w[1:].tolist()), float(w[0].detach()), tuple(mean.tolist()), tuple(std.tolist()), 0.5,
                      names=FEATURES[:x.shape[1]])
    p, wrong = [cal.p_wrong(j.x) for j in judged], [j.wrong for j in judged]
    threshold = share_threshold(p, wrong, flag_share) if flag_share > 0 else best_threshold(p, wrong)
    return replace(cal, threshold=math.floor(threshold * 1e4) / 1e4)      # rounded down: the share still holds


def share_threshold(p_wrong: list[float], wrong: list[bool], share: float) -> float:
    """The highest threshold t (flag when p >= t) that flags at least `share` of the wrong ones."""
    scores = sorted((p for p, w in zip(p_wrong, wrong) if w), reverse=True)
    if not scores:
        return 1.0
    return scores[max(math.ceil(share * len(scores)) - 1, 0)]


def best_threshold(p_wrong: list[float], wrong: list[bool]) -> float:
    """The threshold t (flag when p >= t) with the largest share of wrong flagged minus share of right
    flagged; on a tie the highest t (fewer flags)."""
    order = sorted(range(len(p_wrong)), key=lambda i: -p_wrong[i])
    n_wrong, n_right = max(sum(wrong), 1), max(len(wrong) - sum(wrong), 1)
    best, best_gain, flagged_wrong, flagged_right = 1.0, 0.0, 0, 0
    for k, i in enumerate(order):
        flagged_wrong += wrong[i]
        flagged_right += not wrong[i]
        if k + 1 < len(order) and p_wrong[order[k + 1]] == p_wrong[i]:
            continue                                   # equal scores are flagged together
        gain = flagged_wrong / n_wrong - flagged_right / n_right
        if gain > best_gain:
            best, best_gain = p_wrong[i], gain
    return best


def _rates(judged: list[Judged], p: list[float], threshold: float) -> tuple[float, float, float]:
    """(share of wrong translations flagged, share of right ones flagged, share of the unflagged ones that
    are wrong) at threshold."""
    wrong = [pi >= threshold for pi, j in zip(p, judged) if j.wrong]
    right = [pi >= threshold for pi, j in zip(p, judged) if not j.wrong]
    unflagged = [j.wrong for pi, j in zip(p, judged) if pi < threshold]
    return (sum(wrong) / len(wrong) if wrong else 0.0), (sum(right) / len(right) if right else 0.0), \
        (sum(unflagged) / len(unflagged) if unflagged else 0.0)


def report(judged: list[Judged], cal: Calibration) -> dict[str, dict[str, float]]:
    """Per val set (and all together): sentences, wrong ones, and the flagged shares."""
    table = {}
    for name in [*dict.fromkeys(j.set_name for j in judged), "all"]:
        part = [j for j in judged if name in ("all", j.set_name)]
        flagged_wrong, flagged_right, confident_wrong = _rates(part, [cal.p_wrong(j.x) for j in part], cal.threshold)
        table[name] = {"sentences": len(part), "wrong": sum(j.wrong for j in part),
                       "wrong_flagged": round(flagged_wrong, 3), "right_flagged": round(flagged_right, 3),
                       "confident_wrong": round(confident_wrong, 3)}
    return table


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=command.prog("model.calibrate"), description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_checkpoint_arg(p)
    p.add_argument("--train", type=split_spec, action="append", default=[], metavar="DIR:SPLIT",
                   help="the model's training data (repeat for each corpus): its source words are 'familiar'")
    p.add_argument("--val", type=split_spec, action="append", default=[], metavar="DIR:SPLIT",
                   help="val data to fit on (repeat for each corpus; never a test split)")
    p.add_argument("--dev", action="append", default=[], metavar="TSV",
                   help="also fit on a set like what a teacher types: a TSV with `source` and `reference` columns "
                        "(data/dev/teacher.en-de.tsv); with `output` and `right` (yes/no) columns too, a person's "
                        "judgment of that output replaces the chrF rule whenever the model still writes it")
    p.add_argument("--lexicon", metavar="TSV",
                   help="a bilingual lexicon (English TAB German, Ding's: ../shared/data/everyday-extra/"
                        "lexicon.en-de.tsv.gz) for the missing-word signal; with --write the checkpoint keeps its "
                        f"source words' entries as {LEXICON_FILE}. Default: the checkpoint's own, if it has one")
    p.add_argument("--beam-size", type=int, default=4, help="beam width to decode with (default 4, as the app)")
    p.add_argument("--flag-share", type=float, default=0.8, metavar="S",
                   help="flag at least this share of the wrong val translations (default 0.8; 0: the threshold "
                        "that best separates wrong from right)")
    p.add_argument("--limit", type=int, help="only the first N lines of each val split")
    p.add_argument("--json", help="also write the fit and the per-set shares to this JSON file")
    p.add_argument("--write", action="store_true", help="store the fit and the familiar words in the checkpoint")
    args = p.parse_args(argv)
    if not args.val and not args.dev:
        fail("give at least one --val DIR:SPLIT or --dev TSV to fit on")
    if any(split.startswith("test") for _, split in args.val):
        fail("fit on val splits, never on a test split")
    if not 0 <= args.flag_share <= 1:
        fail(f"--flag-share is a share of the wrong translations, 0 to 1, not {args.flag_share}")
    ckpt = load_or_exit(args)
    words_text = familiar_words_text([s for spec in args.train for s in _read(ckpt, spec)[0]]) if args.train else None
    familiar = frozenset(words_text.split()) if words_text else None
    opts = DecodeOptions("beam", beam_size=args.beam_size, alpha=ckpt.beam_alpha)
    lexicon = Lexicon.load(args.lexicon, ckpt.src_lang, ckpt.tgt_lang) if args.lexicon else ckpt.lexicon
    judged: list[Judged] = []
    for spec in args.val:
        sources, refs = _read(ckpt, spec)
        grouped = group_references(sources[: args.limit], refs[: args.limit])
        judged += judge(ckpt, f"{Path(spec[0]).name}:{spec[1]}", *grouped, opts, familiar, lexicon=lexicon)
    for path in args.dev:
        rows = read_tsv(path)
        by_hand = {(r["source"], r["output"]): r["right"] == "yes" for r in rows if r.get("right") in ("yes", "no")}
        judged += judge(ckpt, Path(path).name, [r["source"] for r in rows][: args.limit],
                        [[r["reference"]] for r in rows][: args.limit], opts, familiar, lexicon=lexicon,
                        by_hand=by_hand)
        print(f"{Path(path).name}: {sum((j.set_name == Path(path).name) for j in judged)} sentences, "
              f"{len(by_hand)} judged by hand", file=sys.stderr)
    if not any(j.wrong for j in judged) or all(j.wrong for j in judged):
        fail("the val sentences are all right or all wrong: nothing to fit")
    cal = fit(judged, flag_share=args.flag_share)
    table = report(judged, cal)
    rule = (f"the threshold flags {args.flag_share:.0%} of the wrong" if args.flag_share > 0 else
            "the threshold separates wrong from right best")
    sets = [f"{d}:{s}" for d, s in args.val] + [Path(p).name for p in args.dev]
    note = (f"fitted on {', '.join(sets)} (beam {args.beam_size}); wrong = a person's judgment where there is "
            f"one, else sentence chrF < {WRONG_CHRF:g} against all references; {rule}")
    cal = replace(cal, note=note)
    for name, row in table.items():
        print(f"{name}: {row['sentences']} sentences, {row['wrong']} wrong; flagged: "
              f"{row['wrong_flagged']:.0%} of the wrong, {row['right_flagged']:.0%} of the right; "
              f"{row['confident_wrong']:.0%} of the unflagged are wrong")
    entry = {**cal.to_dict(), "val": table, "familiar_words_from": [f"{d}:{s}" for d, s in args.train]}
    if args.json:
        Path(args.json).write_text(json.dumps(entry, indent=2) + "\n")
    if args.write:
        write_config_entry(args.checkpoint, "confidence", entry)
        if words_text:
            (Path(args.checkpoint) / FAMILIAR_WORDS).write_text(words_text, encoding="utf-8")
        if args.lexicon and lexicon is not None:
            train_sources = [s for spec in args.train for s in _read(ckpt, spec)[0]]
            lexicon.with_common(train_sources).save(Path(args.checkpoint) / LEXICON_FILE)
        print(f"stored in {args.checkpoint}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
