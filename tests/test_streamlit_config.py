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


def test_streamlit_looks_at_its_config_files_once_every_few_seconds(tmp_path, monkeypatch):
    """Streamlit polls its config files five times a second in every app process (BENCHMARKS.md, session 33): the
    app slows that down once per process. A Streamlit that renamed the period would fail here, not idle on."""
    import time

    from streamlit.watcher import polling_path_watcher as polling

    from app import resources
    monkeypatch.setattr(polling, "_POLLING_PERIOD_SECS", polling._POLLING_PERIOD_SECS)     # put back afterwards
    looks = []
    check = polling.PollingPathWatcher._check_if_path_changed
    monkeypatch.setattr(polling.PollingPathWatcher, "_check_if_path_changed",
                        lambda self: (looks.append(time.monotonic()), check(self)))
    watched = tmp_path / "config.toml"
    watched.write_text("")
    assert resources.slower_config_polling()
    watcher = polling.PollingPathWatcher(str(watched), lambda _path: None, allow_nonexistent=True)
    try:
        time.sleep(1.5)                                   # seven looks at Streamlit's own period
    finally:
        watcher.close()
    assert looks == [] and polling._POLLING_PERIOD_SECS == resources.CONFIG_POLL_SECONDS
