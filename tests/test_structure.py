"""The code's shape: no circular imports, `python -m model.trace` loads its module once,
no long functions in the app, the attention-kind registry agrees with the model."""
from __future__ import annotations

import ast
import os
import subprocess
import sys

import torch

from model.kinds import ATTENTION_KINDS
from model.trace import Trace
from tests.conftest import ROOT, random_batch, tiny_model

MAX_FUNCTION_LINES = 60


def _modules() -> dict[str, ast.Module]:
    out = {}
    for package in ("model", "app"):
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = ast.parse(path.read_text())
    return out


def _imports(tree: ast.Module, known: set[str]) -> set[str]:
    """Project modules imported at module level (not inside functions)."""
    found = set()
    for node in tree.body:
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        found |= {n for n in names if n in known}
    return found


def test_no_circular_imports():
    modules = _modules()
    graph = {name: _imports(tree, set(modules)) - {name} for name, tree in modules.items()}
    visiting, done = [], set()

    def visit(name: str) -> None:
        if name in done:
            return
        assert name not in visiting, "import cycle: " + " -> ".join(visiting[visiting.index(name):] + [name])
        visiting.append(name)
        for dep in graph[name]:
            visit(dep)
        visiting.pop()
        done.add(name)

    for name in graph:
        visit(name)
    assert not any(dep.startswith("app") for n, deps in graph.items() if n.startswith("model") for dep in deps)


COUNT_TRACE_CLASSES = """
import runpy, sys
sys.argv = ["model.trace", "--help"]
try:
    runpy._run_module_as_main("model.trace")     # what `python -m model.trace` does
except SystemExit:
    pass
print(len({v for m in list(sys.modules.values()) for v in [getattr(m, "Trace", None)] if isinstance(v, type)}))
"""


def test_the_trace_cli_runs_its_module_once():
    """`python -m model.trace` once ran model/trace.py as __main__ and imported it again
    through its own CLI: two Trace classes in one process."""
    done = subprocess.run([sys.executable, "-c", COUNT_TRACE_CLASSES], capture_output=True, text=True, cwd=ROOT,
                          timeout=120, env={**os.environ})
    assert done.returncode == 0, done.stderr
    assert "--text" in done.stdout and done.stdout.strip().splitlines()[-1] == "1", done.stdout[-300:]


def test_no_long_functions_in_the_app():
    long = []
    for path in (ROOT / "app").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({n} lines)")
    assert not long, long


def test_the_kind_registry_matches_the_recorded_attention():
    model = tiny_model(40, n_encoder_layers=2, n_decoder_layers=3)
    src, tgt = random_batch(40, [6, 4]), random_batch(40, [5, 3], seed=1, bos=True)
    trace = Trace()
    with torch.inference_mode():
        model(src, tgt, trace)
    lengths = {"source": src.size(1), "target": tgt.size(1)}
    layers = {"encoder": 2, "decoder": 3}
    for name, kind in ATTENTION_KINDS.items():
        attn = trace.attention(name)
        assert attn.shape == (layers[kind.stack], 2, 4, lengths[kind.query_side], lengths[kind.key_side]), name
        assert trace.mask(name).shape == (2, lengths[kind.query_side], lengths[kind.key_side]), name
        assert torch.equal(attn[-1], trace[kind.layer_name(layers[kind.stack] - 1)])
        blocked = ~trace.mask(name)[:, None]                   # (B, 1, Tq, Tk): the mask really is this kind's
        assert torch.all(attn[:, blocked.expand_as(attn[0])] == 0)
