"""A teacher's new sentence, computed ahead in every app process (serving/class_ahead.py): the announcement read back
and checked, each one worked on once, the teacher's run announcing what its page computes, and a process that hears
it computing everything a follower's page then only reads (app/bell.py)."""
from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from model.inference.options import DecodeOptions
from model.inference.precision import FP32
from serving.class_ahead import Heard, Work, read, say
from tests.support import APP, goto


def test_an_announcement_reads_back_as_its_work_and_anything_else_as_nothing():
    work = Work("checkpoints/x", "Ein Hund läuft über die Wiese.", DecodeOptions("beam", 4, record_steps=True,
                                                                                  prefix=(5, 6)), FP32, ("greedy",))
    assert read(say(work)) == work
    raw = json.loads(say(work))
    bad = ["", "not json", "[]", json.dumps({**raw, "opts": {**raw["opts"], "beam_size": 99}}),
           json.dumps({**raw, "precision": "fp7"}), json.dumps({**raw, "text": "   "}),
           json.dumps({**raw, "text": "x" * 3000}), json.dumps({**raw, "also": [1]}),
           json.dumps({k: v for k, v in raw.items() if k != "path"}), json.dumps({**raw, "path": 3})]
    assert [read(b) for b in bad] == [None] * len(bad)


def test_each_announcement_is_worked_on_once_in_a_thread_of_its_own_and_the_newest_are_remembered():
    done: list[tuple[Work, str]] = []
    heard = Heard(lambda w: done.append((w, threading.current_thread().name)), kept=2)
    a, b, c = (say(Work("p", text, DecodeOptions(), FP32)) for text in ("one", "two", "three"))
    heard.hear(a).join(5)
    assert done == [(read(a), "class-ahead")]
    assert heard.hear(a) is None and heard.hear("") is None and heard.hear("no json") is None
    heard.hear(b).join(5)
    heard.hear(c).join(5)
    assert [w.text for w, _ in done] == ["one", "two", "three"]
    heard.hear(a).join(5)                     # four newer ones since (the junk counted): heard afresh
    assert [w.text for w, _ in done] == ["one", "two", "three", "one"]


def _teacher_on_the_step_page(app_checkpoints, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    teacher = AppTest.from_file(APP, default_timeout=120).run()
    teacher.button(key="class-start").click().run()
    return goto(teacher, "step")


def test_a_teachers_new_sentence_is_announced_with_what_its_page_computes(app_checkpoints, monkeypatch):
    from app import resources
    teacher = _teacher_on_the_step_page(app_checkpoints, monkeypatch)
    m = teacher.session_state["class"]
    teacher.text_input(key="text").input("a red bird sings in the tall tree").run()
    assert not teacher.exception
    view = resources.class_store().view(m.code)
    work = read(view.coming)
    assert work is not None and work.text == "a red bird sings in the tall tree"
    assert work.also == ("greedy", "attribution") and Path(work.path).name == "multi30k-en-de"
    assert work.precision == FP32 and view.params["text"] == work.text
    student = AppTest.from_file(APP, default_timeout=120)
    student.query_params["class"] = m.code
    student.run()
    student.text_input(key="text").input("a student types their own sentence").run()
    assert resources.class_store().view(m.code).coming == view.coming      # only the teacher announces


def test_a_process_that_hears_an_announcement_computes_all_a_followers_page_then_only_reads(app_checkpoints,
                                                                                              monkeypatch):
    """The bell's watcher reads the class (here: one bell request) and hears the announcement: the decoding, the
    greedy one and the attribution are computed in its thread; a follower's Context then computes nothing."""
    from starlette.requests import Request

    from app import bell, resources
    from app.context import Context
    from app.settings import SidebarChoices
    from model.analysis.attribution import Cost
    from serving.class_store import MemoryStore
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    path = str(app_checkpoints / "multi30k-en-de")
    opts = DecodeOptions("beam", 3, record_steps=True)
    work = Work(path, "three small dogs wait at the old gate", opts, FP32, ("greedy", "attribution"))
    key = (path, FP32, work.text, opts)                    # Context.figure_key, known before any decoding
    store = MemoryStore()
    c = store.start("step", {})
    bell.ring_here(store)
    store.announce(c.code, c.secret, say(work))
    query = f"code={c.code}&token={store.bell_token(c.code)}&known=0".encode()
    answered = asyncio.run(bell.answer(Request({"type": "http", "method": "GET", "path": bell.PATH,
                                                "query_string": query, "headers": []})))
    assert answered.status_code == 200                     # the watcher read the view (version 1, not 0)
    deadline = time.monotonic() + 120
    while not resources.attribution_ready(key, Cost.TRACE) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert resources.attribution_ready(key, Cost.TRACE)

    def no_decoding(*args, **kwargs):
        raise AssertionError("a follower's page decoded again")
    monkeypatch.setattr(resources, "decode_many", no_decoding)
    monkeypatch.setattr(resources, "explain_decoded", no_decoding)
    monkeypatch.setattr(resources, "attribute", no_decoding)
    ctx = Context(resources.get_checkpoint(path), SidebarChoices(Path(path), opts), work.text)
    assert ctx.figure_key == key and ctx.explanation.text == work.text
    assert ctx.greedy.result.tokens and ctx.greedy is not ctx.explanation
    assert ctx.attribution(Cost.TRACE).generated_tokens
    with pytest.raises(AssertionError, match="decoded again"):      # anything not announced is computed as before
        _ = Context(ctx.checkpoint, SidebarChoices(Path(path), opts), "four small cats").explanation


def test_an_announcement_of_a_checkpoint_this_process_does_not_serve_is_left_alone(app_checkpoints, monkeypatch):
    from app import bell, resources

    def never(*args, **kwargs):
        raise AssertionError("loaded")
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    monkeypatch.setattr(resources, "get_checkpoint", never)
    bell.compute_ahead(Work("/elsewhere/multi30k-en-de", "four small dogs", DecodeOptions(), FP32))
