"""serving.once.Once: one computation per key across threads, a bounded memory, retry after an error."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import pytest
import torch

from serving.once import Once, tensor_bytes


def test_threads_asking_for_one_key_compute_it_once():
    once, calls = Once[int](), []

    def compute() -> int:
        calls.append(1)
        time.sleep(0.2)
        return 42
    results = []
    threads = [threading.Thread(target=lambda: results.append(once.get("k", compute))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [42] * 8 and len(calls) == 1 and once.ready("k")


def test_keeps_the_latest_and_retries_after_an_error():
    once = Once[str](keep=2)
    for key in "abc":
        once.get(key, lambda key=key: key)
    assert not once.ready("a") and once.ready("b") and once.ready("c")

    def boom() -> str:
        raise RuntimeError("no")
    with pytest.raises(RuntimeError):
        once.get("x", boom)
    assert once.get("x", lambda: "fine") == "fine"


def test_a_byte_bound_drops_the_oldest_used_and_keeps_the_newest():
    once = Once[bytes](keep=None, max_bytes=10, size=len)
    once.get("a", lambda: b"1234")
    once.get("b", lambda: b"1234")
    once.get("a", lambda: b"never")                  # used again: now b is the oldest
    once.get("c", lambda: b"1234")                   # 12 bytes: b goes
    assert once.ready("a") and not once.ready("b") and once.ready("c") and once.held() == 8
    once.get("big", lambda: b"x" * 50)               # over the bound alone: kept, everything else goes
    assert len(once) == 1 and once.ready("big") and once.held() == 50


def test_what_nobody_asked_for_in_max_idle_seconds_goes_but_the_newest_fresh_stay():
    now = [0.0]
    once = Once[str](keep=None, max_idle=120, fresh=2, clock=lambda: now[0])
    for key in "abcd":                               # a lesson's sentences, one every 30 s
        once.get(key, lambda key=key: key)
        now[0] += 30
    assert [k for k in "abcd" if once.ready(k)] == list("abcd")     # a at 0 s, now 120 s: not yet
    once.get("b", lambda: "never")                   # b asked for again at 120 s
    now[0] = 185
    once.get("e", lambda: "e")                       # a (0 s) and c (60 s) idle for over 120 s: gone
    assert [k for k in "abcde" if once.ready(k)] == list("bde") and once.held() == 0
    now[0] = 10_000                                  # a page left open: the newest two stay however long
    once.get("e", lambda: "never")
    assert [k for k in "abcde" if once.ready(k)] == list("be")     # the two asked for last
    forever = Once[str](keep=None, clock=lambda: now[0])             # without max_idle nothing expires
    forever.get("x", lambda: "x")
    now[0] += 10 ** 6
    forever.get("y", lambda: "y")
    assert forever.ready("x")


def test_tensor_bytes_counts_each_storage_once_wherever_it_is_held():
    @dataclass
    class Held:
        trace: dict
        steps: list
    a, b = torch.zeros(10, 4), torch.ones(3, dtype=torch.float64)
    held = Held({"a": a, "view": a[2:5], "b": b}, [(a.T, "label"), {1.5}])
    assert tensor_bytes(held) == 10 * 4 * 4 + 3 * 8
    table = torch.zeros(100, 8)                          # a model's buffer: a slice of it costs the slice
    assert tensor_bytes({"positional": table[:5], "b": b}) == 5 * 8 * 4 + 3 * 8
    assert tensor_bytes("no tensors") == 0


@dataclass
class _Step:                      # as a decoded sentence's step record: numbers in lists, a tensor or none
    tokens: list[int]
    top_k: list[tuple[int, float]]
    label: str | None
    attn: torch.Tensor | None
    extra: object


@dataclass
class _Unreadable:
    held: list[NoSuchType]        # noqa: F821 - an annotation that cannot be resolved: every field is looked into
    count: int


def test_tensor_bytes_skips_fields_declared_without_tensors_and_counts_the_others():
    step = _Step([1, 2], [(3, 0.5)], "x", torch.zeros(4), [torch.zeros(2, dtype=torch.float64)])
    assert tensor_bytes([step, step]) == 4 * 4 + 2 * 8
    assert tensor_bytes(_Step([], [], None, None, None)) == 0
    assert tensor_bytes(_Unreadable([torch.zeros(3)], 1)) == 3 * 4
    liar = _Step([torch.zeros(5)], [], None, None, None)   # a tensor where the annotation says numbers: not seen
    assert tensor_bytes(liar) == 0
