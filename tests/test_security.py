"""The promises of docs/security.md that no other test holds: each one fails here if it breaks."""
from __future__ import annotations

import argparse
import ast
import os
import tomllib
from pathlib import Path

from serving.launcher import Launcher, app_command
from tests.support import ROOT

DOC = ROOT / "docs" / "security.md"


def _launcher(**changes) -> Launcher:
    args = dict(bind="0.0.0.0:8501", processes=2, first_port=8511, backend=[], max_sessions=0, warmup=False,
                quiet=True, no_proxy=False, redis=None, allow_adding_models=False)
    return Launcher(argparse.Namespace(**{**args, **changes}))


def test_the_launchers_own_services_listen_on_loopback_only(monkeypatch, tmp_path):
    launcher = _launcher()
    assert launcher.address == "127.0.0.1"
    command = app_command(8511, launcher.address)
    assert command[command.index("--server.address") + 1] == "127.0.0.1"
    assert app_command(8511)[app_command(8511).index("--server.address") + 1] == "127.0.0.1"   # the default
    started = []
    monkeypatch.setattr("serving.launcher.shutil.which", lambda name: "/usr/bin/redis-server")
    monkeypatch.setattr("serving.launcher.subprocess.Popen", lambda cmd, **kw: started.append(cmd) or object())
    monkeypatch.setattr(Launcher, "wait_for_port", lambda self, port, timeout=10.0: None)
    launcher.start_redis()
    redis = started[0]
    assert redis[redis.index("--bind") + 1] == "127.0.0.1"
    assert redis[redis.index("--protected-mode") + 1] == "yes"


def test_a_class_server_adds_no_models_and_owns_lab_models(monkeypatch):
    monkeypatch.delenv("TRANSFORMER_LAB_OWNED", raising=False)
    env = _launcher().env
    assert env["TRANSFORMER_ADD_MODELS"] == "0" and env["TRANSFORMER_LAB_OWNED"] == "1"
    assert _launcher(allow_adding_models=True).env["TRANSFORMER_ADD_MODELS"] == "1"


def test_a_teacher_secret_is_stored_only_as_its_hash(redis_url):
    """What Redis holds (under `make serve`) for a class: its code, the secret's hash, never the secret."""
    import redis

    from serving.class_store import RedisStore
    store = RedisStore(redis_url)
    started = store.start("explore", {"text": "A dog."})
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    keys = r.keys(f"*{started.code}*")
    held = repr({k: r.hgetall(k) for k in keys if r.type(k) == "hash"})
    assert keys and started.code in repr(keys) and "secret" in held
    assert started.secret not in held
    assert store.is_teacher(started.code, started.secret) and not store.is_teacher(started.code, started.secret[:-1])


def test_streamlit_keeps_xsrf_and_cors_protection_and_takes_no_uploads():
    from streamlit import config
    before = Path.cwd()
    os.chdir(ROOT)
    try:
        config.get_config_options(force_reparse=True)
        assert config.get_option("server.enableXsrfProtection") is True
        assert config.get_option("server.enableCORS") is True
        assert config.get_option("server.maxUploadSize") == 1
    finally:
        os.chdir(before)
        config.get_config_options(force_reparse=True)
    said = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"]      # said, not defaults
    assert {"enableXsrfProtection", "enableCORS", "maxUploadSize"} <= set(said)


def _calls(tree: ast.AST):
    """(enclosing function, call) for every call in a module."""
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(fn):
                if isinstance(node, ast.Call):
                    yield fn.name, node


def _app_modules():
    for path in sorted((ROOT / "app").rglob("*.py")):
        yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text())


UPLOADERS = {"file_uploader", "camera_input", "audio_input"}


def test_the_app_has_no_uploader():
    found = [f"{name}:{fn}" for name, tree in _app_modules() for fn, call in _calls(tree)
             if isinstance(call.func, ast.Attribute) and call.func.attr in UPLOADERS]
    assert not found, found


# Every place the app writes raw HTML, reviewed (docs/security.md): what goes in, and why it is safe.
REVIEWED = {
    "app/class_code.py:join_banner": "the class code: 8 symbols of class_store.ALPHABET, made by the server",
    "app/pages.py:presentation": "presentation_style(page): constant CSS and the page's own slug",
    "app/pages.py:header": "the page title (compact header, for screen readers) through html.escape",
    "app/ui.py:page_style": "STYLE, a constant",
    "app/ui.py:compact_style": "COMPACT_STYLE, a constant",
    "app/ui.py:described": "a chart's text alternative through html.escape",
}


def test_every_raw_html_in_the_app_is_a_reviewed_one():
    found = set()
    for name, tree in _app_modules():
        for fn, call in _calls(tree):
            raw = any(k.arg == "unsafe_allow_html" and getattr(k.value, "value", False) is True for k in call.keywords)
            html = isinstance(call.func, ast.Attribute) and call.func.attr == "html"
            if raw or html:
                found.add(f"{name}:{fn}")
    assert found == set(REVIEWED), f"review and list in REVIEWED and docs/security.md: {found ^ set(REVIEWED)}"


def test_the_review_names_only_tests_that_exist():
    """Each test docs/security.md names is there (a renamed test does not leave a promise untested)."""
    import re
    text = DOC.read_text()
    named = set(re.findall(r"`(?:tests/(test_\w+)\.py::)?(test_\w+)`", text))
    missing = []
    for module, test in named:
        path = ROOT / "tests" / f"{module or 'test_security'}.py"
        if f"def {test}(" not in path.read_text():
            missing.append(f"{module or 'test_security'}::{test}")
    assert named and not missing, missing
