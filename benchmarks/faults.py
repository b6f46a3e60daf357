"""Faults a class server survives, with figures (issue 42, item 4). Starts its own `make serve` (the
launcher: 2 app processes behind HAProxy, its own Redis) on loopback, then, one after another:

  redis   a class with an open poll that every follower answered; redis-server killed (SIGKILL) and
          restarted by the launcher from its append-only file: seconds until Redis answers again and
          until each follower follows the teacher again; the class, the poll and every answer back?
  app     the same, and the app process the teacher is not on killed (SIGKILL): its students' websockets
          drop and reconnect as a browser does (the link in the address bar: class and seat), HAProxy
          sends them to the live process; seconds until each follows again, answers kept (in Redis and on
          the student's page: "Change my answer")
  disk    a student's lab model saved onto a full disk (a 1 MB tmpfs; needs root to mount it): the
          message, what is left behind (nothing), and a save once there is room again
  proxy   both app processes killed: what a browser gets meanwhile (status and page, every 0.25 s) and
          seconds until the app answers again (the launcher restarts them)

  .venv/bin/python -m benchmarks.faults --students 30
  .venv/bin/python -m benchmarks.faults --only redis,proxy --students 10

Nothing else should run meanwhile (the seconds are the point): say so with the numbers. Loopback only;
every wait is bounded.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil

from benchmarks.class_ab import start, stop
from benchmarks.class_load import ROOT, SENTENCES
from benchmarks.common import machine
from serving.class_client import answers_held, class_with_poll, end_class, figures, params_code, rejoin, until_following  # noqa: F401
from serving.launcher import COOKIE

DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


# ---- the server's parts -------------------------------------------------------------------------------------
def launched(launcher: subprocess.Popen, name: str) -> list[psutil.Process]:
    """The launcher's children named `name` ("redis-server", "haproxy") or running the app ("app")."""
    out = []
    for p in psutil.Process(launcher.pid).children(recursive=True):
        try:
            cmd = " ".join(p.cmdline())
            if (name == "app" and "app/main.py" in cmd) or p.name() == name:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def app_port(p: psutil.Process) -> int:
    cmd = p.cmdline()
    return int(cmd[cmd.index("--server.port") + 1])


def backend_names(launcher: subprocess.Popen) -> dict[psutil.Process, str]:
    """Each local app process and its name in HAProxy (app1, app2, ...: by port, as the launcher names them),
    which its students' stickiness cookie holds."""
    apps = sorted(launched(launcher, "app"), key=app_port)
    return {p: f"app{i + 1}" for i, p in enumerate(apps)}


def redis_of(launcher: subprocess.Popen):
    import redis
    proc = launched(launcher, "redis-server")[0]
    port = next(c.laddr.port for c in proc.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN)
    return proc, redis.Redis(host="127.0.0.1", port=port, socket_timeout=1, decode_responses=True)


# ---- the faults --------------------------------------------------------------------------------------------
async def redis_fault(url: str, launcher: subprocess.Popen, students: int, timeout: float) -> dict:
    teacher, followers, tasks, code = await class_with_poll(url, students, SENTENCES[0])
    proc, r = redis_of(launcher)
    before = answers_held(r, code)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGKILL)
    back = None
    while back is None and time.monotonic() - t0 < timeout:
        try:
            _, r = redis_of(launcher)
            if r.ping():
                back = time.monotonic() - t0
        except Exception:  # noqa: BLE001 - not yet restarted
            await asyncio.sleep(0.1)
    seconds = await until_following(teacher, followers, t0, timeout, SENTENCES[2:])
    after = answers_held(r, code)
    poll_shown = sum(any(k.startswith("poll-change-") for k in f.s.widgets) for f in followers)
    await end_class(teacher, followers, tasks)
    return {"redis_back_s": back, "answers_before": before, "answers_after": after,
            "followers_showing_their_answer": poll_shown, **figures(seconds),
            "errors_after": sum(len(f.errors) for f in followers)}


async def app_fault(url: str, launcher: subprocess.Popen, students: int, timeout: float) -> dict:
    teacher, followers, tasks, code = await class_with_poll(url, students, SENTENCES[0])
    _, r = redis_of(launcher)
    before = answers_held(r, code)
    apps = backend_names(launcher)
    victim = next(p for p, name in apps.items() if name != teacher.s.cookies.get(COOKIE))
    moved = [f for f in followers if f.s.cookies.get(COOKIE) == apps[victim]]
    for f in followers:
        f.errors.clear()
    t0 = time.monotonic()
    victim.send_signal(signal.SIGKILL)
    await asyncio.sleep(0.2)
    seconds = await until_following(teacher, followers, t0, timeout, SENTENCES[2:], reconnect=True)
    moved_seconds = [s for f, s in zip(followers, seconds) if f in moved]
    shown = sum(any(k.startswith("poll-change-") for k in f.s.widgets) for f in moved)
    after = answers_held(r, code)
    connected = sum(f.s.connected for f in moved)
    await end_class(teacher, followers, tasks)
    errors = [e for f in moved for e in f.errors]
    return {"students_on_the_killed_process": len(moved), "answers_before": before, "answers_after": after,
            "moved_showing_their_answer": shown, "moved": figures(moved_seconds), "all": figures(seconds),
            "connected_after": connected, "errors": len(errors), "error_samples": errors[:5]}


def disk_fault() -> dict:
    from model.training.lab import LabRun, LabSettings
    from serving.lab_shelf import LabShelf, ShelfRefused
    mount = Path(tempfile.mkdtemp(prefix="faults-disk-"))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        return {"skipped": f"cannot mount a tmpfs ({done.stderr.decode().strip() or 'not root?'})"}
    try:
        run = LabRun(LabSettings(max_steps=5, heldout=20, eval_every=5))
        run.train()
        filler = mount / "filler"                              # the disk full but for 64 KB: less than
        free = os.statvfs(mount)                               # the model needs
        filler.write_bytes(b"x" * (free.f_bavail * free.f_frsize - 64 * 1024))
        shelf = LabShelf(mount)
        try:
            shelf.save("solo", "abcdef123456", "full-disk", run.save)
            said = None
        except ShelfRefused as exc:
            said = str(exc)
        left = sorted(str(p.relative_to(mount)) for p in mount.rglob("*") if p != filler and p.is_file())
        filler.unlink()
        shelf.save("solo", "abcdef123456", "with-room", run.save)
        return {"message": said, "files_left_behind": left, "save_after_freeing": "ok",
                "listed_after": [e.name for e in shelf.owned("solo", "abcdef123456")]}
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


def proxy_fault(url: str, launcher: subprocess.Popen, timeout: float) -> dict:
    seen: dict[str, int] = {}
    t0 = time.monotonic()
    for p in launched(launcher, "app"):
        p.send_signal(signal.SIGKILL)
    first_ours = back = None
    while time.monotonic() - t0 < timeout:
        try:
            with DIRECT.open(url + "/", timeout=5) as resp:
                status, body = resp.status, resp.read().decode(errors="replace")
        except urllib.error.HTTPError as exc:
            status, body = exc.code, exc.read().decode(errors="replace")
        except OSError as exc:
            status, body = 0, str(exc)
        ours = "The class server is restarting" in body
        kind = f"{status} {'our page' if ours else 'app' if status == 200 else 'other: ' + body[:60]}"
        seen[kind] = seen.get(kind, 0) + 1
        if ours and first_ours is None:
            first_ours = time.monotonic() - t0
        if status == 200 and first_ours is not None:
            back = time.monotonic() - t0
            break
        time.sleep(0.25)
    return {"responses": seen, "first_own_page_s": first_ours, "app_back_s": back}


# ---- the run -----------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.faults", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--students", type=int, default=30)
    p.add_argument("--only", default="redis,app,disk,proxy", help="which faults, comma-separated")
    p.add_argument("--port", type=int, default=8750, help="the proxy's port (default 8750)")
    p.add_argument("--timeout", type=float, default=90.0, help="seconds a recovery may take")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "out" / "faults"), help="the server's log, the JSON")
    args = p.parse_args(argv)
    only = set(args.only.split(","))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result: dict = {"machine": machine(), "students": args.students}
    if "disk" in only:
        result["disk"] = disk_fault()
        print("disk:", json.dumps(result["disk"]), flush=True)
    if only & {"redis", "app", "proxy"}:
        url = f"http://127.0.0.1:{args.port}"
        launcher = start(ROOT, args.port, 2, out / "server.log")
        try:
            for name, fault in (("redis", lambda: asyncio.run(redis_fault(url, launcher, args.students, args.timeout))),
                                ("app", lambda: asyncio.run(app_fault(url, launcher, args.students, args.timeout))),
                                ("proxy", lambda: proxy_fault(url, launcher, args.timeout))):
                if name in only:
                    result[name] = fault()
                    print(f"{name}:", json.dumps(result[name]), flush=True)
                    time.sleep(5)
        finally:
            stop(launcher)
    (out / "faults.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
