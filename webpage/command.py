"""A lesson anyone can open without a server: one self-contained HTML file.

  transformer-explained html "The animal didn't cross the street because it was too tired." -o animal.html
  transformer-explained html --lesson lesson.txt --lang de -o lektion.html
  python -m model.html "A dog runs on the beach." --checkpoint multi30k-en-de

The file holds the translation, every layer and head of the three attention kinds, greedy and beam
decoding step by step (the beam tree, the top-k of every step), what the model used, the positional
encoding, the masks and the model in short, each with a link back to the app's page for the same state.
It opens from disk in any current browser with no network: plotly.js and the data are inside it.

A lesson file (--lesson) has one sentence or app link per line (a link as the app's address bar shows it,
e.g. http://localhost:8501/explore?text=A+dog.&checkpoint=multi30k-en-de); empty lines and lines that
start with # are skipped. Unusable input (an over-long sentence, an unknown model, an unwritable output, a
broken link) gets one line on stderr and exit code 2, and no file is written.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import i18n
import webpage.content as content
import webpage.page as page
from model.commands import registry as command
from model.commands.shared import DEFAULT_CHECKPOINT, fail
from model.inference.pipeline import InputError, source_ids
from model.storage import places
from model.storage.checkpoint import Checkpoint, CheckpointError, load_checkpoint
from webpage.content import Request


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=command.prog("model.html"), description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sentences", nargs="*", metavar="SENTENCE", help="sentences to put in the file, in order")
    p.add_argument("--lesson", metavar="FILE",
                   help="a file of sentences or app links, one per line (after any SENTENCE given)")
    p.add_argument("-o", "--out", default="lesson.html", help="the HTML file to write (default lesson.html)")
    p.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT,
                   help=f"the model of sentences that name none (a link may name its own): a checkpoint directory "
                        f"or the name of a shipped or your own one (default {DEFAULT_CHECKPOINT})")
    p.add_argument("--lang", default=i18n.SOURCE, choices=i18n.available(),
                   help=f"the language of the page's words (default {i18n.SOURCE})")
    p.add_argument("--title", help="the page's title (default: names the sentence, or the number of sentences)")
    p.add_argument("--large", action="store_true", help="open in large letters (a projector); the page can switch")
    p.add_argument("--app-url", default=content.APP_URL,
                   help=f"where the file's links to the app point (default {content.APP_URL})")
    return p


def read_lesson(path: str, default_checkpoint: str) -> list[Request]:
    """The sentences and app links of a lesson file, one per line (raises ValueError naming the line)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"--lesson {path}: cannot read it ({exc.__class__.__name__}: {exc})") from None
    out = []
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        out.append(from_link(line, default_checkpoint, f"{path}, line {n}") if is_link(line)
                   else Request(line, default_checkpoint))
    return out


def is_link(line: str) -> bool:
    return line.startswith(("http://", "https://")) or (line.startswith("/") and "?" in line)


def from_link(link: str, default_checkpoint: str, where: str) -> Request:
    """An app link (its address bar) -> the sentence and model it shows."""
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(link).query)
    text = (query.get(content.LINK["text"]) or [""])[0].strip()
    if not text:
        raise ValueError(f"{where}: the link has no sentence (its {content.LINK['text']}=... is missing or empty); "
                         "copy the address bar of the app's page again")
    return Request(text, (query.get(content.LINK["checkpoint"]) or [default_checkpoint])[0])


def loader() -> Callable[[str], Checkpoint]:
    """Checkpoints by name or directory, each loaded once."""
    loaded: dict[str, Checkpoint] = {}

    def load(name: str) -> Checkpoint:
        if name not in loaded:
            loaded[name] = load_checkpoint(places.resolve(name))
        return loaded[name]

    return load


def check_output(out: Path) -> None:
    """Fails (exit 2) before any work when `out` cannot be written."""
    parent = out.parent if str(out.parent) else Path(".")
    if out.is_dir():
        fail(f"--out {out}: is a directory; name a file, e.g. {out / 'lesson.html'}")
    if not parent.is_dir():
        fail(f"--out {out}: the folder {parent} does not exist; create it or write elsewhere")
    if not os.access(parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        fail(f"--out {out}: not writable here; choose another place")


def write_whole(out: Path, text: str) -> None:
    """Write the file whole or not at all (a temporary file beside it, renamed)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent if str(out.parent) else ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    requests = [Request(s.strip(), args.checkpoint) for s in args.sentences]
    if any(not r.text for r in requests):
        fail("an empty sentence: give each SENTENCE some words")
    try:
        requests += read_lesson(args.lesson, args.checkpoint) if args.lesson else []
    except ValueError as exc:
        fail(str(exc))
    if not requests:
        fail("no sentence: give one or more SENTENCE, or --lesson FILE (see --help)")
    out = Path(args.out)
    check_output(out)

    load = loader()
    for i, request in enumerate(requests, 1):        # every sentence checked before the work starts
        try:
            source_ids(load(request.checkpoint), request.text)
        except CheckpointError as exc:
            fail(f"sentence {i}: {exc} (the shipped and your own models: {', '.join(places.known_names())})")
        except InputError as exc:
            fail(f"sentence {i}: {exc}")

    def progress(i: int, n: int, text: str) -> None:
        print(f"[{i + 1}/{n}] {text if len(text) <= 70 else text[:69] + '…'}", file=sys.stderr, flush=True)

    text = page.build(requests, load, lang=args.lang, app_url=args.app_url, title=args.title, large=args.large,
                      on_progress=progress)
    try:
        write_whole(out, text)
    except OSError as exc:
        fail(f"--out {out}: {exc.strerror or exc}")
    size = out.stat().st_size
    print(f"wrote {out} ({size / 1e6:.1f} MB, {len(requests)} sentence{'s' if len(requests) > 1 else ''}); "
          f"open it in a browser, no server needed", file=sys.stderr)
    return 0


if __name__ == "__main__":  # `python -m model.html`
    sys.exit(main())
