"""The teacher's dev set (data/dev, issue 81): its size and shape, its rare words, and that none of it is
training data (the data check skips without ../shared/data)."""
from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT / "data" / "dev"
SHARED = ROOT.parent / "shared" / "data"


def norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def rows(direction: str) -> list[list[str]]:
    lines = (DEV / f"teacher.{direction}.tsv").read_text(encoding="utf-8").splitlines()
    assert lines[0].split("\t") == ["source", "reference", "topic", "rare"]
    return [line.split("\t") for line in lines[1:]]


@pytest.mark.parametrize("direction", ["en-de", "de-en"])
def test_the_dev_set_is_300_everyday_sentences_of_6_to_15_words_100_with_a_rare_word(direction):
    r = rows(direction)
    assert len(r) >= 300
    assert all(len(x) == 4 and x[0] and x[1] for x in r)
    assert all(6 <= len(x[0].split()) <= 15 for x in r)
    assert sum(bool(x[3]) for x in r) >= 100
    assert len({norm(x[0]) for x in r}) == len(r)           # no sentence twice
    for src, _, _, rare in r:                                 # each rare word is a word of its sentence
        assert set(rare.split()) <= set(re.findall(r"[^\W\d_]+", src.lower()))


def test_no_dev_or_judged_sentence_is_in_another_set():
    judged = {norm(line) for p in (ROOT / "benchmarks" / "judged").glob("*.txt") for line in p.open()}
    for direction in ("en-de", "de-en"):
        assert not {norm(x[0]) for x in rows(direction)} & judged


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data is absent")
def test_no_dev_or_judged_sentence_is_in_any_data_file():
    ours = {norm(x[i]) for d in ("en-de", "de-en") for x in rows(d) for i in (0, 1)}
    ours |= {norm(line) for lang in ("en", "de")
             for line in (ROOT / "benchmarks" / "judged" / f"trust81-{lang}.txt").open()}
    found = set()
    for path in SHARED.rglob("*.gz"):
        if "lexicon" in path.name:
            continue
        with gzip.open(path, "rt", encoding="utf-8") as f:
            found |= {norm(line) for line in f} & ours
    assert not found
