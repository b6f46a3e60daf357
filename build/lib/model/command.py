"""How the command-line tools are called, for their --help: `transformer-explained NAME` when run
through the installed command (which sets COMMAND), else `python -m MODULE` as from a checkout."""
from __future__ import annotations

import contextvars

COMMAND: contextvars.ContextVar[str | None] = contextvars.ContextVar("command", default=None)


def prog(module: str) -> str:
    return COMMAND.get() or f"python -m {module}"
