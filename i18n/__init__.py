"""The interface's languages: every text a person reads in the app goes through `_`.

    from i18n import _, N_
    st.button(_("Next"))
    st.caption(_("Step {t} of {n}").format(t=t, n=n))      # never an f-string inside _()
    TITLE = N_("Masks")       # written before a language is chosen (a registry, a default
    st.title(_(TITLE))        # argument): marked with N_, translated where it is shown
    raise InputError(Later(N_("{n} tokens; the limit is {limit}"), n=n, limit=limit))
                              # made where no language is known (a model's error): str() of it
                              # speaks the language of wherever it is shown

The texts are looked up in gettext message catalogs, one per language:
`i18n/locales/<lang>/LC_MESSAGES/messages.po` (what a translator writes; English, the
language of the code, needs none) compiled to `messages.mo` (what the app reads). `make
catalogs` extracts every marked text into `i18n/messages.pot`, merges it into each `.po`,
and compiles them (Babel). A language is available as soon as its `.mo` is there: a third
language is one file a translator adds (README: "Add a language").

The language is a context variable, not a global: one process serves many sessions, each in
its own language. The app sets it at the start of every run and of every fragment's run
(`app/ui.py`); figures drawn in one language are cached apart from the other's. Command-line
tools and tests that set nothing get English.
"""
from __future__ import annotations

import contextvars
import functools
import gettext
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SOURCE = "en"                                   # the language the code is written in
LOCALES = Path(__file__).resolve().parent / "locales"
DOMAIN = "messages"


def N_(message: str) -> str:
    """Mark `message` for the catalog without translating it now (see the module's text)."""
    return message


# TRANSLATORS: not a sentence: the decimal mark of numbers in this language ("," in German).
DECIMAL_MARK = N_("DECIMAL_MARK")
# TRANSLATORS: not a sentence: what groups thousands ("." in German: 1.000).
THOUSANDS_MARK = N_("THOUSANDS_MARK")
# TRANSLATORS: not a sentence: a percentage, {n} the number ("{n} %" in German, with a narrow no-break space).
PERCENT = N_("PERCENT_{n}")


# TRANSLATORS: not a sentence: this language's own name, as its speakers write it (Deutsch, Français).
OWN_NAME = N_("LANGUAGE_NAME")
_current: contextvars.ContextVar[str] = contextvars.ContextVar("interface_language", default=SOURCE)


@functools.cache
def catalog(lang: str) -> gettext.NullTranslations:
    """The compiled catalog of `lang` (English: none, the texts as written)."""
    if lang == SOURCE:
        return gettext.NullTranslations()
    return gettext.translation(DOMAIN, LOCALES, languages=[lang], fallback=True)


@functools.cache
def available() -> tuple[str, ...]:
    """English first, then every language with a compiled catalog, by code."""
    found = sorted(p.parent.parent.name for p in LOCALES.glob(f"*/LC_MESSAGES/{DOMAIN}.mo"))
    return (SOURCE, *[lang for lang in found if lang != SOURCE])


def own_name(lang: str) -> str:
    """A language's name in itself ("Deutsch"), from its catalog."""
    name = catalog(lang).gettext(OWN_NAME)
    return "English" if lang == SOURCE or name == OWN_NAME else name


def language() -> str:
    return _current.get()


def use(lang: str) -> None:
    """The language of the rest of this run (of this thread's context)."""
    _current.set(lang if lang in available() else SOURCE)


@contextmanager
def using(lang: str) -> Iterator[None]:
    token = _current.set(lang if lang in available() else SOURCE)
    try:
        yield
    finally:
        _current.reset(token)


def from_locale(locale: str | None) -> str | None:
    """A browser's language tag ("de-DE", "de", "en_US") -> an available language, or None."""
    if not locale:
        return None
    code = locale.replace("_", "-").split("-")[0].lower()
    return code if code in available() else None


def _(message: str) -> str:
    """`message` in the current language (as written when its catalog lacks it)."""
    return catalog(_current.get()).gettext(message)


def marks() -> str:
    """The current language's decimal mark, then its thousands mark (plotly's `separators`): ".," or ",."."""
    translations = catalog(_current.get())
    decimal, thousands = translations.gettext(DECIMAL_MARK), translations.gettext(THOUSANDS_MARK)
    return ("." if decimal == DECIMAL_MARK else decimal) + ("," if thousands == THOUSANDS_MARK else thousands)


def num(value: float, spec: str = "") -> str:
    """A number written as the current language writes it: num(0.912, ".2f") is "0.91" in English and
    "0,91" in German; num(0.08, ".0%") "8%" and "8 %"; num(1000, ",") "1,000" and "1.000"."""
    decimal, thousands = marks()
    text = format(value, spec).translate(str.maketrans({".": decimal, ",": thousands}))
    percent = catalog(_current.get()).gettext(PERCENT)
    if text.endswith("%") and percent != PERCENT:
        text = percent.format(n=text[:-1])
    return text


def ngettext(singular: str, plural: str, n: int) -> str:
    """The form for `n` ("1 answer", "2 answers") in the current language; format it after."""
    return catalog(_current.get()).ngettext(singular, plural, n)


class Later(str):
    """A text and its arguments, put into words where it is shown, in the language of that moment:
    `str()` and `format()` of it translate; as a plain string (`in`, `==`, `+`) it is the English."""
    template: str
    args: dict[str, Any]

    def __new__(cls, template: str, **args: Any) -> Later:
        text = super().__new__(cls, template.format(**args))
        text.template, text.args = template, args
        return text

    def __str__(self) -> str:
        return _(self.template).format(**self.args)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __reduce__(self) -> tuple:
        return _later, (self.template, self.args)


def _later(template: str, args: dict[str, Any]) -> Later:
    return Later(template, **args)
