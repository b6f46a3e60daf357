"""Rare-word coverage and the missing word (model/inference/lexicon.py): a word is kept in any
inflection, inside a German compound, and named when all its translations are gone."""
from __future__ import annotations

import gzip

import pytest

from model.inference.lexicon import Lexicon, content_words, coverage

PAIRS = [("cow", "Kuh {f}"), ("cow", "Rind"), ("cheese", "Käse"), ("to water", "gießen"), ("plant", "Pflanze"),
         ("turtle", "Schildkröte"), ("Berlin", "Berlin"), ("history", "Geschichte"), ("the", "der")]


@pytest.fixture(scope="module")
def en_de(tmp_path_factory) -> Lexicon:
    path = tmp_path_factory.mktemp("lex") / "lexicon.tsv.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(f"{en}\t{de}\n" for en, de in PAIRS)
    return Lexicon.load(path, "en", "de")


def test_function_words_and_numbers_are_not_content_words():
    assert content_words("The cow and the 3 cows were in Berlin.", "en") == ["cow", "cows", "berlin"]
    assert content_words("Die Kühe sind in Berlin, weil es dort warm ist.", "de") == ["kühe", "berlin", "warm"]


def test_a_word_is_kept_in_any_inflection_and_inside_a_compound(en_de):
    assert en_de.missing("The cows are in the field.", "Die Kühe sind auf dem Feld.") == []
    assert en_de.missing("I want a cheese sandwich.", "Ich möchte ein Käsebrot.") == []
    assert en_de.missing("She waters the plants.", "Sie gießt die Pflanzen.") == []
    assert en_de.missing("We failed the history test.", "Wir sind durch die Geschichtsarbeit gefallen.") == []


def test_the_words_whose_translations_are_all_gone_are_named(en_de):
    known, missing = en_de.check("My turtle lives in Berlin with a cow.", "Mein Schaden lebt mit einem Rind.")
    assert known == ["turtle", "berlin", "cow"]
    assert missing == ["turtle", "berlin"]


def test_coverage_is_the_share_of_known_words_kept(en_de):
    share, kept, known = coverage(en_de, ["A cow.", "A turtle and a cow.", "Nothing known here."],
                                  ["Eine Kuh.", "Eine Kuh.", "Nichts."])
    assert (kept, known) == (2, 3) and share == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        coverage(en_de, ["a"], [])


def test_the_same_file_reads_from_german_to_english(tmp_path):
    path = tmp_path / "lex.tsv"
    path.write_text("".join(f"{en}\t{de}\n" for en, de in PAIRS), encoding="utf-8")
    de_en = Lexicon.load(path, "de", "en")
    assert de_en.missing("Meine Schildkröte gießt die Kühe.", "My turtle pours the cows.") == ["gießt"]


def test_a_word_the_model_read_often_is_checked_but_never_named(en_de, tmp_path):
    sources = ["The cow eats."] * 25 + ["A turtle swims."] * 3
    lex = en_de.with_common(sources)
    assert "cow" in lex.common and "turtle" not in lex.common
    known, missing = lex.check("My cow and my turtle.", "Meine Katze und mein Hund.")
    assert missing == ["cow", "turtle"] and lex.suspects(missing) == ["turtle"]
    lex.save(tmp_path / "lex.tsv.gz")
    again = Lexicon.read(tmp_path / "lex.tsv.gz")
    assert again.common == lex.common and again.entries == lex.entries and again.by_stem == lex.by_stem


def test_a_named_word_is_shown_as_the_source_writes_it():
    from model.inference.lexicon import as_written
    assert as_written("Magst du Quark mit frischen Aprikosen?", ["quark", "aprikosen", "nie"]) == \
        ["Quark", "Aprikosen", "nie"]
