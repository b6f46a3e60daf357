"""Shared fixtures: tiny models and tokenizers made on the spot (no data needed)."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import torch

from figures.common import VALIDATE
from model.network.tokenizer import Tokenizer
from serving.class_store import RedisStore
from tests.support import CHROMIUM, Tabs, free_port, sentences, tiny_model

REDIS = shutil.which("redis-server")

# Every figure built from plain dicts validated by plotly (figures/common.py: a server skips it), app servers
# started by the tests too: a wrong property fails here.
os.environ.setdefault(VALIDATE, "1")

# Tiny models gain nothing from threads, and one thread keeps a shared 2-core machine usable.
torch.set_num_threads(1)
# The app processes the tests start as well (app servers, launchers, installed bundles): the suite already runs a
# worker per core, and an app process's second torch thread only spun on a core someone else needed. Three browser
# modules: 300 / 324 -> 249 / 250 core-s, 163 / 177 -> 139 / 140 s (docs/benchmarks-history.md, session 42).
os.environ.setdefault("TRANSFORMER_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")     # and every other process that computes (commands, training)


def _scan_installed_components_once() -> None:
    """Each new AppTest's first run scans every installed distribution's metadata for Streamlit component manifests
    (a pool of threads reading ~450 metadata files): 0.13 s of CPU an AppTest, 16 core-s over the suite's ~124
    (docs/benchmarks-history.md, session 49). What is installed does not change during a run, so each worker scans
    once. The app's own components are declared in its code (st.components.v2.component), not by a manifest; the
    app servers the tests start scan as they always do."""
    try:
        from streamlit.components.v2 import manifest_scanner
        scan = functools.cache(manifest_scanner.scan_component_manifests)
    except (ImportError, AttributeError):     # a Streamlit that scans otherwise, or not at all: nothing to spare
        return
    manifest_scanner.scan_component_manifests = lambda *args, **kwargs: list(scan(*args, **kwargs))


_scan_installed_components_once()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked `early` (long, and no browser: a training run, a BLEU score) run first. pytest-xdist's
    worksteal gives each worker a contiguous half of the tests and hands the end of a queue out last, so one of them
    collected late ended the run on one worker while the other had nothing left (session 48: the CPU visit's 27 s
    alone at the end). Browser tests stay where they are: run side by side at the start, they had slowed each other
    into timing failures (docs/benchmarks-history.md, session 48)."""
    items.sort(key=lambda item: item.get_closest_marker("early") is None)      # a stable sort: the rest keep order


@pytest.fixture(scope="session")
def tokenizer() -> Tokenizer:
    return Tokenizer.train(sentences(400), vocab_size=60)


@pytest.fixture(scope="session")
def app_checkpoints(tokenizer, tmp_path_factory) -> Path:
    """A checkpoints/ directory holding one tiny untrained en->de checkpoint whose EOS
    embedding is zeroed, so it talks (up to the length limit) instead of stopping at once."""
    from model.storage.checkpoint import save_checkpoint
    root = tmp_path_factory.mktemp("checkpoints")
    m = tiny_model(tokenizer.vocab_size, seed=1)
    with torch.no_grad():
        m.src_embed.lut.weight[3].zero_()
    save_checkpoint(root / "multi30k-en-de", m, tokenizer, tokenizer, meta={"src_lang": "en", "tgt_lang": "de"})
    save_checkpoint(root / "multi30k-de-en", m, tokenizer, tokenizer, meta={"src_lang": "de", "tgt_lang": "en"})
    return root


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium, headless, driven by Playwright (never `playwright install`). Per module: while
    Playwright's sync API is open, its event loop runs in this thread: a test of the same module that drives
    the app over its protocol runs its event loop in a thread of its own (tests/support.run_apart)."""
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-dev-shm-usage"])
        yield Tabs(b)             # its tabs kept between the module's tests (tests/support.py)
        b.close()


@pytest.fixture(autouse=True)
def _close_pages(request):
    """After a browser test, its tabs leave the app (about:blank) and whatever else it opened is closed: an open
    page keeps a session of the app it shares with the next tests running (and its script runs, timers and
    fragments using the cores)."""
    yield
    if "browser" in request.fixturenames:
        request.getfixturevalue("browser").end_test()


@pytest.fixture(scope="session")
def shipped_server():
    """The app on the shipped checkpoints (its real pictures), for the browser tests that look at a page:
    one per worker, shared by the test modules (each test on pages of its own)."""
    from tests.support import ROOT, app_server
    if not (ROOT / "checkpoints" / "multi30k-en-de" / "config.json").is_file():
        pytest.skip("the shipped checkpoints are not here")
    with app_server(ROOT / "checkpoints") as url:
        yield url


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    """A redis-server of the test's own on a free loopback port (skips when not installed)."""
    if REDIS is None:
        pytest.skip("redis-server not installed (apt-get install -y redis-server)")
    port = free_port()
    proc = subprocess.Popen([REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(tmp_path_factory.mktemp("redis"))], stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.time() + 10
    while not RedisStore(url).ping():
        assert time.time() < deadline, "redis-server did not start"
        time.sleep(0.05)
    yield url
    proc.terminate()
    proc.wait(timeout=10)
