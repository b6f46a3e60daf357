"""The code's shape: layers point one way (model <- figures, serving <- app), app/ holds only
Streamlit code in files of at most 400 lines, only app/state.py touches st.session_state, tests
import neither each other nor benchmarks; no circular imports, `python -m model.trace` loads its
module once, no long functions in the app, the attention-kind registry agrees with the model."""
from __future__ import annotations

import ast
import os
import subprocess
import sys

import torch

from model.network.kinds import ATTENTION_KINDS
from model.network.trace import Trace
from tests.support import ROOT, random_batch, tiny_model

# model/'s rooms, bottom to top: each imports only from its own room and the rooms below it (anywhere in
# a module, functions included; an import only for type checking does not count)
ROOMS = ("network", "inference", "storage", "training", "analysis", "commands")
MAX_FUNCTION_LINES = 60
MAX_APP_FILE_LINES = 400
PACKAGES = ("i18n", "model", "figures", "serving", "webpage", "app", "transformer_explained")
# what each layer may import from the project: nothing points upward (the installed command's package,
# transformer_explained, sits on top: it starts the app and the tools; nothing imports it). i18n, the
# interface's languages, sits below everything: every layer may put its texts into words through it.
MAY_IMPORT = {"i18n": {"i18n"}, "model": {"model", "i18n"}, "figures": {"model", "figures", "i18n"},
              "serving": {"model", "serving", "i18n"}, "webpage": {"model", "figures", "webpage", "i18n"},
              "app": {"model", "figures", "serving", "webpage", "app", "i18n"},
              "transformer_explained": {"model", "serving", "transformer_explained", "i18n"}}


def _modules() -> dict[str, ast.Module]:
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = ast.parse(path.read_text())
    return out


def _all_imports(tree: ast.AST) -> set[str]:
    """Every module a module imports (and `module.name` for each name taken from one), anywhere in it,
    inside functions too (an import made late to dodge a circle is still a circle), except under
    `if TYPE_CHECKING:`."""
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in
                   ast.unparse(node.test) for n in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return found


def _imports(tree: ast.Module, known: set[str]) -> set[str]:
    """The project's modules a module imports (`_all_imports`)."""
    return _all_imports(tree) & known


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


def _project_imports(tree: ast.AST) -> set[str]:
    """Top-level packages of the project that a module imports anywhere (also inside functions)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found & {*PACKAGES, "tests", "benchmarks", "streamlit"}


def test_layers_point_one_way():
    wrong = [f"{name} imports {dep}" for name, tree in _modules().items() for dep in _project_imports(tree)
             if dep in PACKAGES and dep not in MAY_IMPORT[name.split(".")[0]]]
    assert not wrong, wrong


def _runtime_model_imports(tree: ast.AST) -> set[str]:
    """Modules of model/ imported anywhere in a module, except under `if TYPE_CHECKING:`."""
    return {n for n in _all_imports(tree) if n.startswith("model.")}


def test_the_model_s_rooms_import_downwards():
    wrong = []
    for name, tree in _modules().items():
        parts = name.split(".")
        if parts[0] != "model" or len(parts) < 2 or parts[1] not in ROOMS:
            continue                                          # model/__init__.py and model/moved.py sit on top
        for dep in _runtime_model_imports(tree):
            room = dep.split(".")[1]
            if room in ROOMS and ROOMS.index(room) > ROOMS.index(parts[1]):
                wrong.append(f"{name} ({parts[1]}) imports {dep} ({room})")
            elif room not in ROOMS:
                wrong.append(f"{name} imports {dep}: an old path (model/moved.py), not a room")
    assert not wrong, wrong


def test_the_model_s_package_files_only_re_export():
    """model/'s __init__.py files say what their room holds and re-export; the logic lives in modules."""
    logic = []
    for path in (ROOT / "model").rglob("__init__.py"):
        if path.parent == ROOT / "model":
            continue                                          # the top: lazy entry points and the old paths
        for node in ast.parse(path.read_text()).body:
            docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            if not (docstring or isinstance(node, ast.Import | ast.ImportFrom)):
                logic.append(f"{path.relative_to(ROOT)}:{node.lineno} {type(node).__name__}")
    assert not logic, logic


def test_figures_are_pure_builders():
    """figures/ draws arrays it is given: no torch, and nothing of the model that runs it (decoding,
    the pipeline, attribution, checkpoints); the network's names and config describe what it draws."""
    wrong = [f"{name} imports {m}" for name, tree in _modules().items() if name.split(".")[0] == "figures"
             for m in _all_imports(tree)
             if m.split(".")[0] == "torch" or (m.startswith("model.") and not m.startswith("model.network"))]
    assert not wrong, wrong


def test_only_the_app_imports_streamlit_and_every_app_module_does():
    """Streamlit's protocol buffers are the one exception: serving/protocol.py speaks them."""
    outside = [n for n, tree in _modules().items() if not n.startswith("app") and "streamlit" in _project_imports(tree)
               and n != "serving.protocol"]
    assert not outside, f"Streamlit outside app/: {outside}"
    pure = [n for n, tree in _modules().items() if n.startswith("app") and n not in ("app", "app.views")
            and "streamlit" not in _project_imports(tree)]
    assert not pure, f"Streamlit-free modules belong in model/, figures/ or serving/: {pure}"


def test_every_fragment_speaks_the_sessions_language():
    """A fragment's run does not pass through main(), which sets the language: app/ui.py's fragment does."""
    direct = [f"{p.relative_to(ROOT)}:{node.lineno}" for p in (ROOT / "app").rglob("*.py") if p.name != "ui.py"
              for node in ast.walk(ast.parse(p.read_text()))
              if isinstance(node, ast.Attribute) and node.attr == "fragment" and getattr(node.value, "id", "") == "st"]
    assert not direct, f"st.fragment outside app/ui.py (use app.ui.fragment): {direct}"


def test_app_files_stay_short():
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "app").rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_APP_FILE_LINES}
    assert not long, long


def test_only_the_state_owner_touches_session_state():
    touched = []
    for path in (ROOT / "app").rglob("*.py"):
        if path.relative_to(ROOT).as_posix() == "app/state.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "session_state":
                touched.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not touched, f"st.session_state outside app/state.py: {touched}"


def test_tests_import_no_other_test_module_and_no_benchmark():
    wrong = []
    for path in (ROOT / "tests").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [module or ""]
            for name in names:
                if name.startswith("benchmarks") or (name.startswith("tests.") and name != "tests.support"):
                    wrong.append(f"{path.name}:{node.lineno} {name}")
    assert not wrong, wrong


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
    """`python -m model.trace` once ran model/network/trace.py as __main__ and imported it again
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


def test_tests_use_no_private_streamlit_attribute():
    """AppTest's and Streamlit's underscored attributes change without notice: tests use the public API
    (the one underscored name allowed is our own model's, in test_model.py)."""
    private = []
    for path in (ROOT / "tests").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                    and node.attr != "_self_attn_block":
                private.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    assert not private, private


def test_browser_tests_wait_on_page_conditions_through_wait_in_page():
    """Playwright checks a wait_for_function's condition at every animation frame unless told otherwise, which
    keeps Chromium drawing frames for the whole wait (0.3 core-s a second on the explorer, taken from the app being
    waited on): tests wait on page conditions through tests.support.wait_in_page, which polls every POLL_MS."""
    direct = []
    for path in (ROOT / "tests").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "wait_for_function" and path.name != "support.py":
                direct.append(f"{path.name}:{node.lineno}")
    assert not direct, direct
