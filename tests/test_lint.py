"""The code base passes its own lint configuration (pyproject.toml [tool.ruff])."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT


def test_ruff_check_passes():
    ruff = Path(sys.executable).with_name("ruff")
    if not ruff.exists() and not shutil.which("ruff"):
        pytest.skip("ruff is not installed (pip install -e '.[dev]' installs it)")
    done = subprocess.run([str(ruff if ruff.exists() else "ruff"), "check", "."], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:]
