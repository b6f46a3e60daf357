"""One command for what the checkout's commands do: `transformer-explained [COMMAND] [ARGS]`.

With no command it starts the app (as `transformer-explained app`). Every command has its own
--help; `transformer-explained --version` prints the version.
"""
from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

from model.commands.registry import COMMAND, Command
from model.commands.registry import COMMANDS as MODEL_COMMANDS
from transformer_explained import version

PROG = "transformer-explained"
LICENCE_NOTE = ("licence: the code, Apache-2.0 (LICENSE); each shipped model and data file says its own terms "
                "beside it: a model's card (README.md in its checkpoint folder: its training data's licences and "
                "what you owe), data/*/README.md; the app shows it on its 'Model card & training' page")


# the model's tools come from their registry (model/commands/registry.py, which `python -m model.NAME`
# also reads); the commands of the whole product are added around them
COMMANDS: dict[str, Command] = {
    "app": Command("transformer_explained.cli", "the app in your browser (the default; --port, --help)", ""),
    "serve": Command("serving.launcher", "a class: one app process per core behind HAProxy", "serving.launcher"),
    **MODEL_COMMANDS,
    "bundle": Command("transformer_explained.bundle", "a folder that installs it all on a machine with no network",
                      "transformer_explained.bundle"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"usage: {PROG} [COMMAND] [ARGS...]", "", __doc__.strip().splitlines()[0], "", "commands:"]
    lines += [f"  {name:<{width}}  {c.summary}" for name, c in COMMANDS.items()]
    lines += ["", f"  {PROG} COMMAND --help   what a command takes", f"  {PROG} --version"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] in (["-V"], ["--version"]):
        print(f"{PROG} {version()}")
        print(LICENCE_NOTE)
        return 0
    if argv[:1] in (["-h"], ["--help"], ["help"]):
        print(usage())
        return 0
    name, rest = ("app", argv) if not argv or argv[0].startswith("-") else (argv[0], argv[1:])
    if name not in COMMANDS:
        print(f"{PROG}: error: unknown command {name!r}; the commands are: {', '.join(COMMANDS)} "
              f"(`{PROG} --help` says what each does)", file=sys.stderr)
        return 2
    if name == "app":
        return app(rest)
    COMMAND.set(f"{PROG} {name}")
    return int(importlib.import_module(COMMANDS[name].module).main(rest) or 0)


def app(argv: list[str]) -> int:
    """The app, as `make app` starts it (streamlit run app/main.py), on --port (default 8501)."""
    import argparse
    p = argparse.ArgumentParser(prog=f"{PROG} app", description="Start the app and open it in your browser: "
                                "the shipped English->German model first, every page of the model on view.")
    p.add_argument("--port", type=int, default=8501, help="port on this computer (default 8501)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this computer only; 0.0.0.0: the network)")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser window")
    args = p.parse_args(argv)
    from serving.config import streamlit_flags
    main_py = Path(__file__).resolve().parent.parent / "app" / "main.py"
    command = [sys.executable, "-m", "streamlit", "run", str(main_py), *streamlit_flags(),
               "--server.port", str(args.port), "--server.address", args.host, "--browser.gatherUsageStats", "false",
               "--server.headless", "true" if args.no_browser else "false"]
    os.execv(sys.executable, command)       # the app takes over this process (Ctrl+C stops it)
    return 0                                # not reached
