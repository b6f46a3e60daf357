"""Lab models on a shared server (`make serve`): each student's own, bounded, and shown to others only when
their teacher publishes one.

    <checkpoints>/lab-students/<group>/<owner>/<name>/      a saved lab model (a checkpoint directory)
    <checkpoints>/lab-students/<group>/<owner>/<name>/.published    present: the whole group sees it

group: the class's code, or "solo" for a student in no class; owner: the student's anonymous seat (a class's)
or the browser session's own id. Who sees what: a student their own models and their group's published ones;
the teacher of a class every model of the class, and publishes or withdraws them. Bounds: `per_owner` models
per student (the next save is refused with a message, never an old one dropped in silence), `max_bytes` in all
(a save that would pass it is refused), and unpublished models older than `keep_seconds` are removed (`sweep`,
run at each save and by the launcher at start). Every name and id is checked against a strict pattern and every
path is checked to lie under the shelf's root before anything is written or removed: no name escapes it.
On one machine the app processes share the folder; a save is atomic (save_checkpoint writes a temporary
directory and renames it), and a disk that fills during a save leaves nothing half-written behind.
"""
from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from i18n import N_
from serving.config import ServingConfig

FOLDER = "lab-students"
SOLO = "solo"
PUBLISHED = ".published"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")       # a model's name, as the lab page asks for it
INVALID = {"class": N_("That is not a class's code."), "owner": N_("That is not a student's id."),
           "name": N_("A checkpoint name is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit.")}
ID = re.compile(r"[A-Za-z0-9]{4,32}")                       # a group (class code, "solo") or an owner id


class ShelfRefused(Exception):
    """A save, publication or removal that the shelf will not do. `template` (marked for translation) and
    `values` say why; the page shows _(template).format(**values), str() the English."""

    def __init__(self, template: str, **values: object) -> None:
        self.template, self.values = template, values
        super().__init__(template.format(**values))


@dataclass(frozen=True)
class Entry:
    path: Path
    group: str
    owner: str
    name: str
    published: bool
    saved: float           # seconds since the epoch (the directory's modification time)

    @property
    def size(self) -> int:
        """Bytes on disk: walked when asked (a list drawn, a save), not on each listing (every rerun)."""
        return dir_size(self.path)


def dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


@dataclass
class LabShelf:
    root: Path                         # the server's checkpoints folder; the shelf is root / FOLDER
    per_owner: int = 3
    max_bytes: int = 500 * 2 ** 20
    keep_seconds: float = 24 * 3600.0
    clock: Callable[[], float] = time.time

    @classmethod
    def from_config(cls, cfg: ServingConfig) -> LabShelf:
        return cls(cfg.checkpoints, per_owner=cfg.lab_per_student, max_bytes=cfg.lab_disk_mb * 2 ** 20,
                   keep_seconds=cfg.lab_keep_hours * 3600)

    @property
    def base(self) -> Path:
        return self.root / FOLDER

    # ---- paths, checked ---------------------------------------------------------------------------
    def _dir(self, group: str, owner: str | None = None, name: str | None = None) -> Path:
        for value, pattern, what in ((group, ID, "class"), (owner, ID, "owner"), (name, NAME, "name")):
            if value is not None and not pattern.fullmatch(value):
                raise ShelfRefused(INVALID[what])
        parts = [p for p in (group, owner, name) if p is not None]
        path = self.base.joinpath(*parts)
        base = self.base.resolve()
        if base not in path.resolve().parents and path.resolve() != base:
            raise ShelfRefused(INVALID["name"])                       # a path leading outside: never
        return path

    def _entry(self, path: Path) -> Entry:
        group, owner, name = path.relative_to(self.base).parts
        return Entry(path, group, owner, name, (path / PUBLISHED).exists(), path.stat().st_mtime)

    def _models(self, pattern: str) -> list[Entry]:
        if not self.base.is_dir():
            return []
        found = [p for p in self.base.glob(pattern) if p.is_dir() and not p.is_symlink()
                 and (p / "config.json").is_file() and len(p.relative_to(self.base).parts) == 3]
        return sorted((self._entry(p) for p in found), key=lambda e: (e.saved, e.name))

    # ---- who sees what ------------------------------------------------------------------------------
    def owned(self, group: str, owner: str) -> list[Entry]:
        self._dir(group, owner)
        return self._models(f"{group}/{owner}/*")

    def group(self, group: str) -> list[Entry]:
        """Every model of a group (what its teacher sees)."""
        self._dir(group)
        return self._models(f"{group}/*/*")

    def visible(self, group: str, owner: str) -> list[Entry]:
        """A student's own models, then the group's published ones of other students."""
        mine = self.owned(group, owner)
        return mine + [e for e in self.group(group) if e.published and e.owner != owner]

    def used_bytes(self) -> int:
        return sum(e.size for e in self._models("*/*/*"))

    # ---- changes ----------------------------------------------------------------------------------
    def save(self, group: str, owner: str, name: str, write: Callable[[Path], Path],
             taken: Callable[[str], bool] = lambda name: False, estimate: int = 0) -> Path:
        """write(target) saves the model into target (atomically). Refused (ShelfRefused, said) when the
        name is not valid or taken (by the student's own or by `taken`, e.g. a shipped model's name), the
        student has per_owner models, or the shelf would pass max_bytes."""
        target = self._dir(group, owner, name)
        self.sweep()
        if target.exists() or taken(name):
            raise ShelfRefused(N_("“{name}” exists already: choose another name."), name=name)
        if len(self.owned(group, owner)) >= self.per_owner:
            raise ShelfRefused(N_("You have {n} saved lab models, the most one student keeps: delete one "
                                  "first."), n=self.per_owner)
        if self.used_bytes() + estimate > self.max_bytes:
            raise ShelfRefused(N_("The server's space for lab models is full: delete one of yours, or ask "
                                  "your teacher."))
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            return write(target)
        except OSError as exc:                          # the disk filled up during the save
            shutil.rmtree(target, ignore_errors=True)
            for tmp in target.parent.glob(f".{name}.*"):   # save_checkpoint's temporary directory
                shutil.rmtree(tmp, ignore_errors=True)
            raise ShelfRefused(N_("The model could not be saved ({why}); nothing was kept."),
                               why=exc.strerror or str(exc)) from None

    def publish(self, group: str, owner: str, name: str, on: bool = True) -> None:
        path = self._dir(group, owner, name)
        if not (path / "config.json").is_file():
            raise ShelfRefused(N_("“{name}” is not there any more."), name=name)
        marker = path / PUBLISHED
        if on:
            marker.touch()
        else:
            marker.unlink(missing_ok=True)

    def delete(self, group: str, owner: str, name: str) -> None:
        path = self._dir(group, owner, name)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)

    def sweep(self) -> list[Entry]:
        """Remove the unpublished models older than keep_seconds; returns them."""
        old = [e for e in self._models("*/*/*") if not e.published and self.clock() - e.saved > self.keep_seconds]
        for e in old:
            shutil.rmtree(e.path, ignore_errors=True)
        return old
