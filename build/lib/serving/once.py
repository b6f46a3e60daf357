"""Compute each key once for every thread of the process, and keep the latest few results.

For work that reports progress to the page that asked for it (a Streamlit cache may not touch
elements made outside it): the first caller computes with its own progress callback, callers
with the same key meanwhile wait for that result instead of computing it again.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class Once(Generic[T]):
    def __init__(self, keep: int = 32) -> None:
        self.keep = keep
        self._results: OrderedDict[Hashable, T] = OrderedDict()
        self._locks: dict[Hashable, threading.Lock] = {}
        self._guard = threading.Lock()

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The result for `key`, computed by `compute` if no thread has (or is computing) it."""
        with self._guard:
            if key in self._results:
                self._results.move_to_end(key)
                return self._results[key]
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            with self._guard:
                if key in self._results:
                    return self._results[key]
            result = compute()                   # an exception leaves nothing behind: the next caller retries
            with self._guard:
                self._results[key] = result
                self._locks.pop(key, None)
                while len(self._results) > self.keep:
                    self._results.popitem(last=False)
            return result

    def ready(self, key: Hashable) -> bool:
        with self._guard:
            return key in self._results
