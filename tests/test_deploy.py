"""The deployment examples of a class across machines (docs/deploy/): systemd units and a Kubernetes file, each
checked for syntax and for what it promises (the launcher's flags in them parse, the front names every app
process, each Service finds its pods, each secret it reads exists)."""
from __future__ import annotations

import configparser
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from serving import launcher

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "docs" / "deploy"
UNITS = sorted(DEPLOY.glob("*.service"))
REDIS_URL = "redis://:secret@10.0.0.11:6379/0"


def _launcher_args(command: list[str], monkeypatch) -> object:
    monkeypatch.setenv("TRANSFORMER_REDIS", REDIS_URL)            # where both examples put the Redis URL
    assert command[1:3] == ["-m", "serving.launcher"], command
    return launcher.parse(command[3:])


def _unit(path: Path) -> configparser.ConfigParser:
    unit = configparser.ConfigParser(strict=True, interpolation=None)
    unit.optionxform = str
    unit.read_string(path.read_text())
    return unit


def test_there_is_a_unit_for_the_front_and_for_an_app_machine():
    assert [u.name for u in UNITS] == ["transformer-apps.service", "transformer-front.service"]


@pytest.mark.parametrize("path", UNITS, ids=lambda p: p.name)
def test_each_unit_runs_the_launcher_with_flags_it_accepts(path, monkeypatch):
    unit = _unit(path)
    assert set(unit.sections()) == {"Unit", "Service", "Install"}
    assert unit["Service"]["Restart"] == "always" and "EnvironmentFile" in unit["Service"]
    args = _launcher_args(shlex.split(unit["Service"]["ExecStart"]), monkeypatch)
    assert args.redis == REDIS_URL                                # from the environment file, not the command
    if path.name == "transformer-front.service":
        assert args.processes == 0 and len(args.backend) == 4
    else:
        assert args.apps_only and args.processes == 2


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
@pytest.mark.parametrize("path", UNITS, ids=lambda p: p.name)
def test_systemd_finds_nothing_wrong_with_each_unit(path, tmp_path):
    here = tmp_path / path.name                                   # the checkout's path where the unit has /srv/...
    here.write_text(path.read_text().replace("/srv/transformer-explained", str(ROOT)))
    done = subprocess.run(["systemd-analyze", "verify", str(here)], capture_output=True, text=True)
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr


def _documents() -> dict[tuple[str, str], dict]:
    docs = [d for d in yaml.safe_load_all((DEPLOY / "kubernetes.yaml").read_text()) if d]
    for d in docs:
        assert {"apiVersion", "kind", "metadata"} <= set(d) and d["metadata"]["name"], d
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def test_the_kubernetes_file_holds_redis_the_app_pods_and_the_front():
    assert set(_documents()) == {("Secret", "transformer-redis"), ("Deployment", "transformer-redis"),
                                 ("Service", "transformer-redis"), ("StatefulSet", "transformer-apps"),
                                 ("Service", "transformer-apps"), ("Deployment", "transformer-front"),
                                 ("Service", "transformer-front")}


def test_each_service_selects_its_pods_and_each_secret_read_exists():
    docs = _documents()
    workloads = {name: d for (kind, name), d in docs.items() if kind in ("Deployment", "StatefulSet")}
    for (kind, name), d in docs.items():
        if kind == "Service":
            assert d["spec"]["selector"] == workloads[name]["spec"]["template"]["metadata"]["labels"]
    for w in workloads.values():
        assert w["spec"]["selector"]["matchLabels"] == w["spec"]["template"]["metadata"]["labels"]
        for c in w["spec"]["template"]["spec"]["containers"]:
            for e in c.get("env", []):
                ref = e["valueFrom"]["secretKeyRef"]
                assert ref["key"] in docs[("Secret", ref["name"])]["stringData"], ref


def test_the_front_names_every_app_process_of_every_app_pod(monkeypatch):
    docs = _documents()
    apps, front = docs[("StatefulSet", "transformer-apps")], docs[("Deployment", "transformer-front")]
    app_args = _launcher_args(apps["spec"]["template"]["spec"]["containers"][0]["command"], monkeypatch)
    front_args = _launcher_args(front["spec"]["template"]["spec"]["containers"][0]["command"], monkeypatch)
    assert app_args.apps_only and front_args.processes == 0
    first = int(app_args.bind.rpartition(":")[2])
    service = apps["spec"]["serviceName"]
    assert docs[("Service", service)]["spec"]["clusterIP"] == "None"      # headless: a name per pod
    assert sorted(front_args.backend) == sorted(
        f"{apps['metadata']['name']}-{pod}.{service}:{first + i}"
        for pod in range(apps["spec"]["replicas"]) for i in range(app_args.processes))
    ports = {p["containerPort"] for p in apps["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert ports == {first + i for i in range(app_args.processes)}
