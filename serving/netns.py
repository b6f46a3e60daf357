"""A class across machines, on one computer: each "machine" a Linux network namespace with its own app
processes (`python -m serving.launcher --apps-only`), one HAProxy in front (`--processes 0 --backend ...`) and one
Redis with a password that every machine reaches, as a school would run them (README, "A class across several
machines"). Used by benchmarks/machines.py (the figures) and tests/test_machines.py.

A namespace has its own network stack: its processes listen on its address only (10.231.K.2), joined to
this machine's by a veth pair (10.231.K.1 on this side): addresses that exist inside this machine only,
nothing reachable from the network. `lesson`: a teacher and followers join through HAProxy (half the
followers bring each machine's stickiness cookie, as browsers that sat there before); the teacher changes
the view and opens a poll that every follower answers; then every process of the machine the teacher is
not on is killed (SIGKILL, the machine "gone"): its students' browsers reconnect, HAProxy sends them to the
other machine, their page comes back from the link in the address bar. Needs root and iproute2 (`ip netns`),
haproxy and redis-server.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from serving.class_client import answers_held, change, class_with_poll, end_class, figures, until_following
from serving.launcher import COOKIE, ROOT, free_port

APP_PORT = 8501                      # every machine's first app process, on its own address


@dataclass(frozen=True)
class Machine:
    name: str          # the network namespace
    host: str          # its address (its app processes listen there)
    gateway: str       # this machine's end of the link (where it reaches Redis)
    backend: str       # its name in HAProxy (the launcher's --backend order: remote1, remote2, ...)


def unavailable() -> str | None:
    """Why machines cannot be made here (None: they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    missing = [t for t in ("ip", "haproxy", "redis-server") if shutil.which(t) is None]
    if missing:
        return f"not installed: {', '.join(missing)} (Debian: iproute2, haproxy, redis-server)"
    probe = f"txprobe{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", probe], capture_output=True).returncode != 0:
        return "`ip netns add` is not permitted here (a container without CAP_SYS_ADMIN?)"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def _make(name: str, subnet: int, index: int) -> Machine:
    here, there = f"10.231.{subnet}.1", f"10.231.{subnet}.2"
    outer, inner = f"{name}h", f"{name}n"               # interface names: at most 15 characters
    _ip("netns", "add", name)
    _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
    _ip("link", "set", inner, "netns", name)
    _ip("addr", "add", f"{here}/30", "dev", outer)
    _ip("link", "set", outer, "up")
    _ip("-n", name, "addr", "add", f"{there}/30", "dev", inner)
    _ip("-n", name, "link", "set", inner, "up")
    _ip("-n", name, "link", "set", "lo", "up")
    return Machine(name, there, here, f"remote{index + 1}")


def kill(m: Machine) -> None:
    """Every process of the machine, at once (SIGKILL): the machine is gone."""
    pids = subprocess.run(["ip", "netns", "pids", m.name], capture_output=True, text=True).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)


@contextlib.contextmanager
def machines(count: int) -> Iterator[list[Machine]]:
    """`count` machines (network namespaces), removed with everything in them afterwards."""
    tag = f"tx{os.getpid() % 100000}"
    made: list[Machine] = []
    try:
        for i in range(count):
            made.append(_make(f"{tag}m{i}", (os.getpid() % 60) * 4 + i, i))
        yield made
    finally:
        for m in made:
            kill(m)
            subprocess.run(["ip", "netns", "del", m.name], capture_output=True)   # its end of the link with it


@dataclass
class School:
    """The running class server: Redis, the app machines' launchers, the front launcher."""
    url: str
    redis_url: str
    machines: list[Machine]
    procs: list[subprocess.Popen]

    def redis(self):
        import redis
        return redis.Redis.from_url(self.redis_url, socket_timeout=1, decode_responses=True)


def _served_by(port: int) -> str:
    """Which app machine the front sends a new browser (no cookie) to: its X-Served-By."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=5) as r:
            return r.headers.get("X-Served-By", "")
    except OSError:
        return ""


def _wait(check, timeout: float, what: str, procs: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            raise RuntimeError(f"{what} did not start (see the logs)")
        time.sleep(0.25)


@contextlib.contextmanager
def school(ms: list[Machine], processes: int, log: Path, warmup: bool = True) -> Iterator[School]:
    """Redis (a password, bound to this machine's loopback and its ends of the links), on each machine
    `serving.launcher --apps-only`, and the front `serving.launcher --processes 0 --backend ...`."""
    from serving.launcher import healthy
    folder, password, rport, port = tempfile.mkdtemp(prefix="machines-redis-"), secrets.token_hex(16), \
        free_port(), free_port()
    log.mkdir(parents=True, exist_ok=True)
    procs: list[subprocess.Popen] = []

    def spawn(cmd: list[str], name: str) -> subprocess.Popen:
        with (log / f"{name}.log").open("w") as out:
            procs.append(subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True))
        return procs[-1]
    try:
        spawn(["redis-server", "--port", str(rport), "--bind", "127.0.0.1", *(m.gateway for m in ms),
               "--requirepass", password, "--save", "", "--appendonly", "yes", "--appendfsync", "always",
               "--dir", folder], "redis")
        url = f"redis://:{password}@{{host}}:{rport}/0"
        warm = [] if warmup else ["--no-warmup"]
        for m in ms:
            spawn(["ip", "netns", "exec", m.name, sys.executable, "-m", "serving.launcher", "--apps-only",
                   "--bind", f"{m.host}:{APP_PORT}", "--processes", str(processes), "--redis",
                   url.format(host=m.gateway), *warm], m.name)
        spawn([sys.executable, "-m", "serving.launcher", "--bind", f"127.0.0.1:{port}", "--processes", "0",
               "--redis", url.format(host="127.0.0.1"),
               *(arg for m in ms for arg in ("--backend", f"{m.host}:{APP_PORT}"))], "front")
        _wait(lambda: all(healthy(APP_PORT + i, m.host) for m in ms for i in range(processes)), 240,
              "the app machines", procs)
        if warmup:
            _wait(lambda: all((log / f"{m.name}.log").read_text().count("warmed up") >= processes for m in ms),
                  240, "the app machines' warm-up", procs)
        _wait(lambda: healthy(port), 60, "the front (HAProxy)", procs)
        answered: set[str] = set()                   # HAProxy's checks pass for every machine: it sends to all
        _wait(lambda: answered.update([_served_by(port)]) or answered >= {m.backend for m in ms}, 60,
              "the front's first health checks", procs)
        yield School(f"http://127.0.0.1:{port}", url.format(host="127.0.0.1"), ms, procs)
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(3)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)


async def lesson(s: School, students: int, sentences: list[str], timeout: float = 60.0) -> dict:
    """The class of the module's docstring (on `sentences`): where everyone sits, a change followed, a poll
    answered, one machine lost; every figure of it."""
    # half the students come back to each machine (its stickiness cookie): HAProxy's leastconn alone put a whole
    # wave on one machine when the other's health check was slow on a busy computer (the suite, sessions 23-26)
    seats = [{COOKIE: m.backend} for m in s.machines]
    teacher, followers, tasks, code = await class_with_poll(s.url, students, sentences[0], seats)
    try:
        seats = {m.backend: sum(f.s.cookies.get(COOKIE) == m.backend for f in followers) for m in s.machines}
        got, missed = await change(teacher, followers, "next", None, timeout)
        r = s.redis()
        before = answers_held(r, code)
        teacher_on = teacher.s.cookies.get(COOKIE)
        lost = next(m for m in s.machines if m.backend != teacher_on)
        moved = [f for f in followers if f.s.cookies.get(COOKIE) == lost.backend]
        for f in followers:
            f.errors.clear()
        t0 = time.monotonic()
        kill(lost)
        await asyncio.sleep(0.2)
        seconds = await until_following(teacher, followers, t0, timeout, sentences[1:], reconnect=True)
        moved_seconds = [x for f, x in zip(followers, seconds) if f in moved]
        return {"students": students, "teacher_on": teacher_on, "followers_on": seats,
                "change": {"followed": len(got), "missed": missed, "max_s": max(got, default=None)},
                "answers_before": before, "lost": lost.backend, "answers_after": answers_held(r, code),
                "moved": figures(moved_seconds), "all": figures(seconds),
                "moved_now_on": sorted({f.s.cookies.get(COOKIE) for f in moved}),
                "moved_showing_their_answer": sum(any(k.startswith("poll-change-") for k in f.s.widgets)
                                                  for f in moved)}
    finally:
        await end_class(teacher, followers, tasks)
