"""The server's settings (serving/config.py): each variable read, documented in its table and in docs/serving.md
(linked from the README)."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

from serving import config
from serving.config import ServingConfig

ROOT = Path(__file__).resolve().parents[1]


def test_every_variable_read_is_in_the_modules_table_and_in_the_readme():
    read = set(re.findall(r'"(TRANSFORMER_[A-Z_]+)"', inspect.getsource(ServingConfig.from_env)))
    read |= {"TRANSFORMER_CHECKPOINTS"}                     # read by model/storage/places.py for it
    tabled = set(re.findall(r"^\| (TRANSFORMER_[A-Z_]+) \|", config.__doc__, re.M))
    readme = (ROOT / "README.md").read_text()
    settings = (ROOT / "docs" / "serving.md").read_text()          # the README's page of every setting
    assert "(docs/serving.md)" in readme
    assert len(read) > 20 and read <= tabled, read - tabled
    assert not [v for v in read if v not in settings], [v for v in read if v not in settings]
    assert set(config.VARIABLES) == tabled and len(config.VARIABLES) == len(tabled)   # what app/resources reads


def test_the_launcher_shares_the_cores_among_its_processes_unless_the_threads_are_set(monkeypatch):
    from serving.launcher import threads_per_process
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert [threads_per_process(n, {}) for n in (1, 2, 3, 16)] == ["8", "4", "2", "1"]
    assert threads_per_process(2, {"TRANSFORMER_THREADS": "0"}) == "4"          # 0: the default, as config reads it
    assert threads_per_process(2, {"TRANSFORMER_THREADS": "1"}) == "1"          # the operator's (the suite's) choice


def test_the_launcher_warns_when_its_processes_ask_for_more_threads_than_cores():
    from serving.launcher import oversubscribed
    assert oversubscribed(2, 1, 2) is None and oversubscribed(1, 2, 2) is None and oversubscribed(4, 2, 8) is None
    said = oversubscribed(2, 2, 2)
    assert said.startswith("warning: 2 app process(es) x 2 torch thread(s)") and "TRANSFORMER_THREADS unset" in said
