"""The project's licence (issue 85): LICENSE, pyproject.toml and the installed metadata say the same, and
the command says where the models' and data's own terms are."""
from __future__ import annotations

import tomllib
from importlib import metadata

from tests.support import ROOT
from transformer_explained import cli


def test_the_licence_file_pyproject_and_the_installed_metadata_agree():
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text.splitlines()[1] and "Version 2.0, January 2004" in text
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    md = metadata.metadata("transformer-explained")          # make setup reinstalls when pyproject changes
    assert md["License-Expression"] == project["license"]
    assert "LICENSE" in md.get_all("License-File")


def test_the_version_says_where_the_models_and_datas_terms_are(capsys):
    assert cli.main(["--version"]) == 0
    out = capsys.readouterr().out
    assert "Apache-2.0" in out and "card" in out and "data/*/README.md" in out
    readme = (ROOT / "README.md").read_text()
    assert "## Licences" in readme and "[Apache License 2.0](LICENSE)" in readme
    for folder in ("data/dev", "data/generated"):
        assert (ROOT / folder / "README.md").is_file(), folder
