"""Parallel text: reading Multi30K-style directories and making token-bucketed batches."""
from __future__ import annotations

import gzip
import random
from pathlib import Path

from model.network.batch import Example, collate  # noqa: F401  (a batch is the network's input)

SPLITS = ("train", "val", "test_2016_flickr")


class DataError(Exception):
    """A data problem, described in one line naming the file."""


def split_file(data_dir: str | Path, split: str, lang: str) -> Path:
    """`{split}.{lang}` or `{split}.{lang}.gz` inside data_dir."""
    base = Path(data_dir) / f"{split}.{lang}"
    for candidate in (base, base.with_name(base.name + ".gz")):
        if candidate.is_file():
            return candidate
    raise DataError(f"{base}[.gz]: not found (expected files named {{split}}.{{lang}}, e.g. train.{lang}.gz)")


def read_lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            return [line.rstrip("\n").strip() for line in f]
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise DataError(f"{path}: cannot be read ({exc})") from None


def read_parallel(data_dir: str | Path, split: str, src: str, tgt: str) -> tuple[list[str], list[str]]:
    src_path, tgt_path = split_file(data_dir, split, src), split_file(data_dir, split, tgt)
    src_lines, tgt_lines = read_lines(src_path), read_lines(tgt_path)
    if len(src_lines) != len(tgt_lines):
        raise DataError(f"{src_path} has {len(src_lines)} lines but {tgt_path} has {len(tgt_lines)}: "
                        "line N of one must translate line N of the other")
    return src_lines, tgt_lines


def group_references(sources: list[str], targets: list[str]) -> tuple[list[str], list[list[str]]]:
    """Each distinct source once (in first-seen order) with every target it has in the split.

    Tatoeba lists one English sentence with several German translations, one pair per line:
    grouped, a test translates each sentence once and scores it against all of them.
    """
    groups: dict[str, list[str]] = {}
    for s, t in zip(sources, targets):
        refs = groups.setdefault(s, [])
        if t not in refs:
            refs.append(t)
    return list(groups), list(groups.values())


def make_examples(src_ids: list[list[int]], tgt_ids: list[list[int]], bos: int, eos: int,
                  max_len: int) -> list[Example]:
    """Pairs with both sides non-empty, truncated to max_len positions."""
    out = []
    for s, t in zip(src_ids, tgt_ids):
        if s and t:
            out.append(Example(s[: max_len - 1] + [eos], [bos] + t[: max_len - 2] + [eos]))
    return out


def token_batches(examples: list[Example], batch_tokens: int, seed: int) -> list[list[int]]:
    """Indices grouped so that (longest side) x (sentences) <= batch_tokens per batch.

    Examples are sorted by length (with a seeded random tie-break), cut into batches,
    and the batch order is shuffled with the same seed: the result is a pure function
    of (examples, batch_tokens, seed), which makes resuming exact.
    """
    rng = random.Random(seed)
    order = sorted(range(len(examples)),
                   key=lambda i: (len(examples[i].tgt), len(examples[i].src), rng.random()))
    batches, current, longest = [], [], 0
    for i in order:
        size = max(len(examples[i].src), len(examples[i].tgt))
        if current and max(longest, size) * (len(current) + 1) > batch_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, size)
    if current:
        batches.append(current)
    rng.shuffle(batches)
    return batches
