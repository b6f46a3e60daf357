"""The installable package: one command with every tool as a subcommand, checkpoints found in the
shipped and the user's directories, and a wheel that carries every package, the shipped models and
the app's Streamlit settings, and works installed away from the checkout."""
from __future__ import annotations

import os
import site
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from model.storage import places
from tests.support import ROOT, made_once
from transformer_explained.bundle import build_project_wheel
from transformer_explained.cli import COMMANDS, main


def test_version_help_and_an_unknown_command(capsys):
    assert main(["--version"]) == 0 and capsys.readouterr().out.startswith("transformer-explained ")
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in COMMANDS)
    assert main(["translat"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown command 'translat'" in err and "translate" in err


@pytest.mark.parametrize("name", [n for n in COMMANDS])
def test_every_command_explains_itself(name, capsys):
    with pytest.raises(SystemExit) as done:
        main([name, "--help"])
    assert done.value.code == 0
    assert f"transformer-explained {name}" in capsys.readouterr().out


def test_checkpoints_are_found_by_name_the_users_first(tmp_path, monkeypatch):
    user, shipped = tmp_path / "user", tmp_path / "shipped"
    for d, name in ((user, "mine"), (user, "multi30k-en-de"), (shipped, "multi30k-en-de"), (shipped, "multi30k-de-en")):
        (d / name).mkdir(parents=True)
        (d / name / "config.json").write_text("{}")
    (user / "not-a-checkpoint").mkdir()
    found = places.find_in([user, shipped])
    assert [p.name for p in found] == ["mine", "multi30k-de-en", "multi30k-en-de"]
    assert found[2] == user / "multi30k-en-de"                                   # the user's hides the shipped
    assert places.search_dirs({places.ENV: str(user)}) == [user]                 # the variable: that directory only
    assert places.resolve("mine", {places.ENV: str(user)}) == user / "mine"
    assert places.resolve(str(shipped / "multi30k-de-en")) == shipped / "multi30k-de-en"
    assert places.user_data_dir({"XDG_DATA_HOME": str(tmp_path)}) == tmp_path / "transformer-explained"


def test_the_package_list_names_every_package():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for top in ("model", "app", "figures", "serving",
                                                                      "webpage", "transformer_explained")
               for p in (ROOT / top).rglob("__init__.py")}
    assert on_disk <= listed, f"not in pyproject.toml's packages: {sorted(on_disk - listed)}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    folder = made_once(tmp_path_factory, "wheel", build_project_wheel)       # from a copy of the sources
    return next(folder.glob("transformer_explained-*.whl"))


def test_the_wheel_carries_the_code_the_models_and_the_settings(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("multi30k-en-de", "multi30k-de-en"):
        for f in ("config.json", "model.safetensors", "spm.model", "head_statistics.json", "README.md"):
            assert f"transformer_explained/checkpoints/{name}/{f}" in names
    assert "transformer_explained/streamlit/config.toml" in names and "app/main.py" in names
    assert "model/analysis/heads/measures.py" in names and "figures/heads.py" in names
    assert {"webpage/page.html", "webpage/page.css", "webpage/page.js"} <= names      # the lesson file's frame
    assert "figures/attention_charts.mjs" in names          # the explorer's charts, drawn in the browser
    assert not any(n.startswith("tests/") for n in names)
    shipped = sum(f.stat().st_size for d in ("multi30k-en-de", "multi30k-de-en")
                  for f in (ROOT / "checkpoints" / d).iterdir())
    assert wheel.stat().st_size < shipped + 8 * 2**20     # the two shipped models (test_shipped.py bounds each) + code


def test_installed_away_from_the_checkout_it_translates_with_the_shipped_model(wheel, tmp_path):
    """A fresh virtual environment (its dependencies borrowed from this one's site-packages, whose
    editable install of the checkout is not read), run from an empty directory."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    lib = next((venv / "lib").glob("python3*")) / "site-packages"
    (lib / "deps.pth").write_text(site.getsitepackages()[0] + "\n")
    # this environment's pip installs into it (--python): no pip of its own to set up, nothing compiled ahead
    subprocess.run([sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "-q", "--no-deps",
                    "--no-compile", str(wheel)], check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items() if k != places.ENV} | {"XDG_DATA_HOME": str(tmp_path / "data")}
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    where = subprocess.run([venv / "bin" / "python", "-c", "from model import places; print(places.in_checkout(), "
                            "places.shipped_dir(), places.user_dir())"], cwd=cwd, env=env, capture_output=True,
                           text=True, check=True).stdout.split()
    assert where[0] == "False" and str(lib) in where[1] and where[2] == str(tmp_path / "data" / "transformer-explained"
                                                                            / "checkpoints")
    done = subprocess.run([venv / "bin" / "transformer-explained", "translate", "--decode", "greedy"],
                          input="A man rides a bike.\n", cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Ein Mann fährt Fahrrad."


def test_adding_models_can_be_switched_off_for_a_class(app_checkpoints, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from serving.config import ServingConfig
    from tests.support import APP
    assert ServingConfig.from_env({}).add_models
    assert not ServingConfig.from_env({"TRANSFORMER_ADD_MODELS": "0"}).add_models
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    for value, shown in (("1", True), ("0", False)):
        monkeypatch.setenv("TRANSFORMER_ADD_MODELS", value)
        at = AppTest.from_file(APP, default_timeout=120).run()
        assert not at.exception and any(t.key == "add_model_name" for t in at.text_input) == shown
