"""Issue 81's data: the lexicon as training pairs, back-translation shards, pair kinds and their tags,
lexicon entries at most a quarter of a batch, subword sampling, and train.py on such a corpus (resumed
exactly). No ../shared/data needed: every input is made here."""
from __future__ import annotations

import gzip
import json
import random
from collections import Counter
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from model.commands import backtranslate, mix, train
from model.inference.lexicon import clean_entry
from model.network.batch import Example
from model.network.tokenizer import Tokenizer
from model.training.data import DataError, mixed_batches, read_kinds, tagged, token_batches
from model.training.everyday import (
    lexicon_pairs,
    mono_sentences,
    read_shards,
    shard_path,
    usable_translation,
    write_corpus,
    write_shard,
)
from tests.support import base_args, write_reverse_task


# ---- the lexicon as pairs ---------------------------------------------------------------------------
def test_ding_notes_are_stripped_from_an_entry():
    assert clean_entry("father <pater>") == "father"
    assert clean_entry("Vater {m} [Br.]") == "Vater"
    assert clean_entry("to write {wrote") == "to write"
    assert clean_entry("National Health Service /NHS/") == "National Health Service"


def test_lexicon_pairs_split_sub_entries_keep_two_used_senses_and_put_everyday_words_first():
    lines = ["cow\tKuh {f}", "cow\tTussi {f}", "cow\tRind {n}",
             "cow | cows\tKuh | Kühe",
             "to humour sb.\tjdm. seinen Willen lassen", "particular average\tPartikularhavarie",
             "a very long english entry of words\tlang", "leek\tPorree {m}", "microbar\tMikrobar",
             "the cat\tdie Katze", "Colorado (state\tColorado (Staat"]
    english = ["The cow is brown.", "A cow and a cat.", "the cat sleeps", "the cat eats", "the cat runs",
               "the cat", "the cat", "cows moo"]
    german = ["Die Kuh ist braun.", "Das Rind frisst.", "Die Kühe.", "Rind und Kuh"]
    pairs = lexicon_pairs(lines, english, german)
    assert ("cows", "Kühe") in pairs                                  # a `|`-aligned sub-entry
    assert [de for en, de in pairs if en == "cow"] == ["Kuh", "Rind"]   # two senses, the used ones
    assert not any("jdm." in de or "sb." in en for en, de in pairs)
    assert not any(en.startswith("a very long") or "(" in en for en, _ in pairs)
    assert ("particular average", "Partikularhavarie") not in pairs      # a phrase no sentence holds
    order = [en for en, _ in pairs]
    assert order.index("the cat") < order.index("cow") < order.index("leek")   # seen most first
    assert {"leek", "microbar"} <= set(order)                            # single words nobody wrote: last
    assert lexicon_pairs(lines, english, german, limit=2) == pairs[:2]


# ---- back-translation shards -----------------------------------------------------------------------
def test_a_shard_is_written_whole_and_read_back_in_order(tmp_path):
    write_shard(shard_path(tmp_path, 1), ["b\tc", "d"], ["B", "D"])
    write_shard(shard_path(tmp_path, 0), ["a"], ["A  x"])
    assert read_shards(tmp_path) == [("a", "A x"), ("b c", "B"), ("d", "D")]
    assert not list(tmp_path.glob("*.part"))
    with pytest.raises(ValueError):
        write_shard(shard_path(tmp_path, 2), ["a"], [])


def test_a_decoder_caught_in_a_loop_is_not_trained_on():
    assert usable_translation("I would like a table for two.", "Ich hätte gern einen Tisch für zwei.")
    assert not usable_translation("Eight, okay.", "")
    assert not usable_translation("Hi there.", "Hallo hallo hallo da.")
    assert not usable_translation("One moment please.", "Einen Kontags-Kontags-Kontags Moment bitte.")
    assert not usable_translation("Yes.", "Ja, " + "und dann " * 5 + "ja.")


def _mono(tmp_path: Path, lines: list[str]) -> Path:
    (tmp_path / "mono").mkdir(parents=True)
    with gzip.open(tmp_path / "mono" / "commonvoice.de.gz", "wt", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    return tmp_path


def test_monolingual_sentences_are_distinct_of_a_usable_length_and_always_in_the_same_order(tmp_path):
    numbered = [f"Satz Nummer {i} hier." for i in range(50)]
    shared = _mono(tmp_path, ["Das ist gut.", "das ist gut.", "Zu kurz", *numbered])
    first = mono_sentences(shared, "cv-de")
    assert first == mono_sentences(shared, "cv-de")
    assert len(first) == 51 and "Zu kurz" not in first
    assert sum(s.lower() == "das ist gut." for s in first) == 1


def test_backtranslation_resumes_at_the_first_missing_shard(tmp_path, monkeypatch, app_checkpoints):
    shared = _mono(tmp_path / "shared", [f"Satz Nummer {i} hier." for i in range(12)])
    monkeypatch.setattr(backtranslate, "SHARD_SIZE", 5)
    calls: list[int] = []
    monkeypatch.setattr(backtranslate, "translate_corpus",
                        lambda ckpt, texts, opts, batch_tokens: calls.append(len(texts)) or [t.upper() for t in texts])
    out = tmp_path / "out"
    args = ["--corpus", "cv-de", "--checkpoint", str(app_checkpoints / "multi30k-de-en"),
            "--shared", str(shared), "--out", str(out)]
    assert backtranslate.main([*args, "--shards", "1"]) == 0
    assert calls == [5]
    assert backtranslate.main(args) == 0                     # the first shard is not made again
    assert calls == [5, 5, 2]
    pairs = read_shards(out)
    assert len(pairs) == 12 and all(o == s.upper() for s, o in pairs)


# ---- kinds, tags and batches ---------------------------------------------------------------------
def test_a_pairs_kind_is_read_from_its_tag_file_and_is_a_sentence_without_one(tmp_path):
    assert read_kinds(tmp_path, "train", 2) == ["sentence", "sentence"]
    write_corpus(tmp_path, "train", [("a", "b", "lexicon"), ("c", "d", "back"), ("e", "f", "sentence")], "en", "de")
    assert read_kinds(tmp_path, "train", 3) == ["lexicon", "back", "sentence"]
    with pytest.raises(DataError, match="one kind per pair"):
        read_kinds(tmp_path, "train", 4)
    (tmp_path / "val.tag").write_text("sentence\ncomic\n")
    with pytest.raises(DataError, match="'comic' is not a kind"):
        read_kinds(tmp_path, "val", 2)


def test_a_lexicon_entry_starts_with_bos_and_a_model_written_source_with_eos():
    assert tagged([[7, 8], [9], [10], []], ["lexicon", "back", "sentence", "lexicon"], bos=2, eos=3) == \
        [[2, 7, 8], [3, 9], [10], []]


def _examples(n_sent: int, n_lex: int, seed: int = 0) -> tuple[list[Example], set[int]]:
    rng = random.Random(seed)
    ex, lex = [], set()
    for i in range(n_sent + n_lex):
        entry = i >= n_sent
        n = rng.randint(1, 3) if entry else rng.randint(3, 20)
        ex.append(Example([5] * n + [3], [2] + [6] * n + [3]))
        if entry:
            lex.add(i)
    return ex, lex


def test_lexicon_entries_are_at_most_a_quarter_of_every_batch_and_each_pair_comes_once():
    examples, lexicon = _examples(600, 900)
    batches = mixed_batches(examples, lexicon, batch_tokens=120, seed=4)
    seen = Counter(i for b in batches for i in b)
    assert all(c == 1 for c in seen.values())
    assert all(i in seen for i in range(600))                           # every sentence, every epoch
    assert 0 < sum(i in lexicon for i in seen) < 900                   # the rest wait for another draw
    for b in batches:
        assert sum(i in lexicon for i in b) <= 0.25 * len(b) + 1e-9
    assert batches == mixed_batches(examples, lexicon, batch_tokens=120, seed=4)
    other = {i for b in mixed_batches(examples, lexicon, batch_tokens=120, seed=5) for i in b}
    assert other & lexicon != set(seen) & lexicon                     # another epoch, another draw


def test_without_lexicon_entries_the_batches_are_the_plain_ones():
    examples, _ = _examples(300, 0)
    assert mixed_batches(examples, set(), 200, seed=3) == token_batches(examples, 200, seed=3)


def test_subword_sampling_splits_anew_for_each_seed_and_keeps_the_text():
    text = [f"the {w} walked quietly to the marketplace" for w in ("farmer", "teacher", "hedgehog")] * 40
    tok = Tokenizer.train(text + ["walking talking marketing"] * 20, vocab_size=60)
    a, b, c = (tok.encode_sampled(text, 0.3, seed) for seed in (1, 1, 2))
    assert a == b and a != c
    assert [tok.decode(x) for x in a] == [tok.decode(tok.encode(t)) for t in text]
    assert sum(map(len, a)) > sum(map(len, tok.encode_many(text)))      # merges skipped: more pieces


# ---- train.py on a corpus with kinds ------------------------------------------------------------
def _kinds_task(data: Path) -> None:
    write_reverse_task(data, n_train=800)
    rng = random.Random(3)
    kinds = [rng.choice(["sentence", "sentence", "lexicon", "back"]) for _ in range(800)]
    (data / "train.tag").write_text("".join(k + "\n" for k in kinds))


def test_a_run_with_kinds_and_subword_sampling_resumes_where_an_uninterrupted_run_ends(tmp_path):
    data = tmp_path / "data"
    _kinds_task(data)
    common = ["--epochs", "3", "--dropout", "0.1", "--subword-alpha", "0.2", "--lexicon-share", "0.25"]
    assert train.main(base_args(data, tmp_path / "a", *common, "--max-steps", "14")) == 0
    assert train.main(base_args(data, tmp_path / "b", *common, "--max-steps", "5")) == 0
    assert train.main(["--resume", str(tmp_path / "b"), "--max-steps", "14", "--no-progress"]) == 0
    a = load_file(str(tmp_path / "a.work" / "last" / "model.safetensors"))
    b = load_file(str(tmp_path / "b.work" / "last" / "model.safetensors"))
    for k in a:
        assert torch.equal(a[k], b[k]), k
    args = json.loads((tmp_path / "b.work" / "last" / "args.json").read_text())
    assert args["subword_alpha"] == 0.2 and args["lexicon_share"] == 0.25


# ---- the mix ------------------------------------------------------------------------------------
def _shared(tmp_path: Path) -> Path:
    shared = tmp_path / "shared"

    def corpus(folder: str, splits: dict[str, int]) -> None:
        for split, n in splits.items():
            for lang, word in (("en", "house"), ("de", "Haus")):
                path = shared / folder / f"{split}.{lang}.gz"
                path.parent.mkdir(parents=True, exist_ok=True)
                long = " big" * (6 if folder == "tatoeba-en-de" and split == "train" else 0)
                with gzip.open(path, "wt", encoding="utf-8") as f:
                    f.writelines(f"{folder} {word} {i}{long if i % 2 else ''}\n" for i in range(n))
    corpus("everyday-extra", {"train": 10})
    corpus("tatoeba-en-de", {"train": 20, "val": 3, "val-long": 2})
    corpus("multi30k", {"train": 30, "val": 4})
    for name, lines in (("lexicon.en-de.tsv.gz", ["house\tHaus {n}", "tatoeba-en-de\tTatoeba"]),
                        ("mono/sgd-dialogues.en.gz", ["house house"]), ("mono/commonvoice.en.gz", ["house"]),
                        ("mono/commonvoice.de.gz", ["Haus"])):
        path = shared / "everyday-extra" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)
    return shared


def test_the_mix_takes_every_kind_in_its_direction(tmp_path):
    shared, generated = _shared(tmp_path), tmp_path / "generated"
    write_shard(shard_path(generated / "cv-de.de-en", 0), ["Das Haus ist rot.", "Das Haus."],
                ["The house is red.", "The house house house house."])
    out = tmp_path / "mix"
    assert mix.main(["--src", "en", "--tgt", "de", "--shared", str(shared), "--generated", str(generated),
                     "--out", str(out), "--tatoeba-short", "3", "--multi30k", "5"]) == 0
    counts = json.loads((out / "MIX.json").read_text())["pairs"]
    assert counts == {"everyday-extra": 10, "tatoeba": 13, "multi30k": 5, "lexicon": 2, "back-translated": 1}
    en, de = (gzip.open(out / f"train.{x}.gz", "rt").read().splitlines() for x in ("en", "de"))
    kinds = gzip.open(out / "train.tag.gz", "rt").read().splitlines()
    rows = set(zip(en, de, kinds))
    assert ("house", "Haus", "lexicon") in rows
    assert ("The house is red.", "Das Haus ist rot.", "back") in rows      # model-written English as source
    assert len(gzip.open(out / "val.en.gz", "rt").read().splitlines()) == 9
