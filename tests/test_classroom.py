"""Classes that follow their teacher (serving/class_store.py): the same tests on the in-memory store
(`make app`) and on Redis (`make serve`; a redis-server started for the test on a free port)."""
from __future__ import annotations

import csv
import io
import shutil
import subprocess
import time

import pytest
import redis

from serving import class_store
from serving.class_store import ClassGone, MemoryStore, NotTeacher, RedisStore, StoreDown
from tests.support import free_port

REDIS = shutil.which("redis-server")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "redis"])
def store_and_clock(request):
    clock = Clock()
    if request.param == "memory":
        return MemoryStore(clock=clock), clock
    url = request.getfixturevalue("redis_url")
    redis.Redis.from_url(url).flushdb()             # the server is shared: each test starts from an empty one
    return RedisStore(url, clock=clock), clock


@pytest.fixture
def store(store_and_clock):
    return store_and_clock[0]


def test_codes_are_long_unambiguous_and_forgiving_to_type():
    codes = {class_store.new_code() for _ in range(2000)}
    assert len(codes) == 2000 and all(len(c) == 8 and set(c) <= set(class_store.ALPHABET) for c in codes)
    assert not set("01OIL") & set(class_store.ALPHABET) and len(class_store.ALPHABET) ** 8 > 8e11
    assert class_store.normalize_code(" abcd-efgh ") == "ABCDEFGH" and class_store.pretty("ABCDEFGH") == "ABCD-EFGH"
    assert class_store.normalize_code("ABCD-EFG0") is None and class_store.normalize_code("ABC") is None


def test_the_teacher_leads_and_only_the_teacher(store):
    started = store.start("overview", {"text": "A dog runs."})
    view = store.view(started.code)
    assert (view.version, view.page, view.params, view.poll) == (1, "overview", {"text": "A dog runs."}, None)
    assert store.publish(started.code, started.secret, "step", {"text": "A dog runs.", "step": "3"}) == 2
    assert store.publish(started.code, started.secret, "step", {"text": "A dog runs.", "step": "3"}) == 2  # same
    assert store.view(started.code).page == "step" and store.view(started.code).params["step"] == "3"
    with pytest.raises(NotTeacher):
        store.publish(started.code, "a student's guess", "masks", {})
    with pytest.raises(NotTeacher):
        store.end(started.code, "")
    assert store.is_teacher(started.code, started.secret) and not store.is_teacher(started.code, "x")
    store.end(started.code, started.secret)
    with pytest.raises(ClassGone):
        store.view(started.code)
    with pytest.raises(ClassGone):
        store.view("ABCDEFGH")


def test_followers_are_counted_while_they_check_in(store_and_clock):
    store, clock = store_and_clock
    c = store.start("overview", {})
    for student in ("s1", "s2", "s3"):
        store.check_in(c.code, student)
    store.check_in(c.code, "s1")
    assert store.followers(c.code) == 3
    clock.now += class_store.FOLLOWER_SECONDS - 1
    store.check_in(c.code, "s2")
    clock.now += 2
    assert store.followers(c.code) == 1                  # s1 and s3 went quiet
    with pytest.raises(ClassGone):
        store.check_in("ABCDEFGH", "s1")


def test_a_poll_takes_one_anonymous_answer_per_student_changeable_until_revealed(store):
    c = store.start("step", {"step": "2"})
    poll = store.open_poll(c.code, c.secret, "next-token", {"options": ["Hund", "Mann", "Frau"]})
    assert store.view(c.code).poll == poll and not poll.revealed
    assert store.answer(c.code, poll.id, "s1", "Mann") and store.answer(c.code, poll.id, "s2", "  Hund ")
    assert store.answer(c.code, poll.id, "s1", "Frau")                     # changed: still one answer
    assert not store.answer(c.code, "nopoll", "s3", "Frau")
    assert sorted(a.choice for a in store.answers(c.code, poll.id)) == ["Frau", "Hund"]
    assert store.answer(c.code, poll.id, "s1", "Mann")                     # and back
    with pytest.raises(NotTeacher):
        store.reveal(c.code, "guess")
    version = store.view(c.code).version
    store.reveal(c.code, c.secret)
    assert store.view(c.code).poll.revealed and store.view(c.code).version > version
    assert not store.answer(c.code, poll.id, "s3", "Frau")                 # revealed: closed to answers
    store.close_poll(c.code, c.secret)
    assert store.view(c.code).poll is None
    assert [(p.id, p.revealed, p.open) for p in store.polls(c.code)] == [(poll.id, True, False)]
    rows = list(csv.reader(io.StringIO(class_store.answers_csv([(p, store.answers(c.code, p.id))
                                                              for p in store.polls(c.code)]))))
    assert rows[0][:5] == ["poll", "kind", "question", "student", "answer"] and len(rows) == 3
    assert {r[4] for r in rows[1:]} == {"Hund", "Mann"}


def test_two_classes_never_see_each_other(store):
    a, b = store.start("overview", {"text": "A"}), store.start("masks", {"text": "B"})
    assert a.code != b.code
    store.publish(a.code, a.secret, "step", {"text": "A2"})
    pa = store.open_poll(a.code, a.secret, "next-token", {"options": ["x"]})
    pb = store.open_poll(b.code, b.secret, "next-token", {"options": ["y"]})
    store.answer(a.code, pa.id, "s1", "x")
    assert store.view(b.code).params == {"text": "B"} and store.answers(b.code, pb.id) == []
    assert not store.answer(b.code, pa.id, "s1", "x")                     # a's poll is not b's
    with pytest.raises(NotTeacher):
        store.publish(b.code, a.secret, "overview", {})                     # a's secret does not lead b


def test_a_teachers_announcement_reaches_the_view_and_changes_no_version(store):
    """View.coming: what the teacher's page is computing now (serving/class_ahead.py), said by the teacher only;
    followers apply nothing new until the view itself changes."""
    c = store.start("step", {"text": "a"})
    before = store.view(c.code)
    assert before.coming == ""
    store.announce(c.code, c.secret, "the next sentence")
    after = store.view(c.code)
    assert after.coming == "the next sentence" and (after.version, after.page, after.params) == (
        before.version, before.page, before.params)
    store.publish(c.code, c.secret, "step", {"text": "b"})
    published = store.view(c.code)
    assert published.version == before.version + 1 and published.coming == "the next sentence"
    with pytest.raises(NotTeacher):
        store.announce(c.code, "not the secret", "x")
    assert store.view(c.code).coming == "the next sentence"
    store.end(c.code, c.secret)
    with pytest.raises(ClassGone):
        store.announce(c.code, c.secret, "x")


def test_a_class_bell_token_is_the_classes_own_and_a_guessed_code_has_none(store):
    a, b = store.start("overview", {}), store.start("overview", {})
    token = store.bell_token(a.code)
    assert len(token) == 32 and token == store.bell_token(a.code) != store.bell_token(b.code)
    assert a.secret not in token and token not in a.secret
    with pytest.raises(ClassGone):
        store.bell_token("ZZZZZZZZ" if a.code != "ZZZZZZZZ" else "YYYYYYYY")


def test_only_a_change_of_the_step_alone_is_followed_by_the_step_pages_own_fragment():
    """app/classroom.followed_in_page: a follower's step page applies the teacher's next step in its fragment
    (the bell rings there); a new sentence, a setting, another page or a poll reruns the whole page."""
    from app.classroom import followed_in_page
    from serving.class_store import Poll, View
    shown = ("step", {"text": "a dog runs", "method": "beam", "step": "2"})
    poll = Poll("p1", "next-token", {"prompt": "?"})

    def view(page="step", poll=None, **params):
        return View(7, page, {**shown[1], **params}, poll)
    assert followed_in_page(shown, None, view(step="3"))
    assert followed_in_page(shown, None, view(step="0"))
    assert followed_in_page(shown, None, View(7, "step", {"text": "a dog runs", "method": "beam"}, None))
    assert not followed_in_page(shown, None, view(step="3", text="a cat sleeps"))
    assert not followed_in_page(shown, None, view(method="greedy"))
    assert not followed_in_page(shown, None, view(page="explore"))
    assert not followed_in_page(shown, None, view(step="3", poll=poll))          # a poll opened
    assert followed_in_page(shown, poll, view(step="3", poll=poll))
    assert not followed_in_page(("explore", shown[1]), None, View(7, "explore", {**shown[1], "step": "3"}, None))


def test_a_class_without_its_teacher_for_hours_ends(store_and_clock):
    store, clock = store_and_clock
    c = store.start("overview", {})
    if isinstance(store, MemoryStore):
        clock.now += class_store.IDLE_SECONDS - 10
        store.publish(c.code, c.secret, "masks", {})       # a teacher action: hours more
        clock.now += class_store.IDLE_SECONDS - 10
        assert store.view(c.code).page == "masks"
        clock.now += 11
        with pytest.raises(ClassGone):
            store.view(c.code)
        return
    import redis
    r, key = redis.Redis.from_url(store.url), store.key(c.code)      # Redis expires the keys itself
    assert 0 < r.ttl(key) <= class_store.IDLE_SECONDS
    r.expire(key, 5)
    store.check_in(c.code, "s1")                           # a student does not keep a class alive
    assert r.ttl(key) <= 5
    store.publish(c.code, c.secret, "masks", {})           # its teacher does
    assert r.ttl(key) > class_store.IDLE_SECONDS - 5


def test_redis_out_of_reach_is_said_not_raised_as_anything_else():
    store = RedisStore(f"redis://127.0.0.1:{free_port()}/0")
    assert not store.ping()
    with pytest.raises(StoreDown):
        store.view("ABCDEFGH")
    with pytest.raises(StoreDown):
        store.start("overview", {})


# ---------------------------------------------------------------- in the app (AppTest: one process)

def _redis(port: int, folder) -> subprocess.Popen:
    proc = subprocess.Popen([REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
                             "--dir", str(folder)], stdout=subprocess.DEVNULL)
    deadline = time.time() + 10
    while not RedisStore(f"redis://127.0.0.1:{port}/0").ping():
        assert time.time() < deadline, "redis-server did not start"
        time.sleep(0.05)
    return proc


def _class_on_redis(app_checkpoints, tmp_path, monkeypatch, page: str | None = None):
    """A redis-server of the test's own, the app on it, a teacher who started a class (then opened `page`) and a
    student who joined by its link and ran once: (the server, its port, the teacher, the student)."""
    from streamlit.testing.v1 import AppTest

    from tests.support import APP, goto
    port = free_port()
    server = _redis(port, tmp_path)
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    monkeypatch.setenv("TRANSFORMER_REDIS", f"redis://127.0.0.1:{port}/0")
    teacher = AppTest.from_file(APP, default_timeout=120).run()
    teacher.button(key="class-start").click().run()
    if page is not None:
        goto(teacher, page)
    student = AppTest.from_file(APP, default_timeout=120)
    student.query_params["class"] = teacher.session_state["class"].code
    student.run()
    return server, port, teacher, student


@pytest.mark.skipif(REDIS is None, reason="redis-server not installed (apt-get install -y redis-server)")
def test_redis_down_the_class_says_so_and_follows_again_once_it_is_back(app_checkpoints, tmp_path, monkeypatch):
    server, port, teacher, student = _class_on_redis(app_checkpoints, tmp_path, monkeypatch)
    assert "Following the teacher" in [s.value for s in student.sidebar.success][0]

    server.terminate()
    server.wait(timeout=10)
    teacher.text_input(key="text").input("the dog runs in the park").run()
    student.run()
    for at in (teacher, student):
        assert not at.exception
        assert any("cannot be reached" in w.value for w in at.sidebar.warning), [w.value for w in at.sidebar.warning]

    server = _redis(port, tmp_path)                       # back, with its data (append-only file)
    try:
        teacher.text_input(key="text").input("a woman sits on a red ball").run()
        student.run()                                      # the notice goes...
        student.run()                                      # ...and the teacher's view comes
        assert student.session_state["text"] == "a woman sits on a red ball"
        assert not student.sidebar.warning and not student.exception
        assert student.session_state["class"].following
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.skipif(REDIS is None, reason="redis-server not installed (apt-get install -y redis-server)")
def test_redis_down_a_follower_on_the_step_page_keeps_its_page_and_follows_again_once_it_is_back(app_checkpoints,
                                                                                                 tmp_path, monkeypatch):
    """The step page hears the class in its own fragment (classroom.follow_here): with the store out of reach, a
    follower's run ends (it once reran the whole page again and again) and says so; once it is back, it follows."""
    from tests.support import page_of
    server, port, teacher, student = _class_on_redis(app_checkpoints, tmp_path, monkeypatch, page="step")
    student.run()
    assert page_of(student) == "step"
    server.terminate()
    server.wait(timeout=10)
    student.run()
    assert not student.exception and page_of(student) == "step"
    assert any("cannot be reached" in w.value for w in student.sidebar.warning)
    server = _redis(port, tmp_path)
    try:
        teacher.text_input(key="text").input("a woman sits on a red ball").run()
        student.run()
        student.run()
        assert student.session_state["text"] == "a woman sits on a red ball" and not student.exception
        assert not student.sidebar.warning and page_of(student) == "step"
    finally:
        server.terminate()
        server.wait(timeout=10)


def _session(**link: str):
    """An app session opened on a link with these parameters (`class_` for `class`)."""
    from streamlit.testing.v1 import AppTest

    from tests.support import APP
    at = AppTest.from_file(APP, default_timeout=120)
    for name, value in link.items():
        at.query_params[name.rstrip("_")] = value
    return at.run()


def _teacher_and_student(app_checkpoints, monkeypatch):
    """A teacher's session that started a class, and a student's session that joined by its link."""
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    teacher = _session()
    teacher.button(key="class-start").click().run()
    return teacher, _session(class_=teacher.session_state["class"].code)


def _a_class_and_a_student(app_checkpoints, monkeypatch):
    """A teacher who started a class (their Membership), and a student session that joined by the link."""
    teacher, student = _teacher_and_student(app_checkpoints, monkeypatch)
    return teacher.session_state["class"], student


def test_the_teacher_link_leads_again_from_another_tab_and_the_join_link_never_does(app_checkpoints, monkeypatch):
    """The teacher's tab closed: the teacher link (code and secret) opens a session that leads the same
    class; students keep following it. The join link (the code alone) only follows."""
    m, student = _a_class_and_a_student(app_checkpoints, monkeypatch)
    again = _session(class_=m.code, teacher=m.secret)               # a new tab, from the teacher link
    assert again.session_state["class"].teacher and again.session_state["class"].code == m.code
    assert any(b.key == "class-end" for b in again.sidebar.button)
    again.text_input(key="text").input("the cat sits on a red ball").run()
    student.run()
    assert student.session_state["text"] == "the cat sits on a red ball"
    assert not student.session_state["class"].teacher and "teacher" not in student.query_params
    assert not any(b.key == "class-end" for b in student.sidebar.button)


def test_the_overview_block_and_the_lesson_step_are_followed_too(app_checkpoints, monkeypatch):
    """Every setting a link carries is followed: here the overview's block, the page, the lesson's step."""
    from tests.support import goto, page_of
    teacher, student = _teacher_and_student(app_checkpoints, monkeypatch)
    teacher.selectbox(key="ov_block").select("decoder.cross_attn").run()
    student.run()
    assert student.session_state["ov_block"] == "decoder.cross_attn"
    goto(teacher, "lesson")
    teacher.selectbox(key="lesson_step").select(3).run()
    student.run()
    assert student.session_state["lesson_step"] == 3 and student.session_state["class"].following
    assert page_of(student) == "lesson" and not student.exception


def test_a_student_keeps_their_seat_and_their_one_answer_across_a_reload(app_checkpoints, monkeypatch):
    """A student's address bar holds their anonymous seat: a reload (or another app process) joins as the
    same student, who sees their answer instead of answering the poll again. A seat that is not one of
    ours is not taken."""
    from app import resources
    m, student = _a_class_and_a_student(app_checkpoints, monkeypatch)
    seat = student.query_params["seat"]
    assert seat == student.session_state["class"].student
    store = resources.class_store()
    poll = store.open_poll(m.code, m.secret, "next-token", {"prompt": "?", "options": ["Hund", "Mann"]})
    assert store.answer(m.code, poll.id, seat, "Hund")
    reloaded = _session(class_=m.code, seat=seat)
    assert reloaded.session_state["class"].student == seat
    assert "Your answer is in: **Hund**" in " ".join(s.value for s in reloaded.success)
    assert not any(b.key == f"poll-send-{poll.id}" for b in reloaded.button)
    forged = _session(class_=m.code, seat="not-a-seat")
    assert forged.session_state["class"].student not in (seat, "not-a-seat")


def test_projector_mode_and_the_presentation_view_are_followed(app_checkpoints, monkeypatch):
    """The front of a room reaches every follower: projector mode, the presentation view and its close."""
    from tests.support import goto, page_of
    teacher, student = _teacher_and_student(app_checkpoints, monkeypatch)
    goto(teacher, "step")
    teacher.toggle(key="projector").set_value(True).run()
    teacher.button(key="present_open").click().run()         # the header's Present button
    student.run()
    assert student.session_state["projector"] and student.session_state["present"]
    assert page_of(student) == "step" and student.button(key="present_close") is not None
    teacher.button(key="present_close").click().run()        # Esc presses it
    assert not teacher.session_state["present"]
    student.run()
    assert not student.session_state["present"] and student.session_state["projector"]
    assert not student.exception and not teacher.exception


def test_the_teacher_shows_the_code_big_above_the_page_and_no_student_does(app_checkpoints, monkeypatch):
    """app/class_code.join_banner: the code in large type and its QR code, when the teacher asks, for the projector."""
    teacher, student = _teacher_and_student(app_checkpoints, monkeypatch)
    code = class_store.pretty(teacher.session_state["class"].code)
    big = lambda at: [m.value for m in at.markdown if code in m.value and "font-size:4.5rem" in m.value]  # noqa: E731
    assert not big(teacher)
    teacher.toggle(key="class-show-code").set_value(True).run()
    assert len(big(teacher)) == 1 and not teacher.exception
    student.run()
    assert not big(student) and not student.exception


def test_a_followers_whole_run_reads_the_class_once(app_checkpoints, monkeypatch):
    """A teacher's new sentence on the step page: the follower's run that finds it reruns the whole page, whose
    check (follower_tick) and step-through (follow_here) use the view that run applied instead of reading the
    store again (three reads a change before, each a Redis round trip in every follower's run)."""
    from app import resources
    from tests.support import goto, page_of
    teacher, student = _teacher_and_student(app_checkpoints, monkeypatch)
    goto(teacher, "step")
    student.run()
    assert page_of(student) == "step"
    store, reads = resources.class_store(), []
    real = store.view
    monkeypatch.setattr(store, "view", lambda code: reads.append(code) or real(code))
    teacher.text_input(key="text").input("a woman sits on a red ball").run()
    reads.clear()
    student.run()
    assert student.session_state["text"] == "a woman sits on a red ball" and page_of(student) == "step"
    assert len(reads) == 1 and not student.exception, reads
    student.run()                                 # a run with nothing new: one read too (two before)
    assert len(reads) == 2
    teacher.text_input(key="text").input("two dogs play in the snow").run()
    student.run()
    assert student.session_state["text"] == "two dogs play in the snow"


def test_a_students_free_text_stays_text_in_the_teachers_csv_and_on_the_page():
    """A word that a spreadsheet would read as a formula gets a leading ' in the CSV; Markdown in an
    answer shown back to its student is shown as typed."""
    from app.ui import plain
    from serving.class_store import Answer, Poll
    poll = Poll("p1", "next-token", {"options": ["Hund"]})
    answers = [Answer(s, text, 1.0) for s, text in (("a", "=HYPERLINK(\"http://x\")"), ("b", "+1"), ("c", "-x"),
                                                    ("d", "@SUM(A1)"), ("e", "Hund"), ("f", "x=y"))]
    cells = [r[4] for r in list(csv.reader(io.StringIO(class_store.answers_csv([(poll, answers)]))))[1:]]
    assert cells == ["'=HYPERLINK(\"http://x\")", "'+1", "'-x", "'@SUM(A1)", "Hund", "x=y"]
    assert plain("**bold** [a](http://x) <b>") == r"\*\*bold\*\* \[a\]\(http\:\/\/x\) \<b\>".replace(r"\/", "/")


def test_a_student_changes_their_answer_until_the_reveal_and_not_after(app_checkpoints, monkeypatch):
    """Change my answer: the choices again, the new answer replaces the old (still one per student); once
    the teacher reveals, the poll takes no answer and shows the results instead."""
    from app import resources
    m, student = _a_class_and_a_student(app_checkpoints, monkeypatch)
    store = resources.class_store()
    poll = store.open_poll(m.code, m.secret, "next-token", {"prompt": "?", "options": ["Hund", "Mann"]})
    assert store.answer(m.code, poll.id, student.session_state["class"].student, "Hund")
    student.session_state["class"].answered.pop(poll.id, None)
    student.run()
    assert "**Hund**" in " ".join(s.value for s in student.success)
    student.button(key=f"poll-change-{poll.id}").click().run()
    assert any(b.key == f"poll-send-{poll.id}" for b in student.button)
    assert store.answer(m.code, poll.id, student.session_state["class"].student, "Mann")
    assert [a.choice for a in store.answers(m.code, poll.id)] == ["Mann"]
    store.reveal(m.code, m.secret)
    assert not store.answer(m.code, poll.id, student.session_state["class"].student, "Hund")
    student.run()
    assert not any(b.key == f"poll-change-{poll.id}" for b in student.button) and not student.exception


def test_events_are_counted_per_key_and_window(store_and_clock):
    store, clock = store_and_clock
    assert [store.hit("join:10.0.0.7", 60) for _ in range(3)] == [1, 2, 3]
    assert store.hit("join:10.0.0.8", 60) == 1                       # another address: its own count
    clock.now += 60
    assert store.hit("join:10.0.0.7", 60) == 1                       # a minute later: the three are out of it


def test_events_are_counted_in_the_last_window_whatever_the_clock_says(store_and_clock):
    """A sliding window: two events at 59.5 s and 59.8 s past a minute and a third 0.5 s later (the clock's minute
    changed) are three in the last minute, as are events spread over any 60 s; an event 60 s old has left it."""
    store, clock = store_and_clock
    clock.now = 1_000_019.5                                          # 59.5 s into a clock minute
    assert [store.hit("join:10.0.0.7", 60) for _ in range(2)] == [1, 2]
    clock.now += 0.3
    assert store.hit("join:10.0.0.7", 60) == 3
    clock.now += 0.5                                                 # the clock's minute has changed
    assert store.hit("join:10.0.0.7", 60) == 4
    clock.now += 59.3                                                # the first two are over 60 s old: out
    assert store.hit("join:10.0.0.7", 60) == 3
    assert store.hit("class:10.0.0.7", 3600) == 1                    # another kind, another window: its own count


def test_joins_per_address_and_classes_started_per_address_are_bounded_and_said(app_checkpoints, monkeypatch):
    from app import limits
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    monkeypatch.setenv("TRANSFORMER_JOINS_PER_MINUTE", "2")
    monkeypatch.setenv("TRANSFORMER_CLASSES_PER_HOUR", "1")
    where = {"address": "10.0.0.7"}
    monkeypatch.setattr(limits, "address", lambda: where["address"])
    teacher = _session()
    teacher.button(key="class-start").click().run()
    code = teacher.session_state["class"].code
    again = _session()
    again.button(key="class-start").click().run()                    # a second class, same address, same hour
    assert "class" not in again.session_state and any("the most this server allows" in e.value
                                                      for e in again.sidebar.error)
    joined = [_session(class_=code) for _ in range(3)]                # three joins from one address
    assert [("class" in s.session_state) for s in joined] == [True, True, False]
    assert any("Too many attempts to join" in w.value for w in joined[2].warning)
    where["address"] = "10.0.0.8"
    assert "class" in _session(class_=code).session_state             # another address joins


def test_the_address_is_haproxys_word_behind_the_launcher_and_the_connections_without_it(monkeypatch):
    import types

    from app import limits
    from serving.config import ServingConfig
    context = types.SimpleNamespace(headers={"X-Forwarded-For": "10.1.2.3"}, ip_address="127.0.0.1")
    monkeypatch.setattr(limits, "st", types.SimpleNamespace(context=context))
    monkeypatch.setattr(limits.resources, "config", lambda: ServingConfig(proxied=True))
    assert limits.address() == "10.1.2.3"
    monkeypatch.setattr(limits.resources, "config", lambda: ServingConfig(proxied=False))
    assert limits.address() == "127.0.0.1"              # a browser's own X-Forwarded-For is not believed


def test_a_step_followed_in_the_fragment_counts_as_applied_only_once_its_run_ends(monkeypatch):
    """app/classroom.follow_here: the teacher's next step is applied when the step-through's fragment run that
    draws it ends (end_of_run). A run that fails on the way leaves it unapplied, so the follower's own check
    (follower_tick, every 2 s) reruns the whole page with it: CI once saw a student whose step failed to draw stay
    on the step before for good (test_serve's step-page test, session 32)."""
    from app import classroom, links, state
    from serving.class_store import View

    class Rerun(Exception):
        pass

    class Store:
        version = 6

        def view(self, code):
            return View(self.version, "step", {"text": "a dog runs", "step": str(self.version - 4)}, None)

        def check_in(self, code, student):
            pass

    m = classroom.Membership("CODE", bell="token", applied=5, seen=5,
                             baseline=("step", {"text": "a dog runs", "step": "1"}))
    cursor = state.StepCursor()
    monkeypatch.setattr(classroom, "membership", lambda: m)
    monkeypatch.setattr(classroom, "store", Store)
    monkeypatch.setattr(classroom.state, "held", lambda name: "step" if name == state.PAGE else None)
    monkeypatch.setattr(classroom.state, "cursor", lambda: cursor)
    monkeypatch.setattr(classroom.bell, "listen", lambda *a: None)
    monkeypatch.setattr(links, "publish", lambda site, extra=None: None)

    def rerun(scope="app"):
        raise Rerun(scope)
    monkeypatch.setattr(classroom.st, "rerun", rerun)

    classroom.follow_here()                               # the bell rang: step 2, drawn by this fragment's run
    assert cursor.pending == 2 and m.seen == 6 and (m.applied, m.drawing) == (5, 6)
    classroom.end_of_run(None)                            # ...which ended: applied
    assert (m.applied, m.drawing) == (6, None)
    classroom.watch(m)                                    # the 2-s check finds nothing to do
    assert m.pending is None

    Store.version = 7
    classroom.follow_here()                               # step 3: its run fails before its end
    assert (m.applied, m.drawing) == (6, 7)
    with pytest.raises(Rerun):                            # the 2-s check reruns the whole page with it
        classroom.watch(m)
    assert m.pending is not None and m.pending.version == 7
