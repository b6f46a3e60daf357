"""The data of issue 81's CPU route, apart from the training loop that reads it: the monolingual sentences
a model back-translates (chosen once, in a fixed order), the shards those translations are kept in, the Ding
lexicon made into short training pairs, and the tags that tell the model what kind of pair it reads.

A pair's kind travels beside the text, one line per pair, in `train.tag` of a corpus directory (absent:
every pair is a sentence). The kind becomes one id at the start of the source (model/training/data.py):

    sentence    nothing added: what a user types
    lexicon     `<s>` first: a dictionary entry ("turtle" -> "Schildkröte"), not a sentence
    back        `</s>` first: the source was written by a model (back-translation, Caswell et al. 2019)

`<s>` and `</s>` are control ids that never start a typed source (sentencepiece does not parse them out
of text), so a tag costs no new embedding and cannot be typed by a user.
"""
from __future__ import annotations

import gzip
import random
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from model.inference.lexicon import clean_entry

KINDS = ("sentence", "lexicon", "back")
SHARD_SIZE = 5000

# the monolingual corpora under ../shared/data/everyday-extra/mono, by the name a shard folder carries
MONO = {"sgd": ("mono/sgd-dialogues.en.gz", "en"), "cv-en": ("mono/commonvoice.en.gz", "en"),
        "cv-de": ("mono/commonvoice.de.gz", "de")}
MONO_LIMIT = {"sgd": 100_000}
MONO_WORDS = (3, 30)


def read_gz(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n").strip() for line in f]


# ---- monolingual sentences and their shards --------------------------------------------------
def mono_sentences(shared: Path, corpus: str, seed: int = 81) -> list[str]:
    """The sentences of a monolingual corpus to translate, in the order the shards take them: distinct
    (after lowercasing), MONO_WORDS long, shuffled with a fixed seed, at most MONO_LIMIT."""
    rel, _ = MONO[corpus]
    seen, out = set(), []
    for line in read_gz(shared / rel):
        key = line.lower()
        if key in seen or not MONO_WORDS[0] <= len(line.split()) <= MONO_WORDS[1]:
            continue
        seen.add(key)
        out.append(line)
    random.Random(seed).shuffle(out)
    return out[: MONO_LIMIT.get(corpus, len(out))]


def shard_path(folder: Path, index: int) -> Path:
    return folder / f"shard-{index:03d}.tsv.gz"


def shards(sentences: list[str], size: int = SHARD_SIZE) -> list[list[str]]:
    return [sentences[i:i + size] for i in range(0, len(sentences), size)]


def write_shard(path: Path, sources: list[str], outputs: list[str]) -> None:
    """source TAB translation per line, written whole or not at all (a stopped run leaves no half shard)."""
    if len(sources) != len(outputs):
        raise ValueError(f"{len(sources)} sources but {len(outputs)} translations")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    with gzip.open(tmp, "wt", encoding="utf-8") as f:
        f.writelines(f"{one_field(s)}\t{one_field(o)}\n" for s, o in zip(sources, outputs))
    tmp.replace(path)


def one_field(text: str) -> str:
    return " ".join(text.replace("\t", " ").split())


def read_shards(folder: Path) -> list[tuple[str, str]]:
    """Every (source, translation) pair of a folder's finished shards, in shard order."""
    pairs = []
    for path in sorted(folder.glob("shard-*.tsv.gz")):
        for line in read_gz(path):
            src, _, out = line.partition("\t")
            pairs.append((src, out))
    return pairs


def usable_translation(source: str, output: str) -> bool:
    """A model's translation worth training on: not empty, not much longer or shorter than its source,
    and no word repeated three times in a row (a decoder caught in a loop)."""
    a, b = source.split(), output.split()
    if not b or len(b) > 2 * len(a) + 3 or len(a) > 3 * len(b) + 3:
        return False
    words = [w.lower().strip(".,!?") for w in b]
    if any(words[i] == words[i + 1] == words[i + 2] for i in range(len(words) - 2)):
        return False
    return not re.search(r"(\w{3,})(-?\1){2}", output)       # "Kontags-Kontags-Kontags"


# ---- the lexicon as pairs ---------------------------------------------------------------------------
_PLACEHOLDERS = {"sb.", "sth.", "sb", "sth", "jdm.", "jdn.", "jds.", "jd.", "etw.", "sb's", "sb.'s"}


def lexicon_pairs(lines: Iterable[str], english_text: Iterable[str], german_text: Iterable[str],
                  max_words: int = 5, senses: int = 2, limit: int | None = None) -> list[tuple[str, str]]:
    """Ding's `English TAB German` entries as short training pairs: notes stripped, `|`-aligned
    sub-entries split, entries with `sb.`/`jdm.` placeholders or brackets left out, at most max_words a
    side, of an English entry's German senses the `senses` that occur most often in `german_text`. Ordered by
    how often the English side occurs as written in `english_text` or a German sense in `german_text` (real
    sentences: everyday words and phrases first, "particular average" never), then the single words that
    neither holds (shortest first); other entries left out; at most `limit`."""
    kept: dict[str, list[str]] = {}
    for line in lines:
        en_all, _, de_all = line.partition("\t")
        en_parts, de_parts = en_all.split("|"), de_all.split("|")
        if len(en_parts) != len(de_parts):
            en_parts, de_parts = [en_all.replace("|", " ")], [de_all.replace("|", " ")]
        for en, de in zip(en_parts, de_parts):
            en, de = clean_entry(en), clean_entry(de)
            if not en or not de or en.lower() == de.lower():
                continue
            words = (en + " " + de).lower().split()
            if _PLACEHOLDERS & set(words) or any(c in en + de for c in "{}[]()/;:=<>"):
                continue
            if len(en.split()) > max_words or len(de.split()) > max_words:
                continue
            sense = kept.setdefault(en, [])
            if de not in sense:
                sense.append(de)
    counts = phrase_counts(english_text, {_phrase(en) for en in kept}, max_words)
    german = phrase_counts(german_text, {_phrase(de) for ds in kept.values() for de in ds}, max_words)
    def seen(en: str) -> int:      # the English phrase, or its most used German sense, in real sentences
        return counts[_phrase(en)] + max(german[_phrase(de)] for de in kept[en])

    ranked = sorted((en for en in kept if seen(en)), key=lambda en: (-seen(en), len(en.split()), en))
    # then the single words no sentence holds ("leek", "doormat", "Leipzig"): the rare words themselves
    ranked += sorted((en for en in kept if not seen(en) and len(en.split()) == 1 and en.isalpha()
                      and any(len(de.split()) == 1 for de in kept[en])), key=lambda en: (len(en), en))
    # of an entry's senses the `senses` most used in real German ("drug": Droge before Dopingmittel)
    out = [(en, de) for en in ranked
           for de in sorted(kept[en], key=lambda de: (-german[_phrase(de)], kept[en].index(de)))[:senses]]
    return out[:limit] if limit else out


def _phrase(text: str) -> tuple[str, ...]:
    """An entry's English side as the words a sentence would hold: "to water" -> ("water",)."""
    words = tuple(w.lower().strip(".,!?;:'\"") for w in text.split())
    words = tuple(w for w in words if w)
    return words[1:] if len(words) > 1 and words[0] == "to" else words


def phrase_counts(lines: Iterable[str], wanted: set[tuple[str, ...]], longest: int) -> Counter:
    """How often each wanted phrase (a tuple of lowercased words) occurs in the lines."""
    counts: Counter = Counter()
    for line in lines:
        words = [w.lower().strip(".,!?;:'\"") for w in line.split()]
        for n in range(1, longest + 1):
            for i in range(len(words) - n + 1):
                gram = tuple(words[i:i + n])
                if gram in wanted:
                    counts[gram] += 1
    return counts


# ---- a corpus directory with kinds -------------------------------------------------------------------
def write_corpus(folder: Path, split: str, pairs: list[tuple[str, str, str]], src: str, tgt: str) -> None:
    """pairs of (source, target, kind) as {split}.{src}.gz, {split}.{tgt}.gz and {split}.tag.gz."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, column in ((src, 0), (tgt, 1), ("tag", 2)):
        with gzip.open(folder / f"{split}.{name}.gz", "wt", encoding="utf-8") as f:
            f.writelines(one_field(p[column]) + "\n" for p in pairs)


def iter_kinds(values: Iterable[str], path: Path | str = "train.tag") -> Iterator[str]:
    for i, v in enumerate(values):
        v = v.strip() or "sentence"
        if v not in KINDS:
            raise ValueError(f"{path}: line {i + 1}: {v!r} is not a kind ({', '.join(KINDS)})")
        yield v
