"""The old module paths of model/ (before it was split into rooms) still work, as the very same modules,
and every command runs by its `python -m` shortcut and through `transformer-explained`."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest

from model import moved
from model.commands.registry import COMMANDS
from tests.support import ROOT
from transformer_explained import cli

LIBRARY_PATHS = sorted(k for k in moved.MOVED if not k.endswith("__main__") and k not in
                       {c.shortcut for c in COMMANDS.values()})


@pytest.mark.parametrize("old", LIBRARY_PATHS)
def test_an_old_path_is_the_same_module_as_the_new_one(old):
    assert importlib.import_module(old) is importlib.import_module(moved.MOVED[old])


def test_what_users_import_by_the_old_paths():
    """The documented ones (README, docs/): model.checkpoint.load_checkpoint, model.pipeline.explain,
    model.trace's Trace; and a submodule under a moved package."""
    from model.checkpoint import load_checkpoint
    from model.heads import store
    from model.pipeline import explain
    from model.trace import Recording, Trace

    import model.network.trace as new_trace
    from model.storage.checkpoint import load_checkpoint as new_load
    from model.training import train_step
    assert load_checkpoint is new_load and Trace is new_trace.Trace and Recording is new_trace.Recording
    assert store.__name__ == "model.analysis.heads.store" and callable(explain) and callable(train_step)
    import model
    assert model.Trace is Trace and model.load_checkpoint is load_checkpoint


def test_a_path_that_never_existed_is_still_an_error():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("model.no_such_module")
    assert moved.new_name("model.checkpointing") is None          # a prefix only matches whole names


RUN_EVERY_SHORTCUT = """
import runpy, sys, io, contextlib
from model.commands.registry import COMMANDS
for name, c in COMMANDS.items():
    sys.argv = [c.shortcut, "--help"]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_module(c.shortcut, run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
    print(name, "|", out.getvalue().splitlines()[0] if out.getvalue() else "")
"""


def test_every_command_runs_by_its_python_m_shortcut():
    done = subprocess.run([sys.executable, "-c", RUN_EVERY_SHORTCUT], capture_output=True, text=True, cwd=ROOT,
                          timeout=300, env={**os.environ})
    assert done.returncode == 0, done.stderr[-2000:]
    lines = dict(line.split(" | ", 1) for line in done.stdout.splitlines() if " | " in line)
    for name, c in COMMANDS.items():      # train's --help names its documented form, `python train.py`
        usage = "usage: python train.py" if name == "train" else f"usage: python -m {c.shortcut}"
        assert lines.get(name, "").startswith(usage), (name, lines.get(name))


def test_the_installed_command_offers_every_registered_tool(capsys):
    assert set(COMMANDS) <= set(cli.COMMANDS)
    assert cli.main(["--help"]) == 0
    listed = capsys.readouterr().out
    assert all(f"  {name} " in listed for name in COMMANDS)
