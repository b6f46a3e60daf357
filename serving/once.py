"""Compute each key once for every thread of the process, and keep the latest results within a bound.

For work that reports progress to the page that asked for it (a Streamlit cache may not touch
elements made outside it), and for the app's shared caches of tensors (app/resources.py), which are
bounded by the bytes they hold rather than by a count: the first caller computes (with its own
progress callback), callers with the same key meanwhile wait for that result instead of computing it
again. Kept results are dropped oldest-used first once there are more than `keep` of them or, with a
`size` function, once they hold more than `max_bytes` together (the newest is always kept), and, with
`max_idle`, once nobody has asked for them for that many seconds (looked at on each `get`; the newest `fresh`
are kept however old, so that a page left open a while finds its own results): what a class has moved on
from goes, and a process holds what its students are looking at, not the whole lesson.
"""
from __future__ import annotations

import dataclasses
import functools
import threading
import time
import types
import typing
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

import torch

T = TypeVar("T")


class Once(Generic[T]):
    def __init__(self, keep: int | None = 32, max_bytes: int | None = None,
                 size: Callable[[T], int] | None = None, max_idle: float | None = None, fresh: int = 1,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.keep, self.max_bytes, self.size = keep, max_bytes, size
        self.max_idle, self.fresh, self.clock = max_idle, max(1, fresh), clock
        self._results: OrderedDict[Hashable, T] = OrderedDict()     # oldest used first
        self._sizes: dict[Hashable, int] = {}
        self._used: dict[Hashable, float] = {}                       # key -> when it was last asked for
        self._locks: dict[Hashable, threading.Lock] = {}
        self._guard = threading.Lock()

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The result for `key`, computed by `compute` if no thread has (or is computing) it."""
        with self._guard:
            if key in self._results:
                self._results.move_to_end(key)
                self._used[key] = self.clock()
                self._expire()
                return self._results[key]
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            with self._guard:
                if key in self._results:
                    return self._results[key]
            result = compute()                   # an exception leaves nothing behind: the next caller retries
            nbytes = self.size(result) if self.size else 0
            with self._guard:
                self._results[key], self._sizes[key], self._used[key] = result, nbytes, self.clock()
                self._locks.pop(key, None)
                self._shrink()
                self._expire()
            return result

    def _shrink(self) -> None:
        while len(self._results) > 1 and self._over():
            self._drop_oldest()

    def _expire(self) -> None:
        """Drop what nobody asked for in max_idle seconds but the newest `fresh` (oldest used first: stop at the
        first one asked for since)."""
        if self.max_idle is None:
            return
        since = self.clock() - self.max_idle
        while len(self._results) > self.fresh and self._used[next(iter(self._results))] < since:
            self._drop_oldest()

    def _drop_oldest(self) -> None:
        old, _ = self._results.popitem(last=False)
        del self._sizes[old], self._used[old]

    def _over(self) -> bool:
        return ((self.keep is not None and len(self._results) > self.keep)
                or (self.max_bytes is not None and self.held() > self.max_bytes))

    def ready(self, key: Hashable) -> bool:
        with self._guard:
            return key in self._results

    def held(self) -> int:
        """The bytes the kept results hold together, as `size` counts them (0 without one)."""
        return sum(self._sizes.values())

    def __len__(self) -> int:
        return len(self._results)


def tensor_bytes(obj: Any) -> int:
    """The bytes of the tensors `obj` holds (in dataclass fields, dicts, lists, tuples, sets): what a result of
    the model costs a cache. Each storage counts once, and no more than its views in `obj` cover (a slice of a
    model's buffer, the positional encodings' table, costs only the slice). Other objects count nothing."""
    held: dict[tuple[int, int], int] = {}          # storage -> bytes its views cover (at most the storage's)
    todo = [obj]
    while todo:
        o = todo.pop()
        if isinstance(o, torch.Tensor):
            storage = o.untyped_storage()
            key = (storage.data_ptr(), storage.nbytes())
            held[key] = min(storage.nbytes(), held.get(key, 0) + o.numel() * o.element_size())
        elif isinstance(o, dict):
            todo.extend(o.values())
        elif isinstance(o, list | tuple | set | frozenset):
            todo.extend(o)
        elif not isinstance(o, _LEAVES):
            todo.extend(getattr(o, name) for name in _field_names(type(o)))
    return sum(held.values())


_LEAVES = (str, int, float, bool, type(None), bytes)      # hold no tensor: not looked into


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    """The fields of a dataclass that may hold a tensor (none for any other class), looked up once per class. A
    decoded sentence's step records are thousands of small dataclasses: `dataclasses.fields` on each was ~5 % of a
    first page, and walking their token lists and top-k pairs ~2.5 ms an explanation (BENCHMARKS.md, session 41), so
    a field whose annotation holds no tensor (`int`, `list[tuple[int, float]]`, ...) is not looked into. A field
    whose annotation cannot be read is."""
    if not dataclasses.is_dataclass(cls):
        return ()
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - an annotation naming what this module cannot import: look into every field
        hints = {}
    return tuple(f.name for f in dataclasses.fields(cls) if f.name not in hints or _may_hold_tensor(hints[f.name]))


def _may_hold_tensor(hint: Any) -> bool:
    """False only for a type built from _LEAVES alone (in lists, tuples, dicts, sets, unions, Literal)."""
    if hint in _LEAVES:
        return False
    args, origin = typing.get_args(hint), typing.get_origin(hint)
    if origin is typing.Literal:
        return False
    if origin in (list, tuple, dict, set, frozenset, typing.Union, types.UnionType) and args:
        return any(_may_hold_tensor(a) for a in args if a is not Ellipsis)
    return True
