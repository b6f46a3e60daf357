"""Parallel text: reading Multi30K-style directories and making token-bucketed batches."""
from __future__ import annotations

import gzip
import random
from pathlib import Path

from model.network.batch import Example, collate  # noqa: F401  (a batch is the network's input)
from model.training.everyday import iter_kinds

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


def read_kinds(data_dir: str | Path, split: str, n: int) -> list[str]:
    """The kind of each pair of a split (model/training/everyday.py: sentence, lexicon, back), from
    `{split}.tag[.gz]`; without that file every pair is a sentence."""
    try:
        path = split_file(data_dir, split, "tag")
    except DataError:
        return ["sentence"] * n
    try:
        kinds = list(iter_kinds(read_lines(path), path))
    except ValueError as exc:
        raise DataError(str(exc)) from None
    if len(kinds) != n:
        raise DataError(f"{path} has {len(kinds)} lines but the split has {n} pairs: one kind per pair")
    return kinds


def tagged(src_ids: list[list[int]], kinds: list[str], bos: int, eos: int) -> list[list[int]]:
    """Each source with its kind's tag first: a lexicon entry starts with <s>, a back-translated source
    with </s> (model/training/everyday.py); a sentence as it is."""
    first = {"lexicon": [bos], "back": [eos]}
    return [first.get(k, []) + ids if ids else ids for ids, k in zip(src_ids, kinds)]


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


def mixed_batches(examples: list[Example], lexicon: set[int], batch_tokens: int, seed: int,
                  share: float = 0.25) -> list[list[int]]:
    """token_batches of the sentences, with the lexicon entries spread over them: at most `share` of a
    batch's pairs are entries, the shortest entries in the batches of the shortest sentences (least
    padding). Entries that find no room wait for the next epoch's draw (seeded, so resuming is exact).
    A batch may so hold up to 1 / (1 - share) of batch_tokens."""
    sentences = [i for i in range(len(examples)) if i not in lexicon]
    sub = [examples[i] for i in sentences]
    batches = [[sentences[j] for j in b] for b in token_batches(sub, batch_tokens, seed)]
    if not lexicon:
        return batches
    rng = random.Random(seed + 1)
    entries = sorted(lexicon, key=lambda i: (len(examples[i].src) + len(examples[i].tgt), rng.random()))
    by_length = sorted(range(len(batches)), key=lambda b: (max(len(examples[i].tgt) for i in batches[b]), b))
    room = {b: int(len(batches[b]) * share / (1 - share)) for b in by_length}
    rng.shuffle(entries)                # which entries get a place this epoch: a seeded draw
    chosen = sorted(entries[: sum(room.values())], key=lambda i: len(examples[i].src) + len(examples[i].tgt))
    k = 0
    for b in by_length:
        take = chosen[k:k + room[b]]
        batches[b] = batches[b] + take
        k += len(take)
    return batches
