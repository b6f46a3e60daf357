"""Where checkpoints live, for the app and every command-line tool.

    shipped   the Multi30K models that come with the project: the checkout's checkpoints/, or in an
              installed package, transformer_explained/checkpoints (read-only, never written)
    user      where new models go (train.py, the training lab, `convert`, statistics computed for them):
              $TRANSFORMER_CHECKPOINTS when set; in a checkout, its checkpoints/ (as it always was);
              installed, the user's data directory: $XDG_DATA_HOME/transformer-explained/checkpoints
              (~/.local/share/... when unset; %APPDATA% on Windows, ~/Library/Application Support on macOS)

With $TRANSFORMER_CHECKPOINTS set, that directory is the only one looked in (a test, a school's own
folder). A checkpoint is named by its directory's name; `resolve` accepts a name or a path.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]      # model/storage/places.py -> the checkout (or site-packages)
ENV = "TRANSFORMER_CHECKPOINTS"
DEFAULT_CHECKPOINT = "multi30k-en-de"   # the model the app opens on and the tools use unless told
PACKAGE_CHECKPOINTS = ROOT / "transformer_explained" / "checkpoints"   # where an installed wheel keeps them


def in_checkout() -> bool:
    """Running from a clone of the repository (not from an installed package)."""
    return (ROOT / "pyproject.toml").is_file() and (ROOT / "checkpoints").is_dir()


def shipped_dir() -> Path | None:
    if in_checkout():
        return ROOT / "checkpoints"
    return PACKAGE_CHECKPOINTS if PACKAGE_CHECKPOINTS.is_dir() else None


def user_data_dir(env: Mapping[str, str] | None = None) -> Path:
    """The platform's per-user data directory for this project."""
    env = os.environ if env is None else env
    if sys.platform == "win32" and env.get("APPDATA"):
        base = Path(env["APPDATA"])
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(env.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "transformer-explained"


def user_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get(ENV):
        return Path(env[ENV])
    if in_checkout():
        return ROOT / "checkpoints"
    return user_data_dir(env) / "checkpoints"


def search_dirs(env: Mapping[str, str] | None = None) -> list[Path]:
    """Where checkpoints are looked for, the user's first (a name there hides a shipped one)."""
    env = os.environ if env is None else env
    if env.get(ENV):
        return [Path(env[ENV])]
    dirs = [user_dir(env)]
    shipped = shipped_dir()
    if shipped is not None and shipped not in dirs:
        dirs.append(shipped)
    return dirs


def find_checkpoints(root: str | Path) -> list[Path]:
    """Checkpoint directories directly under root (those with a config.json), sorted."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir()
                  if p.is_dir() and not p.name.startswith(".") and (p / "config.json").is_file())


def find_in(dirs: Sequence[Path]) -> list[Path]:
    """Every checkpoint under `dirs`, one per name (the first directory's wins), sorted by name."""
    found: dict[str, Path] = {}
    for d in dirs:
        for p in find_checkpoints(d):
            found.setdefault(p.name, p)
    return [found[n] for n in sorted(found)]


def find_all(env: Mapping[str, str] | None = None) -> list[Path]:
    return find_in(search_dirs(env))


def resolve(name_or_path: str | Path, env: Mapping[str, str] | None = None) -> Path:
    """A checkpoint directory given as a path, or by name in search_dirs. Unknown: the path as given
    (the loader then says what is missing there)."""
    path = Path(name_or_path)
    if path.is_dir() or len(path.parts) > 1:
        return path
    for d in search_dirs(env):
        if (d / path.name).is_dir():
            return d / path.name
    return path


def known_names(env: Mapping[str, str] | None = None) -> list[str]:
    return [p.name for p in find_all(env)]
