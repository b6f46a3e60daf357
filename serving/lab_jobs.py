"""Training-lab runs off the script thread: at most `slots` at once per server process,
the others wait in a first-come queue.

Each run trains in a child process (`train_in_process`): its own interpreter, so the
training loop's Python never holds the server's GIL while students click, and its own
torch threads (ServingConfig.lab_threads). The server keeps a mirror `LabRun` of it (same tokenizer,
held-out examples and watched example, built from the same seed) whose history, snapshots
and progress follow the child's messages, and which receives the trained weights at the
end. Tests may pass another runner (a function that trains a job in the calling thread).

One `Scheduler` per process (app/resources.py caches it). A session holds its own `Job`
(in its session state, so no other session can reach it) and at most one live job: asking
again while one is queued or training returns that job, so a rerun never starts a second
one. A job ends by reaching its goal, its step limit or its time cap, by `stop()`, or when
its owner's session is gone (the tab was closed): `alive(owner)` is asked about twice a
second while it waits and while it trains.

Several app processes on one machine (`make serve`) share its cores: given `MachineSlots`
(one lock file per slot in a directory they all see), a job also needs one of those
machine-wide slots to start, so at most K runs train on the machine at once.
"""
from __future__ import annotations

import fcntl
import multiprocessing
import queue
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from model.training.lab import LabRun, LabSettings

ALIVE_CHECK_S = 0.5
PROGRESS_EVERY_S = 0.2


class MachineSlots:
    """K training slots shared by every process on this machine: slot i is held by whoever
    holds an exclusive lock on `directory/slot-i.lock` (released by the OS if it dies)."""

    def __init__(self, directory: str | Path, slots: int) -> None:
        self.directory, self.slots = Path(directory), slots
        self.directory.mkdir(parents=True, exist_ok=True)

    def try_acquire(self) -> IO | None:
        for i in range(self.slots):
            handle = open(self.directory / f"slot-{i}.lock", "a")   # noqa: SIM115 - held until release()
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return handle
            except BlockingIOError:
                handle.close()
        return None

    @staticmethod
    def release(handle: IO) -> None:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


@dataclass(eq=False)
class Job:
    owner: str
    settings: LabSettings
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    state: str = "queued"              # queued | training | done
    run: LabRun | None = None          # built when the job starts training
    error: str | None = None           # why it failed, in one line
    ended: str | None = None           # LabRun status at the end, or "left" / "stopped" while queued
    stop_event: threading.Event = field(default_factory=threading.Event)
    slot: IO | None = field(default=None, repr=False)   # the machine-wide slot it holds

    @property
    def active(self) -> bool:
        return self.state != "done"


class TrainingFailed(RuntimeError):
    """The training process reported an error or died; the message is for the student."""


Runner = Callable[["Job", Callable[[], bool]], str]   # trains job (setting job.run); returns how it ended


def process_context():
    """Where training processes come from: a fork server (a fresh interpreter, never a fork of the threaded
    app server) that imported the main script, torch and the training code once, on the first run; each run
    forks from it and starts training at once, instead of importing them again (2-3 s of a core a run)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["__main__", "serving.lab_jobs"])     # __main__: the app's (draws nothing there)
    return ctx


def train_in_process(job: "Job", should_stop: Callable[[], bool], threads: int = 1) -> str:
    """Train in a child process with `threads` torch threads (leave the other cores to the
    server's pages); job.run is the server's mirror of it."""
    ctx = process_context()
    inbox, stop = ctx.Queue(), ctx.Event()
    job.run = LabRun(job.settings)
    child = ctx.Process(target=child_main, args=(job.settings, inbox, stop, threads), daemon=True,
                        name=f"lab-{job.id}")
    child.start()
    try:
        return _follow(job.run, child, inbox, stop, should_stop)
    finally:
        stop.set()
        _reap(child)


def _reap(child) -> None:
    """Wait for the child to exit, in the background: once it has sent its weights the run is
    over for the student, but a torch process takes about a second to shut down (a stop
    showed after 1.2-1.5 s instead of 0.3 s). One that lingers is killed."""
    def wait() -> None:
        child.join(timeout=5)
        if child.is_alive():
            child.kill()
            child.join(timeout=5)
    threading.Thread(target=wait, daemon=True, name=f"reap-{child.name}").start()


def _follow(run: LabRun, child, inbox, stop, should_stop: Callable[[], bool]) -> str:
    """Mirror the child's messages into `run` until it is done; pass a stop on to it."""
    while True:
        if should_stop():
            stop.set()
        try:
            message = inbox.get(timeout=0.25)
        except queue.Empty:
            if not child.is_alive():
                raise TrainingFailed(f"the training process ended unexpectedly (exit code {child.exitcode})") from None
            continue
        kind, *data = message
        if kind == "progress":
            run.step, run.seconds = data
        elif kind == "point":
            point, snapshot = data
            run.history.append(point)
            run.snapshots.append(snapshot)
        elif kind == "done":
            status, run.step, run.seconds, weights = data
            run.load_weights(weights)
            run.status = status
            return status
        else:
            raise TrainingFailed(data[0])


def child_main(settings: LabSettings, outbox, stop, threads: int) -> None:
    """The training process: train, report progress, points and snapshots, then the weights."""
    import torch
    torch.set_num_threads(threads)
    run = LabRun(settings)
    last = [0.0]

    def on_step(step: int, seconds: float) -> None:
        if time.monotonic() - last[0] >= PROGRESS_EVERY_S:
            last[0] = time.monotonic()
            outbox.put(("progress", step, seconds))
    try:
        status = run.train(should_stop=stop.is_set, on_point=lambda p: outbox.put(("point", p, run.snapshots[-1])),
                           on_step=on_step)
    except Exception as exc:   # noqa: BLE001 - reported to the server, which reports it to the student
        outbox.put(("error", f"{type(exc).__name__}: {exc}"))
        return
    outbox.put(("done", status, run.step, run.seconds, run.weights()))


class Scheduler:
    def __init__(self, slots: int = 1, alive: Callable[[str], bool] = lambda owner: True,
                 runner: Runner = train_in_process, machine: MachineSlots | None = None) -> None:
        if slots < 1:
            raise ValueError("at least one training slot")
        self.slots, self.alive, self.runner, self.machine = slots, alive, runner, machine
        self._lock = threading.Lock()
        self._queue: deque[Job] = deque()
        self._running: set[Job] = set()
        self._by_owner: dict[str, Job] = {}
        self._watcher: threading.Thread | None = None

    # ---- asked by sessions -------------------------------------------------------------------------
    def submit(self, owner: str, settings: LabSettings) -> Job:
        """Queue a run for `owner`, or return the one it already has queued or training."""
        with self._lock:
            job = self._by_owner.get(owner)
            if job is not None and job.active:
                return job
            job = Job(owner, settings)
            self._by_owner[owner] = job
            self._queue.append(job)
            self._start_ready()
            self._ensure_watcher()
        return job

    def stop(self, job: Job) -> None:
        job.stop_event.set()
        with self._lock:
            if job in self._queue:
                self._queue.remove(job)
                self._finish(job, "stopped")

    def position(self, job: Job) -> int:
        """0 when training or done, else its place in the queue (1 = next)."""
        with self._lock:
            return self._queue.index(job) + 1 if job in self._queue else 0

    @property
    def training(self) -> int:
        with self._lock:
            return len(self._running)

    # ---- the machinery (callers hold self._lock) ---------------------------------------------------
    def _start_ready(self) -> None:
        while self._queue and len(self._running) < self.slots:
            if self.machine is not None:
                self._queue[0].slot = self.machine.try_acquire()
                if self._queue[0].slot is None:
                    return                                   # another process trains: the watcher retries
            job = self._queue.popleft()
            job.state = "training"
            self._running.add(job)
            threading.Thread(target=self._train, args=(job,), name=f"lab-{job.id}", daemon=True).start()

    def _finish(self, job: Job, ended: str) -> None:
        job.state, job.ended = "done", job.ended or ended
        self._running.discard(job)
        if job.slot is not None:
            MachineSlots.release(job.slot)
            job.slot = None
        if self._by_owner.get(job.owner) is job:      # only live jobs are tracked here
            del self._by_owner[job.owner]

    def _train(self, job: Job) -> None:
        ended = "failed"
        try:
            ended = self.runner(job, self._stopper(job))
            if ended == "stopped" and not job.stop_event.is_set():
                ended = "left"                               # the owner's session is gone
        except Exception as exc:   # noqa: BLE001 - a failed run is reported to its owner, not raised
            text = str(exc).splitlines()[0] if str(exc) else ""
            job.error = text if isinstance(exc, TrainingFailed) else f"{type(exc).__name__}: {text}"
        finally:
            with self._lock:
                self._finish(job, ended)
                self._start_ready()

    def _stopper(self, job: Job) -> Callable[[], bool]:
        last = [time.monotonic()]

        def should_stop() -> bool:
            if job.stop_event.is_set():
                return True
            if time.monotonic() - last[0] >= ALIVE_CHECK_S:
                last[0] = time.monotonic()
                return not self.alive(job.owner)
            return False
        return should_stop

    def _ensure_watcher(self) -> None:
        if self._watcher is None or not self._watcher.is_alive():
            self._watcher = threading.Thread(target=self._watch, name="lab-queue-watch", daemon=True)
            self._watcher.start()

    def _watch(self) -> None:
        """While jobs wait: drop those whose owners left, and retry machine-wide slots."""
        while True:
            time.sleep(ALIVE_CHECK_S)
            with self._lock:
                for job in [j for j in self._queue if not self.alive(j.owner)]:
                    self._queue.remove(job)
                    self._finish(job, "left")
                self._start_ready()
                if not self._queue:
                    self._watcher = None
                    return
