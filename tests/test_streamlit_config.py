"""The server settings in .streamlit/config.toml, as Streamlit itself reads them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from streamlit import config

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def project_config():
    """Streamlit's options parsed from the project directory, as `streamlit run` there reads them."""
    before = Path.cwd()
    os.chdir(ROOT)
    try:
        config.get_config_options(force_reparse=True)
        yield config
    finally:
        os.chdir(before)
        config.get_config_options(force_reparse=True)


def test_no_full_garbage_collection_after_every_run(project_config):
    # Streamlit's default gc.collect() after each run took most of a warm page run's CPU here
    # (BENCHMARKS.md, session 9); Python's own generational collector still runs.
    assert project_config.get_option("runner.postScriptGC") is False


def test_students_never_see_a_traceback(project_config):
    assert project_config.get_option("client.showErrorDetails") == "none"
    assert project_config.get_option("server.fileWatcherType") == "none"
