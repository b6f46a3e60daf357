"""The offline bundle: `transformer-explained bundle` writes a folder that installs the project with no
network (transformer_explained/bundle.py), and its installer refuses bad input in one line with exit
code 2 and leaves nothing half-installed (transformer_explained/install_bundle.py).

The whole round trip (make a bundle, install it in a fresh environment with pip cut off from every
index, start the app and the class setup from the installed command) takes about 45 s on 2 cores."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import psutil
import pytest

from model.storage.checkpoint import save_checkpoint
from serving.warmup import warm_blocking
from tests.support import ROOT, free_port, tiny_model, wait_healthy
from transformer_explained import bundle, install_bundle
from transformer_explained.install_bundle import FORMAT, MANIFEST, BundleError


def fake_bundle(folder: Path, **manifest) -> Path:
    """A bundle folder with one small file and a manifest describing this machine (overridable)."""
    (folder / "wheels").mkdir(parents=True)
    (folder / "wheels" / "a.whl").write_bytes(b"not really a wheel")
    files = {"wheels/a.whl": {"size": 18, "sha256": install_bundle.sha256(folder / "wheels" / "a.whl")}}
    (folder / MANIFEST).write_text(json.dumps({
        "format": FORMAT, "version": "9.9", "python": install_bundle.python_tag(),
        "platform": install_bundle.machine_platform(), "glibc": None, "project_wheel": "a.whl",
        "pip_wheel": "pip.whl", "requirements": ["transformer-explained==9.9"], "checkpoints": [],
        "wheel_count": 1, "files": files, **manifest}))
    return folder


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("install: error: "), err
    return err


@pytest.mark.parametrize("case, expected", [
    ("empty", "is not a bundle of transformer-explained"),
    ("python", "this bundle is for Python 3.7; "),
    ("platform", "this bundle is for plan9-mips; this machine is"),
    ("missing", "the bundle is incomplete: wheels/a.whl is missing"),
    ("damaged", "the bundle is damaged: wheels/a.whl"),
    ("format", "is not a bundle description this installer knows"),
])
def test_bad_bundles_are_refused_in_one_line_and_nothing_is_written(case, expected, tmp_path, capsys):
    folder = tmp_path / "bundle"
    if case == "empty":
        folder.mkdir()
    else:
        fake_bundle(folder, **{"python": {"python": "3.7"}, "platform": {"platform": "plan9-mips"},
                               "format": {"format": "something-else/2"}}.get(case, {}))
    if case == "missing":
        (folder / "wheels" / "a.whl").unlink()
    if case == "damaged":
        (folder / "wheels" / "a.whl").write_bytes(b"not really a whee!")
    prefix = tmp_path / "prefix"
    assert install_bundle.main([str(folder), "--prefix", str(prefix), "--bin", str(tmp_path / "bin")]) == 2
    assert expected in one_error_line(capsys)
    assert not prefix.exists() and not (tmp_path / "bin").exists()


def test_a_glibc_too_old_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(install_bundle, "glibc_version", lambda: (2, 17))
    monkeypatch.setattr(install_bundle.sys, "platform", "linux")
    folder = fake_bundle(tmp_path / "bundle", glibc=[2, 28])
    assert install_bundle.main([str(folder), "--prefix", str(tmp_path / "p"), "--no-link"]) == 2
    assert "need glibc 2.28 or newer; this machine has glibc 2.17" in one_error_line(capsys)


def test_install_sh_of_an_incomplete_copy_says_so(tmp_path):
    (tmp_path / "install.sh").write_text(bundle.install_script("3.11", "transformer_explained-9.9-py3-none-any.whl"))
    done = subprocess.run(["sh", str(tmp_path / "install.sh")], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "is not a whole bundle (wheels/transformer_explained-9.9-py3-none-any.whl is missing)" in done.stderr


def test_a_failed_install_leaves_nothing_and_the_previous_one_working(tmp_path, monkeypatch, capsys):
    prefix, folder = tmp_path / "prefix", fake_bundle(tmp_path / "bundle")
    old = prefix / "envs" / "0.1-old"
    old.mkdir(parents=True)
    (prefix / "current").symlink_to(Path("envs") / old.name)

    def pip_fails(*_):
        raise RuntimeError("pip could not install from the bundle: No matching distribution")
    monkeypatch.setattr(install_bundle, "install_wheels", pip_fails)
    assert install_bundle.main([str(folder), "--prefix", str(prefix), "--no-link"]) == 1
    assert "nothing was installed" in capsys.readouterr().err
    assert [p.name for p in (prefix / "envs").iterdir()] == ["0.1-old"]         # the new environment is gone
    assert (prefix / "current").resolve() == old.resolve()                       # the old one still current

    def interrupted(*_):
        raise KeyboardInterrupt
    monkeypatch.setattr(install_bundle, "install_wheels", interrupted)
    assert install_bundle.main([str(folder), "--prefix", str(prefix), "--no-link"]) == 130
    assert [p.name for p in (prefix / "envs").iterdir()] == ["0.1-old"]


def test_an_install_killed_outright_is_swept_by_the_next(tmp_path):
    prefix = tmp_path / "prefix"
    for name, unfinished in (("0.2-killed", True), ("0.1-done", False)):
        (prefix / "envs" / name).mkdir(parents=True)
        if unfinished:
            (prefix / "envs" / name / install_bundle.INCOMPLETE).touch()
    install_bundle.remove_unfinished(prefix)
    assert [p.name for p in (prefix / "envs").iterdir()] == ["0.1-done"]


def test_switching_to_a_new_environment_removes_the_old_and_links_the_command(tmp_path):
    prefix = tmp_path / "prefix"
    old, new = prefix / "envs" / "old", prefix / "envs" / "new"
    for env in (old, new):
        (env / "bin").mkdir(parents=True)
        (env / "bin" / install_bundle.COMMAND).write_text(env.name)
        install_bundle.switch_current(prefix, env)
    assert not old.exists() and (prefix / "current").resolve() == new.resolve()
    link = install_bundle.link_command(prefix, tmp_path / "bin")
    assert link.read_text() == "new"
    (tmp_path / "bin2").mkdir()
    (tmp_path / "bin2" / install_bundle.COMMAND).write_text("someone else's")
    with pytest.raises(BundleError, match="exists and is not a link"):
        install_bundle.check_link(tmp_path / "bin2")


def test_the_maker_refuses_a_used_folder_and_an_old_python(tmp_path, capsys):
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("x")
    assert bundle.main(["--out", str(tmp_path / "used")]) == 2
    assert "already exists: give a new folder" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:
        bundle.main(["--out", str(tmp_path / "new"), "--python", "3.9"])
    assert done.value.code == 2 and "needs Python 3.11 or newer" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_what_pip_is_asked_for_a_platform_and_its_torch():
    flags = bundle.target_flags("linux-aarch64", "3.12")
    assert flags[:2] == ["--only-binary=:all:", "--python-version"] and "cp312" in flags
    assert "manylinux_2_28_aarch64" in flags and "any" in flags
    assert bundle.torch_requirement("linux-x86_64", "2.13.0") == "torch==2.13.0+cpu"
    assert bundle.torch_requirement("macos-arm64", "2.13.0+cpu") == "torch==2.13.0"     # macOS: no label
    pins = bundle.installed_pins()
    assert "torch" not in pins and "transformer-explained" not in pins and pins["streamlit"].count(".") >= 1


def test_requirements_are_judged_for_the_school_machine_not_this_one():
    """pip judges environment markers for the machine it runs on even with --platform: the walk
    judges them for the target (streamlit needs watchdog except on macOS; torch needs setuptools
    from Python 3.12 on)."""
    from packaging.requirements import Requirement
    watchdog = Requirement('watchdog<7,>=2.1.5; platform_system != "Darwin"').marker
    setuptools = Requirement('setuptools; python_version >= "3.12"').marker
    assert watchdog.evaluate(bundle.target_environment("linux-x86_64", "3.11"))
    assert not watchdog.evaluate(bundle.target_environment("macos-arm64", "3.11"))
    assert setuptools.evaluate(bundle.target_environment("linux-aarch64", "3.12"))
    assert not setuptools.evaluate(bundle.target_environment("linux-x86_64", "3.11"))


# ---------------------------------------------------------------- the whole round trip

@pytest.fixture
def tiny_checkpoint(tokenizer, tmp_path) -> Path:
    """One of the teacher's own checkpoints, carried along in the bundle."""
    save_checkpoint(tmp_path / "our-class-model", tiny_model(tokenizer.vocab_size), tokenizer, tokenizer,
                    meta={"src_lang": "en", "tgt_lang": "de"})
    return tmp_path / "our-class-model"


def test_a_bundle_installs_with_no_network_and_serves_the_app_and_a_class(tmp_path, tiny_checkpoint):
    out = tmp_path / "bundle"
    started = time.monotonic()
    made = subprocess.run([sys.executable, "-m", "transformer_explained", "bundle", "--out", str(out),
                           "--checkpoint", str(tiny_checkpoint)], capture_output=True, text=True, cwd=ROOT)
    assert made.returncode == 0, made.stderr
    made_s = time.monotonic() - started
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["torch"].endswith("+cpu") and manifest["checkpoints"] == [tiny_checkpoint.name]
    with zipfile.ZipFile(out / "wheels" / manifest["project_wheel"]) as wheel:
        assert "transformer_explained/checkpoints/multi30k-en-de/model.safetensors" in wheel.namelist()

    home, prefix = tmp_path / "home", tmp_path / "home" / "school"
    home.mkdir()
    env = bundle.offline_user(home)
    started = time.monotonic()
    done = subprocess.run(["sh", str(out / "install.sh"), "--prefix", str(prefix)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)       # from a folder holding model/ too
    assert done.returncode == 0, done.stdout + done.stderr
    command = home / ".local" / "bin" / "transformer-explained"
    assert command.is_symlink() and "installed in" in done.stdout
    assert (home / "data" / "transformer-explained" / "checkpoints" / tiny_checkpoint.name / "config.json").is_file()
    assert not list(prefix.rglob("*" + install_bundle.INCOMPLETE))
    site = next(prefix.glob("current/lib/python*/site-packages"))
    assert not (site / "transformer_explained" / "checkpoints" / tiny_checkpoint.name).exists()   # user's: not there

    port = free_port()
    app = subprocess.Popen([str(command), "--port", str(port), "--no-browser"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", app)
        serving_s = time.monotonic() - started
        warm_blocking(port, timeout=240)            # the overview and the explorer draw with no error
    finally:
        app.terminate()
        app.wait(timeout=30)
    print(f"bundle made in {made_s:.0f} s ({manifest['size_mb']} MB); installed and serving in {serving_s:.0f} s")
    assert serving_s < 180                           # the budget: install to serving in 3 minutes

    port, app_port = free_port(), free_port()
    serve = subprocess.Popen([str(command), "serve", "--bind", f"127.0.0.1:{port}", "--processes", "1",
                              "--first-port", str(app_port), "--no-warmup", "--quiet"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", serve)
    finally:
        serve.terminate()
        assert serve.wait(timeout=30) == 0
    deadline = time.monotonic() + 5                       # its app process ended with it (a moment to be reaped)
    while (left := [p for p in psutil.process_iter(["cmdline"]) if str(app_port) in (p.info["cmdline"] or [])]) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, left
    said = serve.stderr.read()
    assert f"serving on http://127.0.0.1:{port}" in said
    assert ("HAProxy config" in said) == (shutil.which("haproxy") is not None)   # without it: one process, said
