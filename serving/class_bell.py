"""The class bell: a follower's page is told when its class changes, instead of asking every half second.

A follower's browser holds one request open, `GET /_class/bell?code=CODE&known=VERSION` (app/bell.py, a route
of the app's own server), which answers as soon as the class's version differs from `known` (a new teacher
view, a poll opened or revealed), or with `known` after WAIT_SECONDS (then the browser asks again). Its page
then checks its class as before (app/classroom.py) and applies the newer view.

However many students wait, each app process reads a class's version once per WATCH_SECONDS (one watcher
per class, only while someone waits on it) and wakes all its waiters at once: the store sees one read per
class and process, and an idle follower costs the server nothing between two changes.
"""
from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

WATCH_SECONDS = 0.05        # how often a class's version is read while someone waits on it
WAIT_SECONDS = 25.0         # a request unanswered this long answers "no change" (proxies cut idle ones)
MOST_WAITING = 5000         # requests held at once per process; past it, "busy" (the page checks on its own)

GONE = -1                   # the version answered for a class that has ended


class Busy(Exception):
    """More requests wait than MOST_WAITING."""


class Bell:
    """Waiters per class and one watcher task per class that has waiters (all on one event loop).

    read(code) -> the class's version (GONE when it has ended); it may block (a store over the network:
    run in a worker thread) and raise when the store is out of reach (then the last version read holds)."""

    def __init__(self, read: Callable[[str], int], watch: float = WATCH_SECONDS, most: int = MOST_WAITING) -> None:
        self._read, self._watch, self._most = read, watch, most
        self._versions: dict[str, int] = {}
        self._rung: dict[str, asyncio.Event] = {}
        self._waiting: dict[str, int] = {}
        self._watchers: dict[str, asyncio.Task] = {}

    @property
    def waiting(self) -> int:
        return sum(self._waiting.values())

    async def wait(self, code: str, known: int, timeout: float = WAIT_SECONDS) -> int:
        """The class's version once it is not `known` (GONE: the class ended), else `known` after `timeout`."""
        if self.waiting >= self._most:
            raise Busy(code)
        self._waiting[code] = self._waiting.get(code, 0) + 1
        try:
            if code not in self._watchers:
                self._watchers[code] = asyncio.create_task(self._watcher(code))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    while self._versions.get(code, known) == known:
                        await self._rung.setdefault(code, asyncio.Event()).wait()
            return self._versions.get(code, known)
        finally:
            self._waiting[code] -= 1
            if not self._waiting[code]:
                del self._waiting[code]
                if code not in self._watchers:            # a class that ended: its last waiter has its answer
                    self._versions.pop(code, None)

    async def _watcher(self, code: str) -> None:
        try:
            while code in self._waiting:
                try:
                    version = await asyncio.to_thread(self._read, code)
                except Exception:  # noqa: BLE001 - the store out of reach: the last version holds; the page says so
                    version = self._versions.get(code)
                if version is not None and version != self._versions.get(code):
                    self._versions[code] = version
                    rung = self._rung.pop(code, None)          # every waiter of the class wakes; later ones
                    if rung is not None:                       # wait on a new event
                        rung.set()
                if version == GONE:
                    return
                await asyncio.sleep(self._watch)
        finally:
            self._watchers.pop(code, None)
            if code not in self._waiting:
                self._versions.pop(code, None)
            rung = self._rung.pop(code, None)
            if rung is not None:
                rung.set()
