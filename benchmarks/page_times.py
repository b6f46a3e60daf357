"""Every page's script time in AppTest, for one checkout: the first run of each page on a
sentence (the decoding cached, the page's figures not) and a second run of it (what a student
pays on coming back, or a class on one link after the first student). The sentence is typed on
the explorer, so its first run includes decoding it.

  .venv/bin/python -m benchmarks.page_times [--root DIR] [--rounds 5] [--checkpoints DIR] [--lang de]

--root: the checkout whose app is timed (default: this one), so that two builds can be timed
by the same driver, one process each, in the order A B A B. The shipped checkpoints by default.
Reported per page: the median over rounds of the first and the second run, in ms. Each round
uses a new sentence (nothing cached from the round before but the model). --lang: the interface
language, as a link's `lang=` sets it (a checkout from before i18n/ ignores it). --languages en,de:
each page's rerun timed in every language in turn (--rounds times), one session per language.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from benchmarks.class_load import SENTENCES  # ~12-20 tokens each, all different

HERE = Path(__file__).resolve().parent.parent
PAGES = ("explore", "overview", "lesson", "step", "positional", "masks", "head", "knockout", "card")


def open_page(at, slug: str) -> float:
    """Seconds of one run of page `slug` (as a click in the page menu asks for it)."""
    from streamlit.util import calc_hash
    at._page_hash = calc_hash(slug)        # AppTest has no public switch to a callable page
    start = time.perf_counter()
    at.run()
    seconds = time.perf_counter() - start
    if at.exception:
        raise RuntimeError(f"{slug}: {at.exception[0].message}")
    return seconds


def measure(root: Path, rounds: int, lang: str | None = None) -> dict[str, dict[str, float]]:
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_file(str(root / "app" / "main.py"), default_timeout=300)
    if lang:
        at.query_params["lang"] = lang
    at.run()
    times: dict[str, dict[str, list[float]]] = {p: {"first": [], "again": []} for p in PAGES}
    for r in range(rounds):
        open_page(at, "explore")
        at.text_input(key="text").set_value(SENTENCES[r % len(SENTENCES)])
        start = time.perf_counter()
        at.run()                                  # the explorer's first run includes decoding the sentence
        times["explore"]["first"].append(time.perf_counter() - start)
        times["explore"]["again"].append(open_page(at, "explore"))
        for slug in PAGES[1:]:
            times[slug]["first"].append(open_page(at, slug))
            times[slug]["again"].append(open_page(at, slug))
    return {p: {k: round(1000 * statistics.median(v), 1) for k, v in t.items()} for p, t in times.items()}


def compare_languages(root: Path, languages: list[str], rounds: int) -> dict[str, dict[str, float]]:
    """One session per language on the same sentence; each page's rerun timed in turn in every
    language, `rounds` times (interleaved, so that the machine's drift falls on all alike)."""
    from streamlit.testing.v1 import AppTest
    sessions = {}
    for lang in languages:
        at = AppTest.from_file(str(root / "app" / "main.py"), default_timeout=300)
        at.query_params["lang"] = lang
        at.run()
        sessions[lang] = at
    times: dict[str, dict[str, list[float]]] = {p: {lang: [] for lang in languages} for p in PAGES}
    for slug in PAGES:
        for at in sessions.values():
            open_page(at, slug)                               # first runs: figures built, not timed
        for _ in range(rounds):
            for lang, at in sessions.items():
                times[slug][lang].append(open_page(at, slug))
    return {p: {lang: round(1000 * statistics.median(v), 2) for lang, v in t.items()} for p, t in times.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", default=str(HERE), help="the checkout to time (default: this one)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--checkpoints", help="checkpoints directory (default: the checkout's checkpoints/)")
    p.add_argument("--lang", help="the interface language (default: the app's, English)")
    p.add_argument("--languages", help="e.g. en,de: each page's rerun in each language in turn, medians")
    a = p.parse_args(argv)
    root = Path(a.root).resolve()
    checkpoints = Path(a.checkpoints).resolve() if a.checkpoints else root / "checkpoints"
    os.environ["TRANSFORMER_CHECKPOINTS"] = str(checkpoints)
    os.chdir(root)
    sys.path.insert(0, str(root))
    for name in [m for m in sys.modules if m == "app" or m.startswith(("app.", "model", "figures", "serving", "i18n"))]:
        del sys.modules[name]
    if a.languages:
        print(json.dumps({"root": str(root), "ms": compare_languages(root, a.languages.split(","), a.rounds)}))
        return 0
    print(json.dumps({"root": str(root), "lang": a.lang, "ms": measure(root, a.rounds, a.lang)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
