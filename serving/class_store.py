"""Classes that follow their teacher: what a class shares, kept in one process's memory (`make app`)
or in Redis (`make serve`: several app processes, possibly on several machines). No Streamlit here.

A class is
    code      8 letters and digits from an alphabet without look-alikes (0/O, 1/I/L): 31^8, about
              8.5e11 codes, drawn with `secrets`; written ABCD-EFGH, typed in any case, with or
              without the dash
    secret    the teacher's (never in the join link; the teacher link carries it, to re-open the
              class from another tab); stored as its SHA-256
    view      what the teacher shows: the page and the link parameters of app/links.py (the same
              text a shared link holds), with a version that grows on every change
    coming    what the teacher's page is computing now, before its view changes (a text the app writes and
              reads: serving/class_ahead.py), so that every app process can start on it at once; no version change
    followers students seen in the last FOLLOWER_SECONDS (each follower's page checks in)
    poll      at most one at a time: its kind, its question, whether answers are shown; answers are
              kept per poll, one per student (a random id of the session: anonymous)
A class ends when its teacher ends it, or after IDLE_SECONDS without a teacher action.

Both stores implement `ClassStore`; tests/test_classroom.py runs the same tests on both.
"""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"     # 31 symbols, no 0/O, 1/I/L
CODE_LENGTH = 8
IDLE_SECONDS = 4 * 3600                          # a class without a teacher action this long ends
FOLLOWER_SECONDS = 10.0                          # a follower not seen this long is not counted
MAX_ANSWER = 80                                  # characters of a typed answer kept
HITS_KEPT = 1000                                 # a rate key's newest events kept: far past any limit
HIT_WINDOW_MOST = 3600.0                         # the longest rate window asked for (classes an hour)


class ClassGone(Exception):
    """The code names no class (never existed, ended, or expired)."""


class NotTeacher(Exception):
    """The secret is not this class's teacher's."""


class StoreDown(Exception):
    """The shared store cannot be reached (Redis down): sessions go on on their own."""


@dataclass(frozen=True)
class Started:
    code: str
    secret: str


@dataclass(frozen=True)
class Poll:
    id: str
    kind: str                       # "next-token", "head-target", ...
    question: dict[str, Any]        # what students see (the options, shuffled; the prefix; ...)
    revealed: bool = False
    open: bool = True


@dataclass(frozen=True)
class View:
    """What followers apply: the teacher's page and link parameters, and the poll, if any."""
    version: int
    page: str
    params: dict[str, str]
    poll: Poll | None = None
    coming: str = ""                # the teacher's work under way (announce), "" when none was said


@dataclass(frozen=True)
class Answer:
    student: str
    choice: str
    seconds: float                  # after the poll opened


def new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


def normalize_code(text: str) -> str | None:
    """What a student typed (any case, spaces or a dash) -> a code, or None if it cannot be one."""
    code = "".join(ch for ch in text.upper() if ch not in " -")
    return code if len(code) == CODE_LENGTH and all(ch in ALPHABET for ch in code) else None


def pretty(code: str) -> str:
    return f"{code[:4]}-{code[4:]}"


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def answers_csv(polls: list[tuple[Poll, list[Answer]]]) -> str:
    """Polls' answers as CSV: one row per answer (anonymous ids), each with its poll's question."""
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["poll", "kind", "question", "student", "answer", "seconds after opening"])
    for poll, answers in polls:
        question = json.dumps(poll.question, ensure_ascii=False, sort_keys=True)
        for a in answers:
            w.writerow([poll.id, poll.kind, question, a.student, _cell(a.choice), f"{a.seconds:.1f}"])
    return out.getvalue()


def _cell(text: str) -> str:
    """A student's free text as a spreadsheet cell that stays text: one starting with = + - @ (or a tab or
    carriage return) would be read as a formula when the teacher opens the CSV, so it gets a leading '."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


class ClassStore(Protocol):
    def start(self, page: str, params: Mapping[str, str]) -> Started: ...
    def view(self, code: str) -> View: ...
    def is_teacher(self, code: str, secret: str) -> bool: ...
    def bell_token(self, code: str) -> str: ...
    def publish(self, code: str, secret: str, page: str, params: Mapping[str, str]) -> int: ...
    def announce(self, code: str, secret: str, coming: str) -> None: ...
    def end(self, code: str, secret: str) -> None: ...
    def check_in(self, code: str, student: str) -> None: ...
    def followers(self, code: str) -> int: ...
    def open_poll(self, code: str, secret: str, kind: str, question: dict[str, Any]) -> Poll: ...
    def reveal(self, code: str, secret: str) -> None: ...
    def close_poll(self, code: str, secret: str) -> None: ...
    def answer(self, code: str, poll_id: str, student: str, choice: str) -> bool: ...
    def answers(self, code: str, poll_id: str) -> list[Answer]: ...
    def polls(self, code: str) -> list[Poll]: ...
    def hit(self, key: str, window: float) -> int: ...


# ---------------------------------------------------------------- one process: memory

@dataclass
class _Class:
    secret_hash: str
    view: View
    touched: float
    seen: dict[str, float] = field(default_factory=dict)
    polls: dict[str, Poll] = field(default_factory=dict)            # every poll of the class, by id
    answers: dict[str, dict[str, Answer]] = field(default_factory=dict)
    opened: dict[str, float] = field(default_factory=dict)
    coming: str = ""


class _Shared:
    """What both stores do the same way, on top of their own `_teacher` and `_set_poll`."""

    def is_teacher(self, code: str, secret: str) -> bool:
        try:
            self._teacher(code, secret)
            return True
        except (ClassGone, NotTeacher):
            return False

    def bell_token(self, code: str) -> str:
        """What a member of the class shows the class bell (serving/class_bell.py) to hear the class change:
        made from the class's own secret hash, so that a guessed code alone hears nothing (not even whether
        the class exists)."""
        return hashlib.sha256(("bell:" + self._secret_hash(code)).encode()).hexdigest()[:32]

    def reveal(self, code: str, secret: str) -> None:
        self._set_poll(code, secret, revealed=True)

    def close_poll(self, code: str, secret: str) -> None:
        self._set_poll(code, secret, open=False)


class MemoryStore(_Shared):
    """Classes in this process (`make app`: one process serves every session)."""

    def __init__(self, clock=time.time) -> None:
        self._classes: dict[str, _Class] = {}
        self._lock = threading.RLock()
        self._clock = clock
        self._hits: dict[str, list[float]] = {}          # rate key -> times of its events in the last window

    def hit(self, key: str, window: float) -> int:
        """Count one event under `key` (e.g. "join:ADDRESS"); returns the events under it in the last `window`
        seconds, this one included (a sliding window: never more than the limit in any `window` seconds)."""
        now = self._clock()
        with self._lock:
            if len(self._hits) > 10_000:                  # bounded: keys with no event left in their window go
                self._hits = {k: v for k, v in self._hits.items() if v and v[-1] > now - HIT_WINDOW_MOST}
            times = [t for t in self._hits.get(key, ()) if t > now - window][-HITS_KEPT + 1:]
            times.append(now)
            self._hits[key] = times
            return len(times)

    def _get(self, code: str) -> _Class:
        c = self._classes.get(code)
        if c is None or self._clock() - c.touched > IDLE_SECONDS:
            self._classes.pop(code, None)
            raise ClassGone(code)
        return c

    def _secret_hash(self, code: str) -> str:
        with self._lock:
            return self._get(code).secret_hash

    def _teacher(self, code: str, secret: str) -> _Class:
        with self._lock:                    # re-entrant: also taken by the callers that go on to write
            c = self._get(code)
            if not secrets.compare_digest(c.secret_hash, _hash(secret)):
                raise NotTeacher(code)
            c.touched = self._clock()
            return c

    def start(self, page: str, params: Mapping[str, str]) -> Started:
        with self._lock:
            code = new_code()
            while code in self._classes:
                code = new_code()
            secret = secrets.token_urlsafe(24)
            self._classes[code] = _Class(_hash(secret), View(1, page, dict(params)), self._clock())
            return Started(code, secret)

    def view(self, code: str) -> View:
        with self._lock:
            c = self._get(code)
            return dataclasses.replace(c.view, coming=c.coming) if c.coming else c.view

    def announce(self, code: str, secret: str, coming: str) -> None:
        """Say what the teacher's page is computing now (View.coming); the view and its version stay."""
        with self._lock:
            self._teacher(code, secret).coming = coming

    def publish(self, code: str, secret: str, page: str, params: Mapping[str, str]) -> int:
        with self._lock:
            c = self._teacher(code, secret)
            if (page, dict(params)) != (c.view.page, c.view.params):
                c.view = View(c.view.version + 1, page, dict(params), c.view.poll)
            return c.view.version

    def end(self, code: str, secret: str) -> None:
        with self._lock:
            self._teacher(code, secret)
            del self._classes[code]

    def check_in(self, code: str, student: str) -> None:
        with self._lock:
            self._get(code).seen[student] = self._clock()

    def followers(self, code: str) -> int:
        with self._lock:
            c, now = self._get(code), self._clock()
            c.seen = {s: t for s, t in c.seen.items() if now - t <= FOLLOWER_SECONDS}
            return len(c.seen)

    def open_poll(self, code: str, secret: str, kind: str, question: dict[str, Any]) -> Poll:
        with self._lock:
            c = self._teacher(code, secret)
            poll = Poll(secrets.token_hex(4), kind, question)
            c.polls[poll.id], c.answers[poll.id], c.opened[poll.id] = poll, {}, self._clock()
            c.view = View(c.view.version + 1, c.view.page, c.view.params, poll)
            return poll

    def _set_poll(self, code: str, secret: str, **changes: bool) -> None:
        with self._lock:
            c = self._teacher(code, secret)
            if c.view.poll is None:
                return
            poll = Poll(**{**c.view.poll.__dict__, **changes})
            c.polls[poll.id] = poll
            c.view = View(c.view.version + 1, c.view.page, c.view.params, poll if poll.open else None)

    def answer(self, code: str, poll_id: str, student: str, choice: str) -> bool:
        with self._lock:
            c = self._get(code)
            poll = c.polls.get(poll_id)
            if poll is None or not poll.open or poll.revealed:
                return False                    # one answer per student, which they may change until the reveal
            c.answers[poll_id][student] = Answer(student, choice.strip()[:MAX_ANSWER],
                                                 self._clock() - c.opened[poll_id])
            return True

    def answers(self, code: str, poll_id: str) -> list[Answer]:
        with self._lock:
            return list(self._get(code).answers.get(poll_id, {}).values())

    def polls(self, code: str) -> list[Poll]:
        with self._lock:
            return list(self._get(code).polls.values())


# ---------------------------------------------------------------- several processes: Redis

class RedisStore(_Shared):
    """Classes in Redis, shared by every app process that names the same server.

    Keys (all expire IDLE_SECONDS after the teacher's last action; a follower's check-in does not
    keep a class alive):
        tx:class:CODE            hash: secret (its hash), view (JSON), version, coming (View.coming)
        tx:class:CODE:seen       sorted set: student -> last check-in time
        tx:class:CODE:polls      hash: poll id -> poll (JSON)
        tx:class:CODE:answers:ID hash: student -> answer (JSON): one each, replaced until the reveal
        tx:rate:KEY:WINDOW       sorted set: the times of events (joins of an address, classes it started) in the
                                 last WINDOW seconds
    """

    PREFIX = "tx:class:"

    def __init__(self, url: str, clock=time.time) -> None:
        import redis
        self._redis = redis.Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0,
                                           decode_responses=True)
        self._errors = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
        self._clock = clock
        self.url = url

    def key(self, code: str, *parts: str) -> str:
        return ":".join([self.PREFIX + code, *parts])

    def hit(self, key: str, window: float) -> int:
        """As MemoryStore.hit, counted in Redis (every app process shares the count): tx:rate:KEY:WINDOW, a sorted
        set of the events' times."""
        now = self._clock()
        name = f"tx:rate:{key}:{window:g}"
        pipe = self._redis.pipeline()
        pipe.zremrangebyscore(name, "-inf", now - window)
        pipe.zadd(name, {f"{now!r}:{secrets.token_hex(4)}": now})
        pipe.zremrangebyrank(name, 0, -HITS_KEPT - 1)
        pipe.zcard(name)
        pipe.expire(name, int(window) + 1)
        return int(self._call(pipe.execute)[3])

    def _call(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except self._errors as exc:
            raise StoreDown(str(exc)) from None

    def ping(self) -> bool:
        try:
            return bool(self._redis.ping())
        except self._errors:
            return False

    def _keys(self, code: str, poll_ids: list[str] = ()) -> list[str]:
        return [self.key(code), self.key(code, "seen"), self.key(code, "polls"),
                *(self.key(code, "answers", p) for p in poll_ids)]

    def _touch(self, code: str) -> None:
        ids = self._call(self._redis.hkeys, self.key(code, "polls"))
        pipe = self._redis.pipeline()
        for key in self._keys(code, ids):
            pipe.expire(key, IDLE_SECONDS)
        self._call(pipe.execute)

    def _secret_hash(self, code: str) -> str:
        found = self._call(self._redis.hget, self.key(code), "secret")
        if not found:
            raise ClassGone(code)
        return found

    def _teacher(self, code: str, secret: str) -> dict[str, str]:
        data = self._call(self._redis.hgetall, self.key(code))
        if not data:
            raise ClassGone(code)
        if not secrets.compare_digest(data["secret"], _hash(secret)):
            raise NotTeacher(code)
        self._touch(code)
        return data

    @staticmethod
    def _view(data: dict[str, str]) -> View:
        raw = json.loads(data["view"])
        poll = Poll(**raw["poll"]) if raw.get("poll") else None
        return View(int(data["version"]), raw["page"], raw["params"], poll, data.get("coming", ""))

    def _write_view(self, code: str, page: str, params: Mapping[str, str], poll: Poll | None) -> int:
        view = json.dumps({"page": page, "params": dict(params), "poll": poll.__dict__ if poll else None})
        pipe = self._redis.pipeline()
        pipe.hset(self.key(code), "view", view)
        pipe.hincrby(self.key(code), "version", 1)
        return int(self._call(pipe.execute)[1])

    def start(self, page: str, params: Mapping[str, str]) -> Started:
        secret = secrets.token_urlsafe(24)
        view = json.dumps({"page": page, "params": dict(params), "poll": None})
        while True:
            code = new_code()
            if self._call(self._redis.hsetnx, self.key(code), "secret", _hash(secret)):
                break
        self._call(self._redis.hset, self.key(code), mapping={"view": view, "version": 1})
        self._call(self._redis.expire, self.key(code), IDLE_SECONDS)
        return Started(code, secret)

    def view(self, code: str) -> View:
        data = self._call(self._redis.hgetall, self.key(code))
        if not data or "view" not in data:
            raise ClassGone(code)
        return self._view(data)

    def publish(self, code: str, secret: str, page: str, params: Mapping[str, str]) -> int:
        view = self._view(self._teacher(code, secret))
        if (page, dict(params)) == (view.page, view.params):
            return view.version
        return self._write_view(code, page, params, view.poll)

    def announce(self, code: str, secret: str, coming: str) -> None:
        """As MemoryStore.announce: one field of the class's hash, after the secret is checked (two round trips:
        the teacher's run says it as it starts to compute)."""
        if not secrets.compare_digest(self._secret_hash(code), _hash(secret)):
            raise NotTeacher(code)
        pipe = self._redis.pipeline()
        pipe.hset(self.key(code), "coming", coming)
        pipe.expire(self.key(code), IDLE_SECONDS, nx=True)   # a class that ended just now leaves no key for ever
        self._call(pipe.execute)

    def end(self, code: str, secret: str) -> None:
        self._teacher(code, secret)
        ids = self._call(self._redis.hkeys, self.key(code, "polls"))
        self._call(self._redis.delete, *self._keys(code, ids))

    def check_in(self, code: str, student: str) -> None:
        pipe = self._redis.pipeline()
        pipe.exists(self.key(code))
        pipe.zadd(self.key(code, "seen"), {student: self._clock()})
        pipe.expire(self.key(code, "seen"), IDLE_SECONDS, gt=True)
        if not self._call(pipe.execute)[0]:
            raise ClassGone(code)

    def followers(self, code: str) -> int:
        now = self._clock()
        pipe = self._redis.pipeline()
        pipe.exists(self.key(code))
        pipe.zremrangebyscore(self.key(code, "seen"), "-inf", now - FOLLOWER_SECONDS)
        pipe.zcard(self.key(code, "seen"))
        exists, _, n = self._call(pipe.execute)
        if not exists:
            raise ClassGone(code)
        return int(n)

    def open_poll(self, code: str, secret: str, kind: str, question: dict[str, Any]) -> Poll:
        view = self._view(self._teacher(code, secret))
        poll = Poll(secrets.token_hex(4), kind, question)
        record = json.dumps({**poll.__dict__, "opened": self._clock()})
        self._call(self._redis.hset, self.key(code, "polls"), poll.id, record)
        self._call(self._redis.expire, self.key(code, "polls"), IDLE_SECONDS)
        self._write_view(code, view.page, view.params, poll)
        return poll

    def _set_poll(self, code: str, secret: str, **changes: bool) -> None:
        view = self._view(self._teacher(code, secret))
        if view.poll is None:
            return
        poll = Poll(**{**view.poll.__dict__, **changes})
        record = json.loads(self._call(self._redis.hget, self.key(code, "polls"), poll.id))
        self._call(self._redis.hset, self.key(code, "polls"), poll.id, json.dumps({**record, **changes}))
        self._write_view(code, view.page, view.params, poll if poll.open else None)

    def _poll_record(self, code: str, poll_id: str) -> dict[str, Any] | None:
        raw = self._call(self._redis.hget, self.key(code, "polls"), poll_id)
        return json.loads(raw) if raw else None

    def answer(self, code: str, poll_id: str, student: str, choice: str) -> bool:
        record = self._poll_record(code, poll_id)
        if record is None or not record["open"] or record["revealed"]:
            return False
        value = json.dumps({"choice": choice.strip()[:MAX_ANSWER], "seconds": self._clock() - record["opened"]})
        key = self.key(code, "answers", poll_id)
        self._call(self._redis.hset, key, student, value)     # one per student: a new one replaces it
        self._call(self._redis.expire, key, IDLE_SECONDS, nx=True)
        return True

    def answers(self, code: str, poll_id: str) -> list[Answer]:
        raw = self._call(self._redis.hgetall, self.key(code, "answers", poll_id))
        return [Answer(s, a["choice"], a["seconds"]) for s, a in ((s, json.loads(v)) for s, v in raw.items())]

    def polls(self, code: str) -> list[Poll]:
        raw = self._call(self._redis.hgetall, self.key(code, "polls"))
        if not raw and not self._call(self._redis.exists, self.key(code)):
            raise ClassGone(code)
        fields = set(Poll.__dataclass_fields__)
        return [Poll(**{k: v for k, v in json.loads(r).items() if k in fields}) for r in raw.values()]
