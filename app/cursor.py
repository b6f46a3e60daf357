"""The step-through page's cursor: one object owns which step is shown.

It belongs to one decoding (the sentence and the decoding settings, as a key): when the
decoding changes it goes back to step 0, unless a link asked for a step (`pending`),
which applies to the first decoding shown. When the student leaves the page and comes
back to the same decoding, it is where they left it. Stored in session state by
app/state.py; the page's buttons and slider only call its methods.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class StepCursor:
    decoding: str | None = None   # key of the decoding the step belongs to
    step: int = 0
    playing: bool = False
    pending: int | None = None    # a step asked for by a link, not yet applied

    def follow(self, decoding: str, n_steps: int) -> int:
        """Point at `decoding` (n_steps steps long); returns the step to show."""
        if decoding != self.decoding:
            self.decoding, self.playing = decoding, False
            self.step = self.pending if self.pending is not None else 0
            self.pending = None
        self.step = max(0, min(self.step, n_steps - 1))
        return self.step

    def go(self, step: int, n_steps: int) -> None:
        self.step = max(0, min(step, n_steps - 1))

    def move(self, delta: int, n_steps: int) -> None:
        self.go(self.step + delta, n_steps)

    def reset(self) -> None:
        self.step, self.playing = 0, False

    def toggle_play(self) -> None:
        self.playing = not self.playing

    def tick(self, n_steps: int) -> bool:
        """While playing: one step on. Returns False (and stops) at the last step."""
        if self.playing and self.step < n_steps - 1:
            self.step += 1
            return True
        self.playing = False
        return False
