"""Admission: at most `capacity` heavy page runs at once per process, the rest wait in line.

A heavy run is one that may compute: a new sentence, new decoding options or another page
(app/pages.py decides). Without a gate, 30 students' first pages run as 30 threads that
share one core and all finish late, and every light run (a layer change, a Next press,
a few tens of milliseconds of work) shares the core with them too. With it, heavy runs go
through `capacity` at a time in arrival order, each waiting student sees their place in
line, light runs never wait, and the line is bounded: past `max_waiting` a student is told
that the server is full instead of joining.

Pure threading; no Streamlit here (the page shows what `on_wait` is given).
"""
from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class Waiting:
    """What a waiting student is told: their place (1 = next) and a time estimate."""
    position: int
    seconds: float


class Gate:
    def __init__(self, capacity: int, max_waiting: int, poll: float = 0.25) -> None:
        if capacity < 1 or max_waiting < 0:
            raise ValueError("capacity must be >= 1 and max_waiting >= 0")
        self.capacity, self.max_waiting, self.poll = capacity, max_waiting, poll
        self._cond = threading.Condition()
        self._running = 0
        self._line: deque[int] = deque()
        self._tickets = itertools.count()
        self.mean_run = 0.3          # seconds per heavy run, a moving average of the measured ones
        self.waited = 0              # runs that had to wait (for tests and the load benchmark)
        self.turned_away = 0

    @property
    def waiting(self) -> int:
        with self._cond:
            return len(self._line)

    @property
    def running(self) -> int:
        with self._cond:
            return self._running

    @contextmanager
    def admitted(self, on_wait: Callable[[Waiting], None] = lambda w: None, quiet: float = 0.0,
                 still: Callable[[], None] = lambda: None) -> Iterator[bool]:
        """Yields True once this run may go ahead (False: the line is full, it may not).
        `on_wait` is called with the place in line whenever it changes and every second, once the run has waited
        `quiet` seconds (before that, `still` instead: a short wait need not be told); an exception from either
        (Streamlit stopping a rerun) leaves the line."""
        if not self._enter(on_wait, quiet, still):
            yield False
            return
        start = time.monotonic()
        try:
            yield True
        finally:
            self._leave(time.monotonic() - start)

    def _enter(self, on_wait: Callable[[Waiting], None], quiet: float, still: Callable[[], None]) -> bool:
        with self._cond:
            if self._running < self.capacity and not self._line:
                self._running += 1
                return True
            if len(self._line) >= self.max_waiting:
                self.turned_away += 1
                return False
            ticket = next(self._tickets)
            self._line.append(ticket)
            self.waited += 1
        try:
            self._wait_for_turn(ticket, on_wait, quiet, still)
        except BaseException:
            with self._cond:
                if ticket in self._line:
                    self._line.remove(ticket)
                self._cond.notify_all()
            raise
        return True

    def _wait_for_turn(self, ticket: int, on_wait: Callable[[Waiting], None], quiet: float,
                       still: Callable[[], None]) -> None:
        told: tuple[int, float] = (-1, 0.0)
        since = time.monotonic()
        while True:
            with self._cond:
                if self._may_enter(ticket):
                    self._line.popleft()
                    self._running += 1
                    self._cond.notify_all()      # the next in line recomputes its place
                    return
                place = self._line.index(ticket) + 1
                news = Waiting(place, place * self.mean_run / self.capacity)
            now = time.monotonic()
            if place != told[0] or now - told[1] >= 1.0:
                if now - since >= quiet:
                    on_wait(news)                # outside the lock: it draws on the page
                else:
                    still()
                told = (place, now)
            with self._cond:
                if not self._may_enter(ticket):          # re-checked under the lock: a turn that came
                    self._cond.wait(self.poll)           # while on_wait drew is not slept through

    def _may_enter(self, ticket: int) -> bool:
        """Under the lock: this ticket is first in line and a place is free."""
        return self._line[0] == ticket and self._running < self.capacity

    def _leave(self, seconds: float) -> None:
        with self._cond:
            self._running -= 1
            self.mean_run = 0.8 * self.mean_run + 0.2 * seconds
            self._cond.notify_all()


class PageRate:
    """One student's new pages (sentences, pages computed afresh) in a sliding window: while the server is
    busy, a student who had `limit` of them in the last `window` seconds waits until the oldest leaves it."""

    def __init__(self, limit: int, window: float = 60.0) -> None:
        if limit < 1 or window <= 0:
            raise ValueError("limit must be >= 1 and window > 0")
        self.limit, self.window = limit, window
        self._times: deque[float] = deque()

    def _forget(self, now: float) -> None:
        while self._times and now - self._times[0] >= self.window:
            self._times.popleft()

    def wait(self, now: float, busy: bool) -> float:
        """Seconds until this student's next new page may go (0: at once)."""
        self._forget(now)
        if not busy or len(self._times) < self.limit:
            return 0.0
        return max(0.0, self.window - (now - self._times[-self.limit]))

    def count(self, now: float) -> None:
        self._forget(now)
        self._times.append(now)
