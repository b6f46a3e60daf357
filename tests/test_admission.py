"""The admission gate: capacity, arrival order, a bounded line, leaving it; and in the app,
a heavy run waits for the gate while a light one does not."""
from __future__ import annotations

import inspect
import threading
import time

import pytest
from streamlit.testing.v1 import AppTest

from serving.admission import Gate, PageRate, Waiting
from tests.support import ROOT

APP = str(ROOT / "app" / "main.py")


def hold(gate: Gate, release: threading.Event, entered: threading.Event | None = None) -> threading.Thread:
    """A thread that takes a place through the gate and keeps it until `release` is set."""
    def run() -> None:
        with gate.admitted() as ok:
            assert ok
            if entered is not None:
                entered.set()
            release.wait(10)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def wait_until(cond, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_runs_go_through_in_arrival_order_capacity_at_a_time():
    gate = Gate(capacity=2, max_waiting=10, poll=0.02)
    release = threading.Event()
    holders = [hold(gate, release) for _ in range(2)]
    wait_until(lambda: gate.running == 2)
    order: list[str] = []
    told: dict[str, list[int]] = {}
    lock = threading.Lock()

    def student(name: str) -> None:
        def on_wait(w: Waiting) -> None:
            told.setdefault(name, []).append(w.position)
        with gate.admitted(on_wait) as ok:
            assert ok
            with lock:
                order.append(name)
            time.sleep(0.05)

    threads = []
    for i, name in enumerate("abcd"):
        threads.append(threading.Thread(target=student, args=(name,), daemon=True))
        threads[-1].start()
        wait_until(lambda i=i: gate.waiting == i + 1)   # each is in line before the next arrives
    assert gate.running == 2 and order == []             # nobody passes a full gate
    release.set()
    for t in threads + holders:
        t.join(5)
    assert order == list("abcd")
    assert told["a"][0] == 1 and told["d"][0] == 4        # each was told their place on arrival
    assert told["d"] == sorted(told["d"], reverse=True)   # and it only ever moved forward
    assert gate.running == 0 and gate.waiting == 0 and gate.waited == 4


def test_a_full_line_turns_the_next_student_away_at_once():
    gate = Gate(capacity=1, max_waiting=1, poll=0.02)
    release = threading.Event()
    holder = hold(gate, release)
    wait_until(lambda: gate.running == 1)
    waiter = threading.Thread(target=lambda: gate.admitted().__enter__(), daemon=True)
    waiter.start()
    wait_until(lambda: gate.waiting == 1)
    with gate.admitted() as ok:                 # answered while the holder still holds: it did not wait
        assert ok is False and holder.is_alive() and gate.running == 1
    assert gate.turned_away == 1
    release.set()
    holder.join(5)


def test_a_stopped_student_leaves_the_line():
    """Streamlit stops a waiting run (a rerun, a closed tab) by raising from the page's next
    call, here on_wait: that student must leave the line and the next one move up."""
    gate = Gate(capacity=1, max_waiting=5, poll=0.02)
    release = threading.Event()
    holder = hold(gate, release)
    wait_until(lambda: gate.running == 1)

    class Stopped(Exception):
        pass

    stop = threading.Event()

    def leaver() -> None:
        def on_wait(w: Waiting) -> None:
            if stop.is_set():
                raise Stopped
        with pytest.raises(Stopped):
            with gate.admitted(on_wait):
                pass
    t = threading.Thread(target=leaver, daemon=True)
    t.start()
    wait_until(lambda: gate.waiting == 1)
    places: list[int] = []
    second = threading.Thread(target=lambda: gate.admitted(lambda w: places.append(w.position)).__enter__(),
                              daemon=True)
    second.start()
    wait_until(lambda: gate.waiting == 2)
    stop.set()
    t.join(5)
    wait_until(lambda: gate.waiting == 1)
    wait_until(lambda: places[-1:] == [1])
    release.set()
    holder.join(5)
    second.join(5)
    assert gate.waiting == 0


def test_a_short_wait_is_not_told_and_a_longer_one_is_told_its_place():
    """`quiet`: a run in line for less than that is told nothing (a class's new sentence puts each follower in line
    for a fraction of a second: a note at every move was ~100 messages a process); `still` is asked instead, and a
    run it stops leaves the line."""
    gate = Gate(capacity=1, max_waiting=5, poll=0.02)
    release = threading.Event()
    holder = hold(gate, release)
    wait_until(lambda: gate.running == 1)
    told: list[Waiting] = []
    asked: list[float] = []
    waiter = threading.Thread(target=lambda: gate.admitted(told.append, quiet=0.4,
                                                           still=lambda: asked.append(time.monotonic())).__enter__(),
                              daemon=True)
    start = time.monotonic()
    waiter.start()
    wait_until(lambda: gate.waiting == 1)
    time.sleep(0.2)
    assert told == [] and asked                     # quiet: only asked whether it still waits
    wait_until(lambda: told, timeout=3)             # then its place, at the next second's word
    assert told[0].position == 1 and time.monotonic() - start >= 0.4

    class Stopped(Exception):
        pass

    def stop() -> None:
        raise Stopped
    leaver = threading.Thread(target=lambda: pytest.raises(Stopped, gate.admitted(quiet=10.0, still=stop).__enter__),
                              daemon=True)
    leaver.start()
    leaver.join(5)
    assert not leaver.is_alive() and gate.waiting == 1          # stopped while quiet: it left the line at once
    release.set()
    holder.join(5)
    waiter.join(5)
    assert gate.waiting == 0


def test_in_the_app_a_new_page_waits_for_the_gate_and_a_layer_change_does_not(app_checkpoints, monkeypatch):
    from app import resources
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()                                             # the overview, admitted at once
    assert not at.exception
    gate = resources.admission_gate()
    release, entered = threading.Event(), threading.Event()
    holders = [hold(gate, release, entered) for _ in range(gate.capacity)]   # other students' pages
    wait_until(lambda: gate.running == gate.capacity)
    waited = gate.waited
    in_line = []

    def release_once_in_line() -> None:      # (its sentence is decoded first, before the line)
        wait_until(lambda: gate.waiting == 1, timeout=60)
        in_line.append(time.monotonic())
        time.sleep(0.5)
        release.set()
    threading.Thread(target=release_once_in_line, daemon=True).start()
    at.text_input(key="text").set_value("A dog runs on the beach.").run()     # new sentence: heavy
    assert in_line and time.monotonic() - in_line[0] >= 0.5, "the run did not wait for the gate"
    assert not at.exception and gate.waited == waited + 1
    assert not [i for i in at.info if "in line" in i.value]                   # the note is gone
    for t in holders:
        t.join(5)
    release2 = threading.Event()
    holders = [hold(gate, release2) for _ in range(gate.capacity)]
    wait_until(lambda: gate.running == gate.capacity)
    start = time.monotonic()
    at.run()                                             # the same page and sentence again: light
    assert time.monotonic() - start < 5 and gate.waited == waited + 1 and not at.exception
    release2.set()
    for t in holders:
        t.join(5)


def test_a_turn_that_comes_while_the_note_is_drawn_is_not_slept_through():
    """The place in line is drawn outside the lock; a student whose turn comes meanwhile must
    go in at once, not after the next poll (a lost wake-up cost up to `poll` per hand-over)."""
    gate = Gate(1, 5, poll=30.0)          # a lost wake-up would cost 30 s; going in at once takes ~0.2 s
    release, entered = threading.Event(), threading.Event()
    holder = hold(gate, release, entered)
    wait_until(lambda: gate.running == 1)
    admitted_at = []

    def slow_note(w):                     # the holder leaves while this student's note is drawn
        release.set()
        time.sleep(0.2)

    def student():
        with gate.admitted(slow_note):
            admitted_at.append(time.monotonic())
    start = time.monotonic()
    t = threading.Thread(target=student)
    t.start()
    t.join(10)
    holder.join(5)
    assert admitted_at and admitted_at[0] - start < 10, admitted_at[0] - start


def test_a_students_new_pages_are_bounded_only_while_the_server_is_busy():
    rate = PageRate(limit=3, window=60.0)
    for t in (0.0, 1.0, 2.0):
        assert rate.wait(t, busy=True) == 0.0
        rate.count(t)
    assert rate.wait(10.0, busy=False) == 0.0               # an idle server: no bound
    assert rate.wait(10.0, busy=True) == pytest.approx(50.0)     # the oldest leaves the window at 60 s
    assert rate.wait(60.0, busy=True) == 0.0
    with pytest.raises(ValueError):
        PageRate(0)


def test_in_the_app_a_student_past_the_bound_waits_with_a_countdown_while_others_wait(app_checkpoints,
                                                                                    monkeypatch):
    from app import limits, pages
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    monkeypatch.setenv("TRANSFORMER_SENTENCES_PER_MINUTE", "1")
    monkeypatch.setattr(limits, "MINUTE", 4.0)       # the window: longer than a first run on a busy machine
    monkeypatch.setattr(limits, "busy", lambda gate: True)     # as if other students were in line
    said, real_sleep = [], time.sleep

    def sleep(seconds: float) -> None:          # the waits of the countdown: time.sleep is everybody's, so only
        caller = inspect.currentframe().f_back  # app/pages.py's count (a thread of Streamlit's or of an earlier
        if caller.f_globals.get("__name__") == pages.__name__ and seconds >= 0.1:    # test may sleep meanwhile)
            said.append(seconds)
        real_sleep(seconds)
    monkeypatch.setattr(pages.time, "sleep", sleep)
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["text"] = "A dog runs."
    at.run()
    assert not at.exception and not said
    start = time.monotonic()
    at.text_input(key="text").set_value("A cat sleeps.").run()   # the second new page within the window
    assert not at.exception and said and time.monotonic() - start >= 1.0
    assert at.session_state["text"] == "A cat sleeps."
