"""Tasks for the training lab, generated in code (no data files).

    copy     a c f b  ->  a c f b
    reverse  a c f b  ->  b f c a
    sort     a c f b  ->  a b c f
    dates    March 5 , 2021  ->  2021 - 03 - 05   (reordering: the year moves to the front)

A token is a word; copy, reverse and sort draw sequences of `min_len`..`max_len` tokens
from the first `symbols` letters a..z; dates draw a day of a year from `first_year` to
`first_year + years - 1`. Each task has its own word-level sentencepiece tokenizer
(pad 0, unk 1, bos 2, eos 3 like every model here, then the task's words), built in code,
so a lab model is saved in the same checkpoint format as the shipped ones.
"""
from __future__ import annotations

import calendar
import datetime
import random
from collections.abc import Callable
from dataclasses import dataclass

from sentencepiece import sentencepiece_model_pb2 as spm_pb

from i18n import N_
from model.network.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer

LETTERS = "abcdefghijklmnopqrstuvwxyz"
MONTHS = list(calendar.month_name)[1:]
Pair = tuple[list[str], list[str]]       # (source words, target words)


@dataclass(frozen=True)
class TaskSpec:
    name: str = "reverse"
    min_len: int = 4
    max_len: int = 10
    symbols: int = 20          # copy / reverse / sort: how many letters
    first_year: int = 1950     # dates
    years: int = 100

    def __post_init__(self) -> None:
        if self.name not in TASKS:
            raise ValueError(f"unknown task {self.name!r}; choose from {sorted(TASKS)}")
        if not 1 <= self.min_len <= self.max_len:
            raise ValueError(f"need 1 <= min_len <= max_len, got {self.min_len}..{self.max_len}")
        if not 2 <= self.symbols <= len(LETTERS):
            raise ValueError(f"symbols must be 2..{len(LETTERS)}, got {self.symbols}")
        if not 1 <= self.years <= 400:
            raise ValueError(f"years must be 1..400, got {self.years}")

    @property
    def letters(self) -> list[str]:
        return list(LETTERS[: self.symbols])


# ---- the tasks ---------------------------------------------------------------------------------
def _letters(spec: TaskSpec, rng: random.Random) -> list[str]:
    return [rng.choice(spec.letters) for _ in range(rng.randint(spec.min_len, spec.max_len))]


def copy_pair(spec: TaskSpec, rng: random.Random) -> Pair:
    src = _letters(spec, rng)
    return src, list(src)


def reverse_pair(spec: TaskSpec, rng: random.Random) -> Pair:
    src = _letters(spec, rng)
    return src, src[::-1]


def sort_pair(spec: TaskSpec, rng: random.Random) -> Pair:
    src = _letters(spec, rng)
    return src, sorted(src)


def date_pair(spec: TaskSpec, rng: random.Random) -> Pair:
    first = datetime.date(spec.first_year, 1, 1).toordinal()
    last = datetime.date(spec.first_year + spec.years - 1, 12, 31).toordinal()
    day = datetime.date.fromordinal(rng.randint(first, last))
    return date_words(day)


def date_words(day: datetime.date) -> Pair:
    return ([MONTHS[day.month - 1], str(day.day), ",", str(day.year)],
            [str(day.year), "-", f"{day.month:02d}", "-", f"{day.day:02d}"])


def _letter_words(spec: TaskSpec) -> list[str]:
    return spec.letters


def _date_vocabulary(spec: TaskSpec) -> list[str]:
    years = [str(y) for y in range(spec.first_year, spec.first_year + spec.years)]
    return (MONTHS + [str(d) for d in range(1, 32)] + [","] + years + ["-"]
            + [f"{m:02d}" for m in range(1, 13)] + [f"{d:02d}" for d in range(13, 32)])


TASK_TITLES = {"reverse": N_("reverse"), "copy": N_("copy"), "sort": N_("sort"), "dates": N_("dates")}


@dataclass(frozen=True)
class Task:
    name: str
    describe: str           # marked for the catalog (i18n/): _() where shown
    example: str
    generate: Callable[[TaskSpec, random.Random], Pair]
    vocabulary: Callable[[TaskSpec], list[str]]


TASKS: dict[str, Task] = {t.name: t for t in (
    Task("reverse", N_("write the sequence backwards"), "a c f b → b f c a", reverse_pair, _letter_words),
    Task("copy", N_("write the sequence unchanged"), "a c f b → a c f b", copy_pair, _letter_words),
    Task("sort", N_("write the letters in alphabetical order"), "d a c a → a a c d", sort_pair, _letter_words),
    Task("dates", N_("rewrite a date the ISO way (the year moves to the front)"), "March 5 , 2021 → 2021 - 03 - 05",
         date_pair, _date_vocabulary),
)}


def vocabulary(spec: TaskSpec) -> list[str]:
    """The task's words, each once, in a fixed order (the tokenizer's ids 4, 5, ...)."""
    return list(dict.fromkeys(TASKS[spec.name].vocabulary(spec)))


def sample(spec: TaskSpec, n: int, seed: int, exclude: set[tuple[str, ...]] = frozenset(),
           tries: int = 20) -> list[Pair]:
    """n examples drawn with `seed`, none of whose sources is in `exclude` (held-out
    examples are kept apart from training ones this way); fewer when the task has
    fewer distinct sources left."""
    rng, out = random.Random(seed), []
    misses = 0
    while len(out) < n and misses < tries * max(n, 1):
        pair = TASKS[spec.name].generate(spec, rng)
        if tuple(pair[0]) in exclude:
            misses += 1
            continue
        out.append(pair)
    return out


# ---- the tokenizer -----------------------------------------------------------------------------
def word_tokenizer(words: list[str]) -> Tokenizer:
    """A word-level sentencepiece model over `words` (split at spaces; anything else is
    <unk>), with this project's special ids."""
    proto = spm_pb.ModelProto()
    piece_type = spm_pb.ModelProto.SentencePiece
    specials = {PAD_ID: ("<pad>", piece_type.CONTROL), UNK_ID: ("<unk>", piece_type.UNKNOWN),
                BOS_ID: ("<s>", piece_type.CONTROL), EOS_ID: ("</s>", piece_type.CONTROL)}
    for i in range(len(specials)):
        piece = proto.pieces.add()
        piece.piece, piece.type, piece.score = specials[i][0], specials[i][1], 0.0
    for word in dict.fromkeys(words):
        if not word or " " in word:
            raise ValueError(f"a word-level vocabulary needs non-empty words without spaces, got {word!r}")
        piece = proto.pieces.add()
        piece.piece, piece.type, piece.score = "▁" + word, piece_type.NORMAL, 0.0
    trainer = proto.trainer_spec
    trainer.model_type = spm_pb.TrainerSpec.WORD
    trainer.pad_id, trainer.unk_id, trainer.bos_id, trainer.eos_id = PAD_ID, UNK_ID, BOS_ID, EOS_ID
    trainer.vocab_size = len(proto.pieces)
    normalizer = proto.normalizer_spec
    normalizer.name, normalizer.add_dummy_prefix, normalizer.remove_extra_whitespaces = "identity", True, True
    return Tokenizer(proto.SerializeToString())


def tokenizer_for(spec: TaskSpec) -> Tokenizer:
    return word_tokenizer(vocabulary(spec))


def text(words: list[str]) -> str:
    return " ".join(words)


def normalise(spec: TaskSpec, typed: str) -> str:
    """What a student types, spaced into the task's words ("March 5, 2021" -> "March 5 , 2021")."""
    if spec.name == "dates":
        typed = typed.replace(",", " , ")
    return " ".join(typed.split())
