"""Wall-clock laps of a computation's stages, for the numbers a tool reports."""
from __future__ import annotations

import time


class Laps:
    """laps[name] = seconds since the previous lap (or since made)."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name], self._last = now - self._last, now
