"""A class across two machines (issue 43, item 5): two network namespaces made here, each a "machine" with its
own app process (`serving.launcher --apps-only`), one HAProxy (`--processes 0 --backend ...`) and one Redis with
a password in front; a teacher on one machine, students on both, following and a poll working; one machine's
processes killed: its students reconnect to the other and follow again, their answers kept
(serving/netns.py; benchmarks/machines.py gives the figures with 30 students)."""
from __future__ import annotations

import asyncio

import pytest

from serving import netns as machines

WHY = machines.unavailable()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"two machines cannot be made here: {WHY}")

STUDENTS = 6
SENTENCES = ["A dog runs on the beach.", "Two men play football in the park.", "A girl reads a book.",
             "An old man walks his dog.", "Children swim in a lake."]


def test_a_class_spans_two_machines_and_survives_losing_one(tmp_path):
    # warmed up as `serving.launcher` does by default: a cold process's first page holds the interpreter for
    # seconds, and on a busy machine HAProxy's checks then take it for down and move its students
    with machines.machines(2) as ms, machines.school(ms, 1, tmp_path) as school:
        got = asyncio.run(machines.lesson(school, STUDENTS, SENTENCES))
    print("two machines:", got)
    seats = got["followers_on"]
    assert sorted(seats) == ["remote1", "remote2"] and all(seats.values()), seats   # students on both
    assert got["change"]["followed"] == STUDENTS and got["change"]["missed"] == 0
    assert got["answers_before"] == STUDENTS == got["answers_after"]               # kept in the one Redis
    moved = got["moved"]
    assert moved["followers"] == seats[got["lost"]] and moved["back"] == moved["followers"], got
    assert got["all"]["back"] == STUDENTS and got["all"]["max_s"] < 30, got
    assert got["moved_now_on"] == [got["teacher_on"]]                              # on the machine left
    assert got["moved_showing_their_answer"] == moved["followers"]                 # their seat's answer

