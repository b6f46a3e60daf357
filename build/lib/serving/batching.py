"""Batching: sessions that ask for the same kind of work at about the same time share one run.

When a class opens the app together, each student's first page decodes their own sentence.
Decoded one at a time, 15 beam searches cost about 15 times one; decoded as one padded
batch they cost about a quarter of that (BENCHMARKS.md). A `Batcher` turns concurrent
calls into batches: the first caller of a group (e.g. one model and one set of decoding
options) waits `window` seconds for company, then waits for the group's previous batch to
finish, then runs everything that has arrived meanwhile (at most `max_batch` items) as one
call, and hands each caller its own result. So an idle server adds `window` to a request,
and a busy one batches by itself: whatever arrives while a batch runs forms the next.

If a batch fails, its items are retried one by one, so one bad item fails only its caller.
Pure threading; no Streamlit here.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Request:
    item: Any
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: BaseException | None = None


@dataclass
class _Group:
    run_lock: threading.Lock = field(default_factory=threading.Lock)   # one batch of this group at a time
    pending: list[_Request] = field(default_factory=list)


class Batcher:
    def __init__(self, run: Callable[[Hashable, list[Any]], list[Any]], max_batch: int = 16,
                 window: float = 0.02) -> None:
        """run(group, items) -> one result per item, in order."""
        if max_batch < 1 or window < 0:
            raise ValueError("max_batch must be >= 1 and window >= 0")
        self.run, self.max_batch, self.window = run, max_batch, window
        self._lock = threading.Lock()
        self._groups: dict[Hashable, _Group] = {}
        self.batches: deque[int] = deque(maxlen=1000)   # sizes of the latest batches (tests, benchmarks)

    def __call__(self, group: Hashable, item: Any) -> Any:
        """The result of `item`, computed in a batch with other callers of `group`."""
        req = _Request(item)
        with self._lock:
            g = self._groups.setdefault(group, _Group())
            g.pending.append(req)
            leads = len(g.pending) == 1
        if leads:
            self._lead(group, g)
        req.done.wait()
        if req.error is not None:
            raise req.error
        return req.result

    def _lead(self, group: Hashable, g: _Group) -> None:
        """Run batches of this group until the requests that came with this one are served."""
        time.sleep(self.window)                       # company arrives meanwhile
        with g.run_lock:
            while True:
                with self._lock:
                    batch, g.pending = g.pending[: self.max_batch], g.pending[self.max_batch:]
                    if not batch:
                        return
                    more = bool(g.pending)
                self._run(group, batch)
                if not more:
                    return

    def _run(self, group: Hashable, batch: list[_Request]) -> None:
        self.batches.append(len(batch))
        try:
            results = self.run(group, [r.item for r in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"a batch of {len(batch)} gave {len(results)} results")
        except Exception:                              # noqa: BLE001 - retried one by one below
            results = None
        for i, r in enumerate(batch):
            if results is not None:
                r.result = results[i]
            else:
                try:
                    r.result = self.run(group, [r.item])[0]
                except Exception as exc:               # noqa: BLE001 - handed to its caller
                    r.error = exc
            r.done.set()
