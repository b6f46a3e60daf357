"""What several test modules (and the browser benchmarks) share: tiny models and data made on the
spot, checkpoints, the app under AppTest, a real app server, and Chromium helpers. Fixtures
are in conftest.py; no test module imports another, and none imports a benchmark."""
from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import fcntl
import math
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from model.network.config import preset
from model.network.transformer import Transformer
from model.storage.checkpoint import save_checkpoint

ROOT = Path(__file__).resolve().parent.parent


MULTI30K = Path(os.environ.get("MULTI30K_DIR", ROOT.parent / "shared" / "data" / "multi30k"))


WORDS = "a the dog cat man woman runs sits on in park street red blue ball big small child plays".split()


def tiny_model(vocab: int = 40, seed: int = 0, **overrides) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(preset("tiny", src_vocab_size=vocab, tgt_vocab_size=vocab, **overrides)).eval()


def random_batch(vocab: int, lengths: list[int], seed: int = 0, bos: bool = False) -> torch.Tensor:
    """Padded (B, max(lengths)) ids in 4..vocab-1; EOS (3) last, or BOS (2) first."""
    g = torch.Generator().manual_seed(seed)
    out = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    for i, n in enumerate(lengths):
        out[i, :n] = torch.randint(4, vocab, (n,), generator=g)
        if bos:
            out[i, 0] = 2
        else:
            out[i, n - 1] = 3
    return out


def sentences(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8))) for _ in range(n)]


REVERSE_WORDS = [f"w{c}" for c in "abcdefghijkl"]


def write_reverse_task(directory: Path, n_train: int = 3000, n_val: int = 60, seed: int = 0) -> None:
    """A corpus directory (train.src/tgt, val.src/tgt) whose targets are the sources reversed (train.py's tests)."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("val", n_val)):
        src = [" ".join(rng.choice(REVERSE_WORDS) for _ in range(rng.randint(2, 6))) for _ in range(n)]
        (directory / f"{split}.src").write_text("".join(s + "\n" for s in src))
        (directory / f"{split}.tgt").write_text("".join(" ".join(s.split()[::-1]) + "\n" for s in src))


def base_args(data: Path, out: Path, *extra: str) -> list[str]:
    """train.py's arguments for a tiny model on write_reverse_task's corpus."""
    return ["--data", str(data), "--src", "src", "--tgt", "tgt", "--preset", "tiny", "--d-model", "64",
            "--d-ff", "128", "--vocab-size", "30", "--batch-tokens", "600", "--lr", "3e-3", "--warmup", "60",
            "--out", str(out), "--no-progress", "--threads", "1", *extra]


# Debian's headless shell of Chromium (the same Blink and V8, no browser around them) when it is installed: the three
# largest browser modules cost Chromium ~7 % less CPU in it (BENCHMARKS.md, "The test suite"); else the browser itself.
# TEST_CHROMIUM=/usr/bin/chromium runs the tests in the browser the students use.
CHROMIUM = os.environ.get("TEST_CHROMIUM") or next(
    (path for path in ("/usr/bin/chromium-headless-shell", "/usr/bin/chromium") if os.path.exists(path)),
    "/usr/bin/chromium")


def wait_healthy(url: str, proc, timeout: float = 180) -> None:
    """Poll url/_stcore/health until it says ok; else kill proc and fail with its output."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read() == b"ok":
                return
        except OSError:
            time.sleep(0.5)
    proc.kill()
    pytest.fail(f"{url} did not become healthy: " + (proc.stdout.read() if proc.stdout else ""))


def make_checkpoint(tokenizer, path, half=False, seed=0):
    torch.manual_seed(seed)
    m = Transformer(preset("tiny", src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size)).eval()
    save_checkpoint(path, m, tokenizer, tokenizer, meta={"src_lang": "en", "tgt_lang": "de"}, half=half,
                    extra_files={"training_log.jsonl": "", "README.md": "# card\n"})
    return m


APP = str(ROOT / "app" / "main.py")


def goto(at: AppTest, slug: str) -> AppTest:
    """Open the page whose URL path is /slug and run: through a `view` link parameter, which
    the app honours on any run (AppTest has no public switch to a page that is a function)."""
    at.query_params["view"] = slug          # the app opens the page a `view` parameter names
    return at.run()


def page_of(at: AppTest) -> str | None:
    """The page on screen: app/pages.py wraps each page in a container keyed page-<slug>."""
    def walk(node):
        for child in getattr(node, "children", {}).values():
            block_id = str(getattr(getattr(child, "proto", None), "id", "") or "")
            if "-page-" in block_id:
                return block_id.rsplit("-page-", 1)[1]
            found = walk(child)
            if found:
                return found
        return None
    return walk(at.main)


LAYER_PAGES = {"explore", "head", "masks"}      # pages with the layer / head picker


def tour(nodes: list[str], start: str) -> list[str]:
    """A walk that takes every ordered pair (a, b), a != b, exactly once (an Eulerian
    circuit of the complete directed graph, by Hierholzer's algorithm)."""
    left = {a: [b for b in nodes if b != a] for a in nodes}
    stack, walk = [start], []
    while stack:
        if left[stack[-1]]:
            stack.append(left[stack[-1]].pop(0))
        else:
            walk.append(stack.pop())
    return walk[::-1]


def round_of(nodes: list[str], start: str, stride: int = 5) -> list[str]:
    """A walk from `start` round all nodes and back, each move `stride` places on: every node entered and
    left once, from and to nodes that are not its neighbours in the list (`stride` prime to len(nodes))."""
    n, at = len(nodes), nodes.index(start)
    assert math.gcd(stride, n) == 1, (stride, n)
    return [nodes[(at + stride * k) % n] for k in range(n + 1)]


ARTIFACTS = ROOT / "test-artifacts"


def run_apart(coroutine):
    """`asyncio.run(coroutine)` in a thread of its own. While a test module's browser is open, Playwright's
    sync API keeps its event loop running in the test's thread, where `asyncio.run` refuses to start
    (which test runs after which browser test is up to pytest-xdist)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def app_server(checkpoints: Path, **env: str):
    """`streamlit run app/main.py` on a free loopback port, until the block ends; yields its URL."""
    port = free_port()
    env = {**os.environ, "TRANSFORMER_CHECKPOINTS": str(checkpoints), **env}
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "app" / "main.py"),
                             "--server.headless", "true", "--server.port", str(port), "--server.address",
                             "127.0.0.1", "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, proc, timeout=60)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def made_once(tmp_path_factory, name: str, make) -> Path:
    """A folder made by `make(folder)` once per test run, by whichever pytest-xdist worker asks first; the others
    wait for it and share it. A module-scoped fixture is otherwise made again in each worker that runs one of the
    module's tests (the lesson file of ten sentences: ~14 s each). What is in it is read, never changed."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent                        # the run's own folder, above each worker's
    folder, done = root / f"once-{name}", root / f"once-{name}" / ".made"
    with open(root / f"once-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)          # let go when the file closes, also when `make` raises
        if not done.is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            done.touch()
    return folder


class Tabs:
    """A module's Chromium as its tests see it, its tabs kept from one test to the next: a new tab costs Chromium
    about 2 core-seconds more than a kept one loading a page (a renderer process started, the app's scripts compiled
    again; measured in BENCHMARKS.md, "The suite"), and the browser tests open a hundred.

    `new_page(viewport=...)` hands out a kept tab (at about:blank, in a context of its own) when one is free, else
    a new one; `end_test()` sends the tabs handed out back to about:blank (their app sessions end, as a closed
    tab's would) and closes everything else the test opened: its own contexts (`new_context`: another locale, its
    own cookies, routes) and the tabs it closed itself are not kept. A tab keeps what was set on it: a test that
    listens to a tab's events removes its listener (or opens a context of its own)."""

    BLANK = "about:blank"
    DEFAULT = {"width": 1280, "height": 720}        # Playwright's own, for a tab asked for without a viewport

    def __init__(self, browser) -> None:
        self.browser = browser
        self.free: list = []
        self.lent: list = []

    def new_page(self, viewport: dict | None = None, **options):
        size = viewport or self.DEFAULT
        if options:                             # anything but a size: a tab of its own, closed at the test's end
            page = self.browser.new_page(viewport=size, **options)
            page.add_init_script(RUN_WATCH)
            return page
        while self.free and self.free[-1].is_closed():      # closed since (another Tabs of the same browser)
            self.free.pop()
        if self.free:
            page = self.free.pop()
            page.set_viewport_size(size)
        else:
            page = self.browser.new_page(viewport=size)
            page.add_init_script(RUN_WATCH)
        self.lent.append(page)
        return page

    def new_context(self, **options):
        context = self.browser.new_context(**options)
        context.add_init_script(RUN_WATCH)
        return context

    def end_test(self) -> None:
        kept = []
        for page in self.lent:
            if page.is_closed():
                continue
            try:
                page.goto(self.BLANK)
                kept.append(page)
            except Exception:  # noqa: BLE001 - a tab that cannot leave its page is closed, not kept
                page.context.close()
        self.lent = []
        self.free += kept
        keep = {id(page.context) for page in self.free}
        for context in self.browser.contexts:
            if id(context) not in keep:
                context.close()


# What `settle` waits on, installed in every page the browser tests open through `Tabs`: the app's script runs as the
# page sees them, and the moment of the last thing done to the page (a click, a key, an input, a focus leaving; from
# any of its frames: a component's too).
# - Streamlit's `data-test-script-state` on its root: "rerunRequested" or "running", then "notRunning".
# - The server's own word on each run's end, read from the websocket (ForwardMsg field 6, `script_finished`; field 4,
#   `new_session`, begins a run): a run that ended early for a rerun (st.rerun, a page switch, a click during a run:
#   status 2) is followed by another, and between the two the root can say "notRunning" for as long as the server
#   takes to begin it (on a busy machine, hundreds of milliseconds). Until that run begins, the page is not settled.
RUN_WATCH = """(() => {
  const top = (() => { try { return window.top.document && window.top; } catch (e) { return window; } })();
  const now = () => performance.timeOrigin + performance.now();
  const note = () => { if (top.__runs) top.__runs.acted = now(); };
  for (const kind of ['pointerdown', 'mousedown', 'click', 'keydown', 'input', 'change', 'focusout'])
    window.addEventListener(kind, note, true);
  if (window !== top || window.__runs) return;
  const runs = window.__runs = {acted: now(), started: 0, changed: 0, state: null, follows: false, read: null};
  const varint = (b, i) => {
    let v = 0, scale = 1, x;
    do { x = b[i++]; v += (x & 127) * scale; scale *= 128; } while (x & 128 && i < b.length);
    return [v, i];
  };
  const read = (data) => {                 // the top level of one ForwardMsg
    if (!(data instanceof ArrayBuffer)) return;
    const b = new Uint8Array(data);
    for (let i = 0, tag, v; i < b.length;) {
      [tag, i] = varint(b, i);
      const field = Math.floor(tag / 8), wire = tag & 7;
      if (wire === 0) {
        [v, i] = varint(b, i);
        if (field === 6) { runs.follows = v === 2; runs.changed = now(); }
      } else if (wire === 2) {
        [v, i] = varint(b, i);
        if (field === 4) { runs.follows = false; runs.started = runs.changed = now(); }
        i += v;
      } else if (wire === 1) i += 8;
      else if (wire === 5) i += 4;
      else return;
    }
  };
  runs.read = read;                        // tests feed it messages by hand
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) { super(...args); this.addEventListener('message', (e) => read(e.data)); }
  };
  new MutationObserver(() => {
    const app = document.querySelector("[data-testid='stApp']");
    const state = app && app.dataset.testScriptState;
    if (state === runs.state) return;
    if (state === 'running') runs.started = now();
    runs.state = state;
    runs.changed = now();
  }).observe(document, {subtree: true, attributes: true, attributeFilter: ['data-test-script-state']});
})()"""

# A run begins at most this long after what was done to the page (a widget's debounce, a round trip), and the page is
# settled once no run has begun or ended for QUIET_MS (a run can follow a run the server did not end early: a
# component's value sent when it has drawn, a timed fragment).
RUN_STARTS_MS, QUIET_MS = 250, 150
SETTLED = """([startMs, quietMs]) => {
  const app = document.querySelector("[data-testid='stApp']"), runs = window.__runs;
  if (!app || app.dataset.testScriptState !== 'notRunning' || runs.follows) return false;
  if (app.dataset.testConnectionState !== 'CONNECTED') return false;   // its widgets disabled until it is again
  const now = performance.timeOrigin + performance.now();
  if (runs.started < runs.acted && now - runs.acted < startMs) return false;    // done to the page, no run yet
  return now - runs.changed >= quietMs;
}"""


def settle(page, timeout: float = 60_000, started: bool = False) -> None:
    """Wait until the app's script run is over and nothing is pending: the page is connected to its server, the run
    that what was last done to the page began (or RUN_STARTS_MS without one) has ended, no run the server ended early
    for a rerun waits for its successor, and no run began or ended for QUIET_MS (polled every POLL_MS). `started`:
    the run is known to have begun (its page is showing), so none is waited for. A page opened without `Tabs` (no
    watcher): the fixed waits these replace (RUN_STARTS_MS, the root's "notRunning", QUIET_MS)."""
    if not page.evaluate("() => window.__runs !== undefined"):
        if not started:
            page.wait_for_timeout(RUN_STARTS_MS)
        page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=timeout)
        page.wait_for_timeout(QUIET_MS)
        return
    wait_in_page(page, SETTLED, [0 if started else RUN_STARTS_MS, QUIET_MS], timeout=timeout)


# How often a waited-for condition is checked in the page. Playwright's default checks it at every animation
# frame, which keeps the renderer drawing frames all the while: on the explorer, 0.27-0.31 core-s for each second
# of waiting against 0.04-0.05 at 100 ms (session 37), taken from the app the test waits on.
POLL_MS = 100


def wait_in_page(page, condition: str, arg=None, timeout: float = 30_000) -> None:
    """Wait until the JS `condition` (a function of `arg`, or an expression) is true in the page."""
    page.wait_for_function(condition, arg=arg, timeout=timeout, polling=POLL_MS)


def watch_connection(page) -> None:
    """Note on the page when it loses its server (Streamlit's connection state leaves CONNECTED): what
    `reconnected` waits for, installed before the server goes."""
    page.evaluate("""() => {
      const app = document.querySelector("[data-testid='stApp']");
      window.__lostConnection = false;
      new MutationObserver(() => {
        if (app.dataset.testConnectionState !== 'CONNECTED') window.__lostConnection = true;
      }).observe(app, {attributes: true, attributeFilter: ['data-test-connection-state']});
    }""")


def reconnected(page, timeout: float = 30_000) -> None:
    """Wait until a page that lost its server (`watch_connection`) is connected again (to a live one)."""
    wait_in_page(page, """() => window.__lostConnection &&
      document.querySelector("[data-testid='stApp']").dataset.testConnectionState === 'CONNECTED'""",
               timeout=timeout)


def go_to(page, title: str, slug: str, collapsed: bool = False) -> None:
    """Click a page in the menu and wait for it; click again if a busy page let the click pass. `collapsed`: the
    sidebar is closed (projector mode), so the menu's link is sent its click event without being shown.
    A page reached from the menu costs Chromium about half of one loaded from its link (the app's scripts stay)."""
    for _ in range(2):
        link = page.locator("[data-testid='stSidebarNavLink']", has_text=title)
        if collapsed:
            link.dispatch_event("click")
        else:
            link.click()
        try:
            page.wait_for_selector(f".st-key-page-{slug}", timeout=20_000)
            break
        except Exception:  # noqa: BLE001 - playwright's TimeoutError: try the click once more
            continue
    settle(page, started=True)


def no_errors(page) -> None:
    assert page.locator("[data-testid='stException']").count() == 0
    assert "Traceback" not in page.content()


# The explorer's grid and one-head chart, drawn in the browser (app/attention_charts.py): each says when the data
# of the last run is on screen.
EXPLORE_DRAWN = ".attention-chart[data-state='drawn'] .main-svg"
ALL_DRAWN = ("() => { const c = document.querySelectorAll('.attention-chart');"
             " return c.length >= 2 && [...c].every(e => e.dataset.state === 'drawn'); }")


def open_page(browser, url: str, selector: str, height: int = 1100):
    """A new browser page on `url`, once `selector` is drawn and the script run is over."""
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": 1500, "height": height})
    page.goto(url)
    wait_drawn(page, selector)
    settle(page)
    return page


def wait_drawn(page, selector: str, timeout: float = 90_000) -> None:
    """Wait until `selector` is visible; if it never is, fail with what the page shows instead (its words,
    and a screenshot in test-artifacts/not-drawn.png), not a bare timeout."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    try:
        page.wait_for_selector(selector, timeout=timeout)
    except PlaywrightTimeout:
        page.screenshot(path=str(ARTIFACTS / "not-drawn.png"), full_page=True)
        words = " ".join(page.inner_text("body").split())[:800]
        state = page.get_attribute("[data-testid='stApp']", "data-test-script-state")
        raise AssertionError(f"{selector} not drawn on {page.url} within {timeout / 1000:.0f} s "
                             f"(script {state}); the page shows: {words}") from None


def choose(page, key: str, option: str) -> None:
    """Pick an option of the selectbox whose widget key is `key`, or of the browser's own picker of that name (the
    explorer's layer and head: app/attention_charts.py)."""
    page.locator(f"select[data-key='{key}'], .st-key-{key}").first.wait_for(timeout=30_000)
    own = page.locator(f"select[data-key='{key}']")
    if own.count():
        own.first.select_option(option)
        return
    opener = page.locator(f".st-key-{key} button[aria-label='Open']").first      # the whole list, unfiltered
    wanted = page.get_by_role("option", name=option, exact=True).first
    for _ in range(6):          # a click while charts are still laying the page out, or a run redrawing it, can miss
        opener.click()
        try:
            wanted.wait_for(timeout=3000)
            break
        except Exception:  # noqa: BLE001 - playwright's TimeoutError; try again once the page is settled
            page.keyboard.press("Escape")
            settle(page, started=True)
    wanted.click()
    settle(page)


def shown_value(page, key: str) -> str:
    """The value a selectbox shows (its text without the label), or the browser's own picker of that name."""
    return page.locator(f"select[data-key='{key}'], .st-key-{key} [role='combobox']").first.input_value().strip()


def click_block(page, block: str) -> None:
    figure = page.locator(".st-key-overview_figure .js-plotly-plot")
    box = figure.bounding_box()
    x, y = page.evaluate("""(block) => {
        const el = document.querySelector('.st-key-overview_figure .js-plotly-plot');
        const m = el._fullData[el._fullData.length - 1];
        const i = Array.from(m.customdata).indexOf(block);
        return [el._fullLayout.xaxis._offset + el._fullLayout.xaxis.l2p(m.x[i]),
                el._fullLayout.yaxis._offset + el._fullLayout.yaxis.l2p(m.y[i])];
    }""", block)
    page.mouse.click(box["x"] + x, box["y"] + y)


def array(value) -> np.ndarray:
    """Plotly JSON arrays: plain lists, or typed arrays {"dtype", "bdata" (base64), "shape"}."""
    if isinstance(value, dict) and "bdata" in value:
        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        if isinstance(shape, str):
            shape = [int(x) for x in shape.split(",")]
        return flat.reshape(shape).astype(float) if shape else flat.astype(float)
    return np.array(value, dtype=float)


def link_of(at: AppTest) -> dict[str, str]:
    return {k: (v[0] if isinstance(v, list) else v) for k, v in ((k, at.query_params[k]) for k in at.query_params)}


# Words that make a sentence English and that German does not use (not "in", "an", "was", "will", "so").
ENGLISH = frozenset("the of and is are to with this which that from each every its what where how when not for or "
                    "by be has have it you your been does than only into their there these those".split())


def english_sentences(texts: list[str]) -> list[str]:
    """The texts that read as English: two or more of ENGLISH's words, once code (`...`), quoted data
    („...“, “...”) and markup are taken out. Tokens and sentences of the model are data, not interface."""
    found = []
    for text in texts:
        plain = re.sub(r"`[^`]*`|„[^“]*“|“[^”]*”|<[^>]+>|%\{[^}]*\}|\$[^$]*\$", " ", text)
        words = re.findall(r"[A-Za-z']+", plain.lower())
        if len([w for w in words if w in ENGLISH]) >= 2:
            found.append(text)
    return found


AXE = ROOT / ".cache" / "axe" / "node_modules" / "axe-core" / "axe.min.js"     # `make test` installs it (npm)
AXE_RUN = """async () => {
  const r = await axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}});
  return r.violations.map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.length,
                                 where: v.nodes.slice(0, 2).map(n => n.failureSummary)}));
}"""


def axe(page, where: str, counts: dict, violations: dict) -> None:
    """axe-core on the page as drawn: every violation counted, the serious and critical ones kept."""
    if not AXE.is_file():
        return
    if not page.evaluate("() => typeof axe !== 'undefined'"):     # once per document (a page from the menu keeps it)
        page.add_script_tag(path=str(AXE))
    found = page.evaluate(AXE_RUN)
    counts[where] = len(found)
    if bad := [v for v in found if v["impact"] in ("serious", "critical")]:
        violations[where] = bad
