"""A teacher's new sentence, decoded in every app process while the teacher's own run decodes it.

A follower's page changes once the teacher's view does, and the view changes when the teacher's run ends
(app/classroom.py). A follower on the teacher's own process then finds the sentence decoded; one on another
process began decoding it only then, after the teacher's whole run. So a teacher's run that is about to decode
a sentence first says what (app/sentence.py: ClassStore.announce, the class's View.coming, `say` here). Every
app process whose followers wait on the class bell reads the class's view several times a second (app/bell.py)
and, on an announcement it has not heard yet, decodes that sentence with the same options in a thread of its
own (`Heard`), into the process's cache, where its followers' runs find it, with what the teacher's page
computes from it for every session alike (app/pages.py: Page.ahead; the step page's greedy decoding and its
attribution). On the teacher's process the two are one computation (the cache computes a key once).
BENCHMARKS.md, session 52: what it changes for a class.

An announcement is checked like a link from outside (`read`): valid options, a known precision, text of bounded
length; the app also checks the checkpoint is one it serves. Anything else is ignored. No Streamlit here.
"""
from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable

from model.inference.options import DecodeOptions
from model.inference.precision import PRECISIONS
from serving.once import Once

HEARD_KEPT = 32          # announcements remembered per process (one decoding each, however often heard)
MOST_CHARS = 2000        # an announced sentence longer than this is none the app would decode


@dataclasses.dataclass(frozen=True)
class Work:
    """What an announcement names: the sentence `text` decoded by the checkpoint at `path` with `opts` at
    `precision` (the app's resources.get_explanation), and what else the teacher's page computes from it, by name
    (app/context.py: Context.compute_ahead)."""
    path: str
    text: str
    opts: DecodeOptions
    precision: str
    also: tuple[str, ...] = ()


def say(work: Work) -> str:
    """The announcement of `work`: a JSON text (View.coming)."""
    return json.dumps({"path": work.path, "text": work.text, "opts": dataclasses.asdict(work.opts),
                       "precision": work.precision, "also": list(work.also)}, ensure_ascii=False, sort_keys=True)


def read(coming: str) -> Work | None:
    """The work an announcement names, or None when it names none the app would do (not JSON, invalid
    options, an unknown precision, an empty or too long text)."""
    try:
        raw = json.loads(coming)
        opts = DecodeOptions(**{**raw["opts"], "prefix": tuple(raw["opts"].get("prefix", ()))})
        work = Work(raw["path"], raw["text"], opts, raw["precision"], tuple(raw.get("also", ())))
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    if not (isinstance(work.path, str) and isinstance(work.text, str) and work.text.strip()
            and len(work.text) <= MOST_CHARS and work.precision in PRECISIONS
            and all(isinstance(name, str) for name in work.also)):
        return None
    return work


class Heard:
    """One process's announcements: each new one's work done once, in a thread of its own (`do(work)`), the
    last HEARD_KEPT heard remembered (a teacher going back to an earlier sentence finds it in the cache anyway)."""

    def __init__(self, do: Callable[[Work], None], kept: int = HEARD_KEPT) -> None:
        self._do, self._heard = do, Once(keep=kept)

    def hear(self, coming: str) -> threading.Thread | None:
        """`coming` read from the class (View.coming): its work started, unless heard before or none; the thread."""
        started: list[threading.Thread | None] = []
        if coming:
            self._heard.get(coming, lambda: started.append(self._start(coming)))
        return started[0] if started else None

    def _start(self, coming: str) -> threading.Thread | None:
        work = read(coming)
        if work is None:
            return None
        thread = threading.Thread(target=self._do, args=(work,), name="class-ahead", daemon=True)
        thread.start()
        return thread
