"""serving.once.Once: one computation per key across threads, a bounded memory, retry after an error."""
from __future__ import annotations

import threading
import time

import pytest

from serving.once import Once


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
