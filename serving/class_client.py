"""A class over Streamlit's own protocol (serving/protocol.py): a teacher and followers, each a session run as a
browser runs it (its timed fragments and its class bell), and what a class does: open, change, poll, lose an app
process and come back. Used by the class benchmarks (benchmarks/class_follow.py, faults.py, soak.py, machines.py)
and by tests/test_machines.py; every wait is bounded.
"""
from __future__ import annotations

import asyncio
import re
import time
import urllib.parse

from serving.protocol import Student

CODE = re.compile(r"\*\*Class ([A-Z0-9]{4})-([A-Z0-9]{4})\*\*")


def params(query: str) -> dict[str, str]:
    """A link's view: its parameters but the class's own (the code, a student's seat, a teacher's secret)."""
    return {k: v for k, v in urllib.parse.parse_qsl(query) if k not in ("class", "seat", "teacher")}


class Session:
    """A Student whose timed fragments run as in a browser, one request at a time."""

    def __init__(self, student: Student) -> None:
        self.s = student
        self.lock = asyncio.Lock()
        self.errors: list[str] = []
        self.dropped = 0                     # fragment reruns the server dropped (Student.rerun), not errors
        self.stopped = False

    async def run(self, kind: str, states: list = (), fragment: str = "") -> float:
        async with self.lock:
            run = await self.s.rerun(kind, states, fragment=fragment)
        if run.dropped:
            self.dropped += 1
        elif not run.ok:
            self.errors.append(f"{kind}: {run.error}")
        return time.monotonic()

    async def timers(self) -> None:
        """The page's timed fragments and its class bell, as a browser runs them."""
        await asyncio.gather(self._timed(), self._bell())

    async def _bell(self) -> None:
        """The class bell's component (app/bell.py): one request held open; a new version runs its fragment."""
        known = None
        while not self.stopped:
            data = self.s.bell() if self.s.connected else None
            if data is None:
                await asyncio.sleep(0.1)
                continue
            known = data["known"] if known is None or data["known"] > known else known
            version = await self.s.bell_wait(known, timeout=30)
            if version is None:
                await asyncio.sleep(2.0)
            elif version != known and not self.stopped:
                known = version
                await self.run("bell", [self.s.ring(version)], fragment=self.s.fragments.get("class_bell", ""))

    async def _timed(self) -> None:
        due: dict[str, float] = {}
        while not self.stopped:
            if not self.s.connected:               # its process died: the page reconnects (benchmarks.faults)
                await asyncio.sleep(0.1)
                continue
            now = time.monotonic()
            for fid, every in list(self.s.auto_reruns.items()):
                if now >= due.setdefault(fid, now + every):
                    due[fid] = now + every
                    await self.run("tick", fragment=fid)
            await asyncio.sleep(0.05)


async def wait_for(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.02)
    return False


def caught_up(follower: Student, want: dict[str, str], since: float) -> float | None:
    """When the follower's page first wrote the teacher's link after `since`. Read from the newest back to
    `since`: over a lesson-long soak the history grows to thousands of links, checked every 20 ms."""
    first = None
    for t, q in reversed(follower.link_seen):
        if t < since:
            break
        if params(q) == want:
            first = t
    return first


async def open_class(url: str, students: int, text: str, seats: list[dict[str, str]] | None = None
                     ) -> tuple[Session, list[Session], list[asyncio.Task]]:
    """A teacher who started a class on the step page of the sentence `text`, `students` followers who opened its
    join link, and the tasks that run every session's timed fragments (stop them with .stopped = True). `seats`:
    cookies the followers bring, in turn (a proxy's stickiness cookie: browsers that sat at a machine before)."""
    teacher = Session(Student(url, {"text": text}, page="step"))
    await teacher.s.open()
    await teacher.run("first")
    await teacher.run("start", [teacher.s.press("class-start")])
    match = next((CODE.search(m) for m in teacher.s.markdown.values() if CODE.search(m)), None)
    if match is None:
        raise SystemExit("the teacher's page shows no class code: is class mode on?")
    code = match[1] + match[2]
    followers = [Session(Student(url, {"class": code}, cookies=dict(seats[n % len(seats)]) if seats else {}))
                 for n in range(students)]
    await asyncio.gather(*(f.s.open() for f in followers))
    await asyncio.gather(*(f.run("first") for f in followers))
    tasks = [asyncio.create_task(x.timers()) for x in (teacher, *followers)]
    return teacher, followers, tasks


async def change(teacher: Session, followers: list[Session], label: str, sentence: str | None,
                 timeout: float) -> tuple[list[float], int]:
    """The teacher presses Next (or types `sentence`); seconds until each follower shows it, and how many
    never did within `timeout`."""
    states = [teacher.s.type("text", sentence)] if sentence else [teacher.s.press("next")]
    fragment = "" if sentence else teacher.s.fragments.get("next", "")
    sent, link = time.monotonic(), teacher.s.link
    done = await teacher.run(label, states, fragment=fragment)
    if teacher.s.link == link:
        # every change of a lesson changes the teacher's link; still the old one means the teacher's own run had
        # not started within DROPPED_SECONDS (a busy machine: the suite's browsers beside it) and the client went
        # on: the followers had written the old link before `sent`, so all would count as missed although the
        # class follows as soon as the run comes. Wait for the run instead.
        if await wait_for(lambda: teacher.s.link != link, timeout):
            done = time.monotonic()
    want = params(teacher.s.link)
    # a follow counts from the moment the change was sent: the class hears of it while the teacher's own run
    # goes on, and on a busy machine a follower can show it before that run ends (once counted as missed)
    await wait_for(lambda: all(caught_up(f.s, want, sent) for f in followers), timeout)
    latencies, missed = [], 0
    for f in followers:
        t = caught_up(f.s, want, sent)
        if t is None:
            missed += 1
        else:
            latencies.append(max(0.0, t - done))
    return latencies, missed


def story(*sessions: Session, last: int = 6) -> str:
    """What each session did last (its runs and the links its page wrote, seconds before now): the message
    of a check on a class that failed, so that a rare miss can be read from the log."""
    now, lines = time.monotonic(), []
    for n, x in enumerate(sessions):
        runs = [(r.kind, round(r.seconds, 2), "dropped" if r.dropped else "ok" if r.ok else r.error[:60])
                for r in x.s.runs[-last:]]
        links = [(round(now - t, 2), q) for t, q in x.s.link_seen[-last:]]
        lines.append(f"session {n}: runs {runs}; links (s ago) {links}; dropped {x.dropped}; errors {x.errors[-3:]}")
    return "\n".join(lines)


def answers_held(r, code: str) -> int:
    try:
        return sum(r.hlen(k) for k in r.keys(f"tx:class:{code}:answers:*"))
    except Exception:  # noqa: BLE001 - Redis down: nothing readable
        return -1


# ---- a class with an answered poll ----------------------------------------------------------------------------
async def class_with_poll(url: str, students: int, text: str, seats: list[dict[str, str]] | None = None
                          ) -> tuple[Session, list[Session], list, str]:
    """open_class, then "What comes next?" asked and answered by every follower; and the class's code."""
    teacher, followers, tasks = await open_class(url, students, text, seats)
    code = params_code(teacher)
    await asyncio.sleep(2)
    await teacher.run("ask", [teacher.s.press("class-ask-next-token")])
    deadline = time.monotonic() + 30
    while not all(any(k.startswith("poll-own-") for k in f.s.widgets) for f in followers):
        if time.monotonic() > deadline:
            raise SystemExit("the poll never showed on every follower")
        await asyncio.sleep(0.1)
    for n, f in enumerate(followers):
        own = next(k for k in f.s.widgets if k.startswith("poll-own-"))
        await f.run("type", [f.s.type(own, f"Wort{n}")])
        send = next(k for k in f.s.widgets if k.startswith("poll-send-"))
        await f.run("answer", [f.s.press(send)])
    return teacher, followers, tasks, code


def params_code(teacher: Session) -> str:
    match = next(CODE.search(m) for m in teacher.s.markdown.values() if CODE.search(m))
    return match[1] + match[2]


async def until_following(teacher: Session, followers: list[Session], since: float, timeout: float,
                          sentences: list[str], reconnect: bool = False) -> list[float | None]:
    """The teacher presses Next every second (a new sentence of `sentences` every fifth) until every follower
    shows one of the teacher's views made after `since`; followers whose websocket dropped reconnect first, as a browser
    does. Seconds from `since` for each follower (None: never within `timeout`)."""
    wants: list[dict[str, str]] = []
    caught: dict[int, float] = {}
    deadline, i = since + timeout, 0
    while len(caught) < len(followers) and time.monotonic() < deadline:
        if reconnect:
            await asyncio.gather(*(rejoin(f) for f in followers if not f.s.connected), return_exceptions=True)
        sentence = sentences[(i // 5) % len(sentences)] if i % 5 == 0 else None
        states = [teacher.s.type("text", sentence)] if sentence else [teacher.s.press("next")]
        await teacher.run(f"after {i}", states, fragment="" if sentence else teacher.s.fragments.get("next", ""))
        wants.append(params(teacher.s.link))
        i += 1
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            for n, f in enumerate(followers):
                if n not in caught:
                    t = next((t for t, q in f.s.link_seen if t >= since and params(q) in wants), None)
                    if t is not None:
                        caught[n] = t - since
            await asyncio.sleep(0.05)
    return [caught.get(n) for n in range(len(followers))]


async def rejoin(f: Session) -> None:
    async with f.lock:
        try:
            await f.s.reconnect()
        except Exception as exc:  # noqa: BLE001 - said, and tried again on the next round
            f.errors.append(f"reconnect: {type(exc).__name__}: {exc}")
            return
        run = await f.s.rerun("rejoin")
    if not run.ok:
        f.errors.append(f"rejoin: {run.error}")


async def end_class(teacher: Session, followers: list[Session], tasks: list) -> None:
    """Every session closed, as tabs are: a bell's request held open (up to 25 s) is given up, not waited for."""
    for x in (teacher, *followers):
        x.stopped = True
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.gather(*(x.s.close() for x in (teacher, *followers)), return_exceptions=True)


def figures(seconds: list[float | None]) -> dict:
    got = [s for s in seconds if s is not None]
    return {"followers": len(seconds), "back": len(got), "p50_s": pct(got, 0.5), "p95_s": pct(got, 0.95),
            "max_s": max(got, default=None)}




def pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)
