"""The message catalogs, kept in step with the code: `make catalogs` (python -m i18n.catalogs).

1. extract every text marked with _(), N_() or ngettext() in app/, figures/, model/, serving/, webpage/, i18n/
   into i18n/messages.pot (the template a translator starts a new language from);
2. merge it into each language's .po: new texts arrive untranslated, texts no longer in the
   code are dropped, a translation is kept as long as its English text is unchanged;
3. compile each .po into the .mo the app reads.

`--check` changes nothing and lists what is wrong instead (tests/test_i18n.py runs it): a text
shown in English with no translation (or a fuzzy one) in some language, a translation whose
{placeholders} differ from the English, a .mo that does not say what its .po says (the header
aside: it names the Babel that wrote it). Babel does the reading and writing (dev extra); the
app itself needs only the standard library's gettext.

Every text is formatted with str.format ({name}), never with %: a "%" in a text is a percent
sign, so Babel's guess that "40 % of" is a %-format is dropped.
"""
from __future__ import annotations

import argparse
import io
import re
import sys
from pathlib import Path

from i18n import DOMAIN, LOCALES, SOURCE

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = Path(__file__).resolve().parent / "messages.pot"
SOURCES = ("app", "figures", "model", "serving", "webpage", "i18n")
KEYWORDS = {"_": None, "N_": None, "ngettext": (1, 2)}
PLACEHOLDER = re.compile(r"\{[^{}]*\}")


def _po(lang: str) -> Path:
    return LOCALES / lang / "LC_MESSAGES" / f"{DOMAIN}.po"


def languages() -> list[str]:
    return sorted(p.parent.parent.name for p in LOCALES.glob(f"*/LC_MESSAGES/{DOMAIN}.po") if p.parent.parent.name
                  != SOURCE)


def extract():
    """The template: every marked text of the code, with where it is used."""
    from babel.messages.catalog import Catalog
    from babel.messages.extract import extract_from_dir
    template = Catalog(project="Transformer, explained", charset="utf-8")
    for folder in SOURCES:
        for filename, lineno, message, comments, context in extract_from_dir(
                ROOT / folder, method_map=[("**.py", "python")], keywords=KEYWORDS, comment_tags=("TRANSLATORS:",),
                strip_comment_tags=True):
            template.add(message, None, [(f"{folder}/{filename}", lineno)], auto_comments=comments, context=context)
    for message in template:
        message.flags.discard("python-format")
    return template


def _read(path: Path):
    from babel.messages.pofile import read_po
    with path.open("rb") as f:
        return read_po(f)


def _write(path: Path, catalog) -> None:
    from babel.messages.pofile import write_po
    with path.open("wb") as f:
        write_po(f, catalog, width=0, sort_by_file=True, ignore_obsolete=True)


def _compiled(catalog) -> bytes:
    from babel.messages.mofile import write_mo
    out = io.BytesIO()
    write_mo(out, catalog)
    return out.getvalue()


def _messages(mo: bytes) -> list[tuple]:
    """What a compiled catalog says, its header aside (Babel writes its own version there)."""
    from babel.messages.mofile import read_mo
    return sorted((m.context or "", str(m.id), str(m.string)) for m in read_mo(io.BytesIO(mo)) if m.id)


def is_compiled(mo: Path, catalog) -> bool:
    """Whether `mo` says what `catalog` (a .po, read) compiles to."""
    return mo.is_file() and _messages(mo.read_bytes()) == _messages(_compiled(catalog))


def update() -> None:
    """Steps 1-3 of the module's text."""
    template = extract()
    _write(TEMPLATE, template)
    for lang in languages():
        catalog = _read(_po(lang))
        catalog.update(template, no_fuzzy_matching=True)
        for message in catalog:
            message.flags.discard("python-format")
        _write(_po(lang), catalog)
        _po(lang).with_suffix(".mo").write_bytes(_compiled(_read(_po(lang))))
        print(f"{lang}: {_translated(catalog)} of {len([m for m in catalog if m.id])} texts translated")


def _translated(catalog) -> int:
    return sum(1 for m in catalog if m.id and _complete(m))


def _complete(message) -> bool:
    strings = message.string if isinstance(message.string, tuple) else (message.string,)
    return all(strings) and "fuzzy" not in message.flags


def problems() -> list[str]:
    """What `--check` reports (empty: every language is complete and compiled)."""
    template = extract()
    wanted = {m.id if isinstance(m.id, str) else m.id[0]: m for m in template if m.id}
    found = []
    for lang in languages():
        catalog = _read(_po(lang))
        for key, english in wanted.items():
            message = catalog.get(english.id)
            if message is None or not _complete(message):
                found.append(f"{lang}: not translated: {key!r}")
                continue
            strings = message.string if isinstance(message.string, tuple) else (message.string,)
            ids = english.id if isinstance(english.id, tuple) else (english.id,)
            if any(set(PLACEHOLDER.findall(s)) != set(PLACEHOLDER.findall(ids[-1])) for s in strings):
                found.append(f"{lang}: placeholders differ from the English: {key!r}")
        extra = [m.id for m in catalog if m.id and (m.id if isinstance(m.id, str) else m.id[0]) not in wanted]
        found += [f"{lang}: no longer in the code (make catalogs drops it): {e!r}" for e in extra]
        mo = _po(lang).with_suffix(".mo")
        if not is_compiled(mo, catalog):
            found.append(f"{lang}: {mo.relative_to(ROOT)} is not {_po(lang).name} compiled: run `make catalogs`")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m i18n.catalogs", description=__doc__.split("\n\n")[0],
                                     epilog="A new language: see README.md, 'Add a language'.")
    parser.add_argument("--check", action="store_true", help="change nothing; list what is missing or stale")
    args = parser.parse_args(argv)
    if args.check:
        found = problems()
        print("\n".join(found) or "every language is complete and compiled")
        return 1 if found else 0
    update()
    return 0


if __name__ == "__main__":
    sys.exit(main())
