"""Old import paths, kept working: model/ was one drawer of modules and is now rooms by concern
(network, inference, storage, training, analysis, commands). Code written against the old paths
(`from model.checkpoint import load_checkpoint`, `model.pipeline.explain`, `import model.trace`) and
the documented `python -m model.translate` commands still work: the old name is the same module
object as the new one (one class, one cache, patching either patches both), never a copy.

Each old path is written once, here; every command's `python -m` shortcut comes from
model/commands/registry.py. New code imports the new paths.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import CodeType, ModuleType

from model.commands.registry import COMMANDS

# old module -> where it lives now (a prefix: model.heads.store -> model.analysis.heads.store)
MOVED: dict[str, str] = {
    "model.config": "model.network.config", "model.masks": "model.network.masks",
    "model.layers": "model.network.layers", "model.transformer": "model.network.transformer",
    "model.tokenizer": "model.network.tokenizer", "model.kinds": "model.network.kinds",
    "model.names": "model.network.names",
    "model.decoding": "model.inference.decoding", "model.pipeline": "model.inference.pipeline",
    "model.stream": "model.inference.stream", "model.ensemble": "model.inference.ensemble",
    "model.confidence": "model.inference.confidence", "model.trace": "model.network.trace",
    "model.attribution": "model.analysis.attribution", "model.heads": "model.analysis.heads",
    "model.readings": "model.analysis.readings", "model.laps": "model.analysis.laps",
    "model.data": "model.training.data", "model.tasks": "model.training.tasks", "model.lab": "model.training.lab",
    "model.metrics": "model.training.metrics",
    "model.checkpoint": "model.storage.checkpoint", "model.hub": "model.storage.hub",
    "model.places": "model.storage.places", "model.card": "model.storage.card",
    "model.cli": "model.commands.shared", "model.command": "model.commands.registry",
}
# `python -m model.translate`. Where the shortcut is also an old library package (model.trace,
# model.heads, model.attribution), `python -m` runs the package's __main__, which is the command.
# (model.convert and model.attribution.faithfulness are the commands, which import what they convert
# or measure with: old code importing those names from there still finds them.)
MOVED.update({c.shortcut + (".__main__" if c.shortcut in MOVED else ""): c.module for c in COMMANDS.values()})


_LONGEST_FIRST = sorted(MOVED, key=len, reverse=True)     # model.trace.__main__ before model.trace


def new_name(old: str) -> str | None:
    """Where an old module path lives now (None: it did not move)."""
    for prefix in _LONGEST_FIRST:
        if old == prefix or old.startswith(prefix + "."):
            return MOVED[prefix] + old[len(prefix):]
    return None


class _Alias(importlib.abc.Loader):
    """Loads an old name as the module under its new name; `python -m OLD` runs the new file."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        pass                                              # the module under its new name is already run

    def get_code(self, fullname: str) -> CodeType | None:  # runpy: `python -m model.translate`
        spec = importlib.util.find_spec(self.target)
        return spec.loader.get_code(self.target) if spec and spec.loader else None


class _OldPaths(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        new = new_name(fullname) if fullname.startswith("model.") else None
        if new is None:
            return None
        found = importlib.util.find_spec(new)
        if found is None:
            return None
        spec = importlib.machinery.ModuleSpec(fullname, _Alias(new), origin=found.origin,
                                              is_package=found.submodule_search_locations is not None)
        if found.submodule_search_locations is not None:
            spec.submodule_search_locations = list(found.submodule_search_locations)
        return spec


def install() -> None:
    if not any(isinstance(f, _OldPaths) for f in sys.meta_path):
        sys.meta_path.insert(0, _OldPaths())
