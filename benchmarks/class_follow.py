"""A class following its teacher, over Streamlit's own protocol (issue 28's numbers), against a
running app (`make serve`, its classes in Redis; or one process).

  .venv/bin/python -m benchmarks.class_follow --url http://127.0.0.1:8501 --students 30

One teacher (a session like any other) starts a class on the step page; --students followers open the
join link at once. Every session runs its timed fragments and its class bell as a browser does (a
follower's page waits on the bell and checks its class every 2 s anyway; the teacher counts followers every
2 s). Then:
  changes  the teacher presses Next --changes times and types a new sentence once, a few seconds
           apart; per change and follower: from the teacher's run finishing (its view is published
           then) to the follower's page writing the same link (the end of the run that applied it)
  idle     --idle seconds of following with nothing changing: the server's CPU (app processes,
           HAProxy, Redis) over that time, in cores
  poll     the teacher opens "What comes next?", every follower types an answer, the teacher
           reveals: per follower, from the teacher's click to its page first showing the chart
Errors: runs that did not finish, exception elements, followers that never caught up.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
import urllib.parse

from benchmarks.class_load import SENTENCES, cpu_seconds, pct, server_processes
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
        self.stopped = False

    async def run(self, kind: str, states: list = (), fragment: str = "") -> float:
        async with self.lock:
            run = await self.s.rerun(kind, states, fragment=fragment)
        if not run.ok:
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


async def open_class(url: str, students: int) -> tuple[Session, list[Session], list[asyncio.Task]]:
    """A teacher who started a class on the step page, `students` followers who opened its join link, and
    the tasks that run every session's timed fragments (stop them with .stopped = True)."""
    teacher = Session(Student(url, {"text": SENTENCES[0]}, page="step"))
    await teacher.s.open()
    await teacher.run("first")
    await teacher.run("start", [teacher.s.press("class-start")])
    match = next((CODE.search(m) for m in teacher.s.markdown.values() if CODE.search(m)), None)
    if match is None:
        raise SystemExit("the teacher's page shows no class code: is class mode on?")
    code = match[1] + match[2]
    followers = [Session(Student(url, {"class": code})) for _ in range(students)]
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
    done = await teacher.run(label, states, fragment=fragment)
    want = params(teacher.s.link)
    await wait_for(lambda: all(caught_up(f.s, want, done - 0.5) for f in followers), timeout)
    latencies, missed = [], 0
    for f in followers:
        t = caught_up(f.s, want, done - 0.5)
        if t is None:
            missed += 1
        else:
            latencies.append(max(0.0, t - done))
    return latencies, missed


async def measure(args) -> dict:
    teacher, followers, tasks = await open_class(args.url, args.students)
    await asyncio.sleep(3)

    latencies, missed = [], 0
    for i in range(args.changes):
        got, lost = await change(teacher, followers, f"change {i}",
                                 SENTENCES[1] if i == args.changes // 2 else None, args.timeout)
        latencies += got
        missed += lost
        await asyncio.sleep(args.think)

    procs = server_processes()
    before, start = cpu_seconds(procs), time.monotonic()
    await asyncio.sleep(args.idle)
    idle_cores = (cpu_seconds(procs) - before) / (time.monotonic() - start)

    await teacher.run("ask", [teacher.s.press("class-ask-next-token")])
    opened = await wait_for(lambda: all(any(k.startswith("poll-own-") for k in f.s.widgets) for f in followers),
                            args.timeout)
    for n, f in enumerate(followers):
        own = next((k for k in f.s.widgets if k.startswith("poll-own-")), None)
        if own is None:
            f.errors.append("the poll never showed")
            continue
        await f.run("type", [f.s.type(own, f"Wort{n}")])
        send = next(k for k in f.s.widgets if k.startswith("poll-send-"))
        await f.run("answer", [f.s.press(send)])
    revealed = time.monotonic()                    # the click: the reveal is stored as the teacher's run starts
    await teacher.run("reveal", [teacher.s.press("class-reveal")])
    await wait_for(lambda: all(any(k.startswith("poll-results-") for k in f.s.widgets) for f in followers),
                   args.timeout)
    reveal = [min(t for k, t in f.s.first_seen.items() if k.startswith("poll-results-")) - revealed
              for f in followers if any(k.startswith("poll-results-") for k in f.s.first_seen)]
    for x in (teacher, *followers):
        x.stopped = True
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.gather(*(x.s.close() for x in (teacher, *followers)))
    errors = [e for x in (teacher, *followers) for e in x.errors]
    return {"students": args.students, "changes": args.changes, "follow_p50": pct(latencies, 0.5),
            "follow_p95": pct(latencies, 0.95), "follow_max": max(latencies, default=None), "missed": missed,
            "idle_seconds": args.idle, "idle_cores": idle_cores, "poll_opened": opened,
            "reveal_p50": pct(reveal, 0.5), "reveal_p95": pct(reveal, 0.95), "reveal_max": max(reveal, default=None),
            "revealed_to": len(reveal), "errors": len(errors), "error_samples": errors[:5]}


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.class_follow", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8501")
    p.add_argument("--students", type=int, default=30)
    p.add_argument("--changes", type=int, default=10)
    p.add_argument("--think", type=float, default=2.0, help="seconds between the teacher's changes")
    p.add_argument("--idle", type=float, default=30.0, help="seconds of idle following measured")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds a follower may take to catch up")
    p.add_argument("--json", default=None, help="also write the result here")
    args = p.parse_args()
    result = asyncio.run(measure(args))
    for k, v in result.items():
        print(f"{k}: {round(v, 3) if isinstance(v, float) else v}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
