"""The server settings in .streamlit/config.toml, as Streamlit itself reads them."""

from __future__ import annotations

import os
import threading
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


def test_streamlit_looks_at_its_config_files_once_every_few_seconds(tmp_path):
    """Streamlit polls its config files five times a second in every app process (BENCHMARKS.md, session 33): the
    app slows that down once per process (app/process.py). Seen through a watcher's callback: a changed file is
    noticed within a second at Streamlit's own period, and not at a long one. A Streamlit that renamed the period
    fails here, rather than polling on unnoticed."""
    import time

    from streamlit.watcher.polling_path_watcher import PollingPathWatcher

    from app import process

    def noticed_within(seconds: float, period: float) -> bool:
        watched = tmp_path / f"config-{period}.toml"
        watched.write_text("a = 1\n")
        changed = threading.Event()
        process.slower_config_polling(period)
        watcher = PollingPathWatcher(str(watched), lambda _path: changed.set(), allow_nonexistent=True)
        try:
            time.sleep(0.05)
            watched.write_text("a = 2\n")
            os.utime(watched, (time.time() + 5, time.time() + 5))      # a newer time than the watcher read
            return changed.wait(seconds)
        finally:
            watcher.close()

    own = process.slower_config_polling(process.CONFIG_POLL_SECONDS)
    assert own is not None, "Streamlit's polling period is not where app/process.py looks for it"
    try:
        assert noticed_within(3.0, 0.2)                 # Streamlit's own period (the check can see a poll)
        assert not noticed_within(1.0, 60.0)            # a long one: no look at the file in the meantime
    finally:
        process.slower_config_polling(own)


def test_the_first_model_loaded_leaves_what_is_alive_out_of_the_collectors_sight(app_checkpoints, tmp_path):
    """A full collection in a busy app process walked ~300k objects, 0.16 s (BENCHMARKS.md, session 42): once its
    first model is loaded, what is alive is frozen (app/process.py), once per process, and stays so."""
    import gc
    import shutil

    from app import process, resources

    first, second = tmp_path / "first", tmp_path / "second"            # paths no cache has seen
    shutil.copytree(app_checkpoints / "multi30k-en-de", first)
    shutil.copytree(app_checkpoints / "multi30k-de-en", second)
    process.freeze_what_is_loaded.clear()
    try:
        resources.get_checkpoint(str(first))
        frozen = gc.get_freeze_count()
        assert frozen > 50_000, frozen                  # the imports (torch, Streamlit, plotly) and the model
        gc.collect()
        resources.get_checkpoint(str(second))           # another model: nothing frozen again
        assert 0.9 * frozen < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()
        process.freeze_what_is_loaded.clear()
