"""The server's configuration, read from the environment once, at start (`ServingConfig.from_env`).

| variable | default | what |
|---|---|---|
| TRANSFORMER_CHECKPOINTS | model/storage/places.py | the one directory of checkpoints (else shipped + user's) |
| TRANSFORMER_THREADS | min(2, cores) | torch threads of one app process (`make serve` divides the cores unless set) |
| TRANSFORMER_ADMIT | 1 | new pages drawn at once per process (serving/admission.py) |
| TRANSFORMER_MAX_WAITING | 60 | students waiting in line per process before the next is turned away |
| TRANSFORMER_MAX_BATCH | 16 | sentences decoded in one batch per process (1: each alone; serving/batching.py) |
| TRANSFORMER_CACHE_MB | 256 | MB of tensors a process keeps of its sentences' decodings and traces (app/resources) |
| TRANSFORMER_FIGURES_MB | 16 | MB of figures a process keeps to share between sessions, as sent (their JSON) |
| TRANSFORMER_CACHE_IDLE_S | 120 | seconds a kept sentence's result or figure stays unasked before it goes (0: never) |
| TRANSFORMER_LAB_SLOTS | one per two cores | training-lab runs at once (serving/lab_jobs.py) |
| TRANSFORMER_LAB_MAX_SECONDS | 180 | every lab run's time cap |
| TRANSFORMER_LAB_THREADS | half the cores | torch threads of one lab training process |
| TRANSFORMER_LAB_LOCKS | unset | lock-file directory: lab slots per machine (set by `make serve`) |
| TRANSFORMER_LAB_OWNED | 0 (`make serve`: 1) | a saved lab model is its student's own (serving/lab_shelf.py) |
| TRANSFORMER_LAB_PER_STUDENT | 3 | lab models one student keeps (owned mode) |
| TRANSFORMER_LAB_DISK_MB | 500 | all students' lab models together, in MB (owned mode) |
| TRANSFORMER_LAB_KEEP_HOURS | 24 | an unpublished lab model is removed after this time (owned mode) |
| TRANSFORMER_ADD_MODELS | 1 (`make serve`: 0) | the sidebar's "Add a model by name" (0: hidden) |
| TRANSFORMER_DATA | ../shared/data/multi30k | the default sentences of "Heads across the corpus" |
| TRANSFORMER_REDIS | unset (`make serve`: its own) | where classes live (redis://HOST:PORT/DB); unset: in memory |
| TRANSFORMER_CLASSES | 1 | the sidebar's "Start a class" and joining one (0: off) |
| TRANSFORMER_JOINS_PER_MINUTE | 60 | joins of a class per address and minute (app/limits.py) |
| TRANSFORMER_CLASSES_PER_HOUR | 10 | classes started per address and hour |
| TRANSFORMER_SENTENCES_PER_MINUTE | 20 | a student's new pages per minute while others wait in line |
| TRANSFORMER_PROXIED | unset (`make serve`: 1) | behind the launcher's HAProxy: X-Forwarded-For is the address |
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from model.storage import places

ROOT = Path(__file__).resolve().parent.parent

# Every variable of the table above (tests/test_serving_config.py checks): what the configuration is made from
# (app/resources.config reads these alone, not the whole environment, on each of its calls).
VARIABLES: tuple[str, ...] = tuple("TRANSFORMER_" + name for name in (
    "CHECKPOINTS", "THREADS", "ADMIT", "MAX_WAITING", "MAX_BATCH", "CACHE_MB", "FIGURES_MB", "CACHE_IDLE_S",
    "LAB_SLOTS", "LAB_MAX_SECONDS", "LAB_THREADS", "LAB_LOCKS", "LAB_OWNED", "LAB_PER_STUDENT", "LAB_DISK_MB",
    "LAB_KEEP_HOURS", "ADD_MODELS", "DATA", "REDIS", "CLASSES", "JOINS_PER_MINUTE", "CLASSES_PER_HOUR",
    "SENTENCES_PER_MINUTE", "PROXIED",
))


STREAMLIT_CONFIG = (ROOT / ".streamlit" / "config.toml",                         # a checkout
                    ROOT / "transformer_explained" / "streamlit" / "config.toml")  # an installed package


def streamlit_flags() -> list[str]:
    """The app's Streamlit settings (.streamlit/config.toml, which an installed package carries as
    transformer_explained/streamlit/config.toml) as command-line flags, for an app started from
    any directory: `--client.toolbarMode viewer`, ..."""
    import tomllib
    path = next((p for p in STREAMLIT_CONFIG if p.is_file()), None)
    if path is None:
        return []
    flags = []
    for section, values in tomllib.loads(path.read_text(encoding="utf-8")).items():
        for key, value in values.items():
            flags += [f"--{section}.{key}", str(value).lower() if isinstance(value, bool) else str(value)]
    return flags


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    """A positive integer from env; 0, empty or absent: the default."""
    return int(env.get(name) or 0) or default


@dataclass(frozen=True)
class ServingConfig:
    """The table above, one field per variable (defaults for a 2-core machine)."""
    checkpoints: Path = ROOT / "checkpoints"   # where new checkpoints go (model/storage/places.py: user_dir)
    search: tuple[Path, ...] = ()               # where checkpoints are found (model/storage/places.py: search_dirs)
    threads: int = 2                  # torch threads of an app process
    admit: int = 1                    # heavy page runs at once
    max_waiting: int = 60             # students in line before the next is turned away
    max_batch: int = 16               # sentences decoded together
    cache_mb: int = 256               # decodings and traces kept, in MB of tensors
    figures_mb: int = 16              # figures kept, in MB of their JSON
    cache_idle_s: float = 120.0       # both: what nobody asked for in this many seconds goes (0: never)
    lab_slots: int = 1                # lab runs training at once
    lab_max_seconds: float = 180.0    # a lab run's time cap
    lab_threads: int = 1              # torch threads of a lab run's process
    lab_locks: Path | None = None
    lab_owned: bool = False           # lab models on the shelf, each student's own
    lab_per_student: int = 3
    lab_disk_mb: int = 500
    lab_keep_hours: float = 24.0
    data: Path = ROOT.parent / "shared" / "data" / "multi30k"
    add_models: bool = True             # the sidebar's "Add a model by name"
    redis: str | None = None            # where classes live (serving/class_store.py); None: in memory
    classes: bool = True                # class mode on
    joins_per_minute: int = 60
    classes_per_hour: int = 10
    sentences_per_minute: int = 20
    proxied: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, cores: int | None = None) -> ServingConfig:
        env = os.environ if env is None else env
        cores = cores or os.cpu_count() or 1
        half = max(1, cores // 2)
        return cls(
            checkpoints=places.user_dir(env),
            search=tuple(places.search_dirs(env)),
            threads=_int(env, "TRANSFORMER_THREADS", max(1, min(2, cores))),
            admit=_int(env, "TRANSFORMER_ADMIT", 1),
            max_waiting=int(env.get("TRANSFORMER_MAX_WAITING") or 60),
            max_batch=_int(env, "TRANSFORMER_MAX_BATCH", 16),
            cache_mb=_int(env, "TRANSFORMER_CACHE_MB", 256),
            figures_mb=_int(env, "TRANSFORMER_FIGURES_MB", 16),
            cache_idle_s=float(env.get("TRANSFORMER_CACHE_IDLE_S") or 120),
            lab_slots=_int(env, "TRANSFORMER_LAB_SLOTS", half),
            lab_max_seconds=float(env.get("TRANSFORMER_LAB_MAX_SECONDS") or 180),
            lab_threads=_int(env, "TRANSFORMER_LAB_THREADS", half),
            lab_locks=Path(env["TRANSFORMER_LAB_LOCKS"]) if env.get("TRANSFORMER_LAB_LOCKS") else None,
            lab_owned=env.get("TRANSFORMER_LAB_OWNED", "0") not in ("0", "false", "no", ""),
            lab_per_student=_int(env, "TRANSFORMER_LAB_PER_STUDENT", 3),
            lab_disk_mb=_int(env, "TRANSFORMER_LAB_DISK_MB", 500),
            lab_keep_hours=float(env.get("TRANSFORMER_LAB_KEEP_HOURS") or 24),
            data=Path(env.get("TRANSFORMER_DATA") or cls.data),
            add_models=env.get("TRANSFORMER_ADD_MODELS", "1") not in ("0", "false", "no"),
            redis=env.get("TRANSFORMER_REDIS") or None,
            classes=env.get("TRANSFORMER_CLASSES", "1") not in ("0", "false", "no"),
            joins_per_minute=_int(env, "TRANSFORMER_JOINS_PER_MINUTE", 60),
            classes_per_hour=_int(env, "TRANSFORMER_CLASSES_PER_HOUR", 10),
            sentences_per_minute=_int(env, "TRANSFORMER_SENTENCES_PER_MINUTE", 20),
            proxied=env.get("TRANSFORMER_PROXIED", "0") not in ("0", "false", "no", ""),
        )
