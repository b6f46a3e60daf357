"""A class of students, each a Streamlit session driven over its own websocket protocol
(no browser per student), against a running app (one process, or `make serve`).

  .venv/bin/python -m benchmarks.class_load --url http://127.0.0.1:8501 --students 1,5,10,20,30
  .venv/bin/python -m benchmarks.class_load --url ... --students 30 --scenario shared

Scenarios
  open    N students open the app at once, each with their own sentence (a link to the
          attention explorer with text=...; it was the first page when this was written),
          then each makes --changes widget changes (the layer or head picker) after 1-3 s
          of thinking.
  shared  N students open the same link to the step page at once, then press Next --changes times.
Timed per page run: from the rerun request to the server's script_finished. "first page
+ static" adds downloading the static files a browser fetches on a first visit (their
list is read from a real Chromium once, if /usr/bin/chromium exists, else from index.html).
Checked per run: the script finished, no exception element, and the translation shown is
that student's own sentence's (computed beforehand from the same checkpoint): a wrong one
is counted as an error and, if it is another student's, as cross-talk.
Server CPU: the summed CPU time of the app processes (and haproxy) over the level's wall time.
Loopback only; every wait has a timeout and every loop a bound.
"""
from __future__ import annotations

import argparse
import asyncio
import functools
import json
import random
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from streamlit.util import calc_hash

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 120.0
EARLY_FOR_RERUN = 2   # ForwardMsg.ScriptFinishedStatus.FINISHED_EARLY_FOR_RERUN
SENTENCES = [
    "A man in a blue shirt is standing on a ladder cleaning windows.",
    "Two young girls are playing in the sand at the beach.",
    "A brown dog is running through the tall green grass.",
    "A woman with a red umbrella walks down a busy street.",
    "Three men are sitting on a bench in front of a store.",
    "A little boy is jumping into a swimming pool.",
    "A group of people are dancing at a wedding party.",
    "An old woman is selling vegetables at a market.",
    "A cyclist in a yellow jersey rides up a steep hill.",
    "Two dogs are fighting over a stick in the snow.",
    "A man is cooking food on a grill in his backyard.",
    "A girl in a pink dress is holding a white cat.",
    "Several children are climbing on a playground.",
    "A musician plays the violin on a street corner.",
    "A football player is running with the ball.",
    "A woman is reading a book on a park bench.",
    "Two men are working on the roof of a house.",
    "A child is eating an ice cream cone outside.",
    "A crowd of people watches a parade in the city.",
    "A man and a woman are riding horses on the beach.",
    "A dog catches a frisbee in the air.",
    "A young man is skateboarding down a ramp.",
    "A woman in a black coat is waiting for the bus.",
    "Four people are hiking up a snowy mountain.",
    "A baby is sleeping in a small bed.",
    "A man with a beard is playing the guitar.",
    "Two women are talking at a cafe table.",
    "A boy in a red hat throws a ball to his father.",
    "A worker in an orange vest is fixing the road.",
    "A black and white dog swims in a lake.",
]


# ---- the protocol ----------------------------------------------------------------------------------
@functools.cache
def _pb():
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ClientState_pb2 import ClientState, ContextInfo
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates
    return BackMsg, ClientState, ContextInfo, ForwardMsg, WidgetState, WidgetStates


async def http_get(host: str, port: int, path: str, cookies: dict[str, str]) -> tuple[int, int, dict[str, str]]:
    """One GET (gzip accepted, Connection: close): (status, bytes on the wire, headers).
    Set-Cookie values are added to `cookies` (the proxy's stickiness cookie)."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), TIMEOUT)
    cookie = "; ".join(f"{k}={v}" for k, v in cookies.items())
    writer.write((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept-Encoding: gzip\r\nConnection: close\r\n"
                  + (f"Cookie: {cookie}\r\n" if cookie else "") + "\r\n").encode())
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), TIMEOUT)
    writer.close()
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in head[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
        if name.strip().lower() == "set-cookie":
            k, _, v = value.strip().split(";", 1)[0].partition("=")
            cookies[k] = v
    status = int(head[0].split()[1]) if head and head[0].startswith("HTTP/") else 0
    return status, len(data), headers


@dataclass
class Run:
    kind: str
    seconds: float
    ok: bool
    error: str = ""
    with_static: float | None = None   # first page: plus the HTTP requests before the websocket
    waited: bool = False               # the page showed the admission gate's "in line" note


@dataclass
class Student:
    """One browser: a cookie jar, a websocket, the elements of its current page."""
    url: str
    query: dict[str, str]
    page_hash: str = ""
    page: str = ""          # the page's URL path (as in a browser's address bar); sets page_hash
    cookies: dict[str, str] = field(default_factory=dict)
    widgets: dict[str, tuple[str, object]] = field(default_factory=dict)   # key -> (element id, proto)
    fragments: dict[str, str] = field(default_factory=dict)    # widget key -> the fragment it is drawn in
    blocks: dict[tuple, str] = field(default_factory=dict)
    markdown: dict[tuple, str] = field(default_factory=dict)
    exceptions: list[str] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.page:
            self.page_hash = calc_hash(self.page)
        u = urllib.parse.urlsplit(self.url)
        self.host, self.port = u.hostname or "127.0.0.1", u.port or 80
        self.cache: dict[str, object] = {}
        self.done: asyncio.Future | None = None
        self.fragment_run = False
        self.saw_wait = False
        self.ws = None
        self.reader: asyncio.Task | None = None

    async def open(self, static: list[str] = ()) -> float:
        """Connect as a browser does; returns the seconds spent on HTTP before the websocket."""
        from websockets.asyncio.client import connect
        start = time.monotonic()
        for path in ("/_stcore/health", "/_stcore/host-config"):    # first: the proxy's cookie comes back here
            status, _, _ = await http_get(self.host, self.port, path, self.cookies)
            if status != 200:
                raise RuntimeError(f"GET {path}: {status}")
        self.static_bytes = await self._fetch_static(static)
        http_s = time.monotonic() - start
        cookie = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        self.ws = await asyncio.wait_for(connect(
            f"ws://{self.host}:{self.port}/_stcore/stream", subprotocols=["streamlit", "PLACEHOLDER"],
            additional_headers={"Cookie": cookie} if cookie else None, max_size=None, ping_interval=None), TIMEOUT)
        self.reader = asyncio.create_task(self._read())
        return http_s

    async def _fetch_static(self, paths: list[str]) -> int:
        """Static files over 6 connections at a time, as a browser fetches from one host."""
        slots = asyncio.Semaphore(6)

        async def one(path: str) -> int:
            async with slots:
                status, size, _ = await http_get(self.host, self.port, path, self.cookies)
            if status != 200:
                raise RuntimeError(f"GET {path}: {status}")
            return size
        return sum(await asyncio.gather(*(one(p) for p in paths)))

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self.reader is not None:
            self.reader.cancel()

    async def _read(self) -> None:
        ForwardMsg = _pb()[3]
        try:
            async for data in self.ws:
                msg = ForwardMsg()
                msg.ParseFromString(data)
                self._handle(msg)
        finally:
            if self.done is not None and not self.done.done():
                self.done.set_exception(ConnectionError("websocket closed"))

    def _handle(self, msg) -> None:
        kind = msg.WhichOneof("type")
        if kind == "ref_hash":
            msg = self.cache[msg.ref_hash]
            kind = msg.WhichOneof("type")
        elif msg.metadata.cacheable and msg.hash:
            self.cache[msg.hash] = msg
        if kind == "new_session":
            self.page_hash = msg.new_session.page_script_hash
            if not self.fragment_run:          # a fragment's rerun redraws only the fragment
                self.widgets.clear(), self.blocks.clear(), self.markdown.clear()
            self.exceptions.clear()
        elif kind == "delta":
            self._delta(tuple(msg.metadata.delta_path), msg.delta)
        elif kind == "script_finished" and self.done is not None and not self.done.done():
            if msg.script_finished != EARLY_FOR_RERUN:      # a page switch or st.rerun: another run follows
                self.done.set_result(msg.script_finished)

    def _delta(self, path: tuple, delta) -> None:
        if delta.WhichOneof("type") == "add_block":
            self.blocks[path] = delta.add_block.id
            return
        if delta.WhichOneof("type") != "new_element":
            return
        el = delta.new_element
        kind = el.WhichOneof("type")
        proto = getattr(el, kind)
        if kind == "markdown":
            self.markdown[path] = proto.body
        elif kind == "alert" and " in line " in proto.body:
            self.saw_wait = True
        elif kind == "exception":
            self.exceptions.append(proto.message[:200])
        if "id" in proto.DESCRIPTOR.fields_by_name and proto.id.startswith("$$ID-") and proto.id.count("-") >= 2:
            key = proto.id.split("-", 2)[2]
            self.widgets[key] = (proto.id, proto)
            self.fragments[key] = delta.fragment_id

    def translation(self) -> str | None:
        for path, block in self.blocks.items():
            if block.endswith("-translation") and path + (0,) in self.markdown:
                return self.markdown[path + (0,)].removeprefix("### ").strip()
        return None

    async def rerun(self, kind: str, states: list = (), expect: str | None = None, fragment: str = "") -> Run:
        """One page run (or, with `fragment`, the rerun of that fragment only, as a browser asks
        for it when a widget inside a fragment changes); `expect`: the translation to see."""
        BackMsg, ClientState, ContextInfo, _, _, WidgetStates = _pb()
        client = ClientState(query_string=urllib.parse.urlencode(self.query), page_script_hash=self.page_hash,
                             cached_message_hashes=list(self.cache), fragment_id=fragment,
                             context_info=ContextInfo(timezone="UTC", locale="en-US", url=self.address()))
        client.widget_states.CopyFrom(WidgetStates(widgets=list(states)))
        self.done = asyncio.get_running_loop().create_future()
        self.fragment_run = bool(fragment)
        self.saw_wait = False
        start = time.monotonic()
        try:
            await self.ws.send(BackMsg(rerun_script=client).SerializeToString())
            await asyncio.wait_for(asyncio.shield(self.done), TIMEOUT)
        except (asyncio.TimeoutError, ConnectionError) as exc:
            run = Run(kind, time.monotonic() - start, False, f"{type(exc).__name__}: {exc}")
        else:
            problems = list(self.exceptions)
            got = self.translation()
            if expect is not None and got != expect:
                problems.append(f"translation {got!r}, expected {expect!r}")
            run = Run(kind, time.monotonic() - start, not problems, "; ".join(problems), waited=self.saw_wait)
        self.runs.append(run)
        return run

    def address(self) -> str:
        """The address bar: the page's path and the link's parameters (a link at / with a
        sentence and no block is an old explorer link, and the app opens the explorer)."""
        query = urllib.parse.urlencode(self.query)
        return f"{self.url.rstrip('/')}/{self.page}" + (f"?{query}" if query else "")

    def choose(self, key: str, rng: random.Random):
        """A WidgetState picking another option of the selectbox `key`."""
        WidgetState = _pb()[4]
        element_id, proto = self.widgets[key]
        options = list(proto.options)
        current = options[proto.default] if proto.default < len(options) else None
        return WidgetState(id=element_id, string_value=rng.choice([o for o in options if o != current] or options))

    def press(self, key: str):
        WidgetState = _pb()[4]
        return WidgetState(id=self.widgets[key][0], trigger_value=True)


# ---- scenarios ----------------------------------------------------------------------------------
async def student(s: Student, expect: str, changes: int, rng: random.Random, static: list[str],
                  shared: bool) -> None:
    """Open the page, then `changes` times, after 1-3 s of thinking: press Next (shared) or
    change the layer or head picker (open)."""
    http_s = await s.open(static)
    first = await s.rerun("first", expect=expect)
    first.with_static = first.seconds + http_s
    for _ in range(changes):
        await asyncio.sleep(rng.uniform(1, 3))
        key = "next" if shared else rng.choice(["layer", "head"])
        if key in s.widgets:
            state = s.press(key) if shared else s.choose(key, rng)
            await s.rerun("next" if shared else "change", [state], expect=expect, fragment=s.fragments.get(key, ""))
    await s.close()


def server_processes():
    import psutil
    out = []
    for p in psutil.process_iter(["cmdline", "name"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if ("streamlit" in cmd and "app/main.py" in cmd) or p.info["name"] == "haproxy":
            out.append(p)
    return out


def cpu_seconds(procs) -> float:
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except Exception:  # noqa: BLE001 - a process that ended counts what it had
            pass
    return total


async def level(args, n: int, expected: dict[str, str], static: list[str]) -> dict:
    rng = random.Random(n)
    procs = server_processes()
    cpu0, wall0 = cpu_seconds(procs), time.monotonic()
    shared = args.scenario == "shared"
    students = []
    for i in range(n):
        text = SENTENCES[0] if shared else SENTENCES[i % len(SENTENCES)]
        s = Student(args.url, {"text": text}, page="step" if shared else "explore")
        students.append((s, expected[text]))
    results = await asyncio.wait_for(asyncio.gather(*(student(s, e, args.changes, random.Random(rng.random()), static,
                                                              shared) for s, e in students), return_exceptions=True),
                                     args.max_seconds)
    for (s, _), result in zip(students, results):
        if isinstance(result, BaseException):
            s.runs.append(Run("first" if not s.runs else "change", 0.0, False, f"{type(result).__name__}: {result}"))
    wall = time.monotonic() - wall0
    runs = [r for s, _ in students for r in s.runs]
    out = summary(n, runs, (cpu_seconds(procs) - cpu0) / wall, expected)
    out["static_mb"] = max((getattr(s, "static_bytes", 0) for s, _ in students), default=0) / 1e6
    return out


def pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summary(n: int, runs: list[Run], cores: float, expected: dict[str, str]) -> dict:
    first = [r for r in runs if r.kind == "first"]
    later = [r for r in runs if r.kind != "first"]
    others = set(expected.values())
    errors = [r.error for r in runs if not r.ok]
    crosstalk = [e for e in errors if any(f"translation {o!r}" in e for o in others)]
    return {"students": n, "runs": len(runs), "errors": len(errors), "crosstalk": len(crosstalk),
            "first_p50": pct([r.seconds for r in first], 0.5), "first_p95": pct([r.seconds for r in first], 0.95),
            "first_static_p95": pct([r.with_static or r.seconds for r in first], 0.95),
            "first_static_p50": pct([r.with_static or r.seconds for r in first], 0.5),
            "change_p50": pct([r.seconds for r in later], 0.5), "change_p95": pct([r.seconds for r in later], 0.95),
            "cpu_cores": cores, "error_examples": errors[:3],
            "waited_first": sum(r.waited for r in first), "waited_later": sum(r.waited for r in later)}


def expected_translations(checkpoint: str, texts: list[str]) -> dict[str, str]:
    """What the app's default decoding (beam 4, the model's own alpha) gives for each sentence."""
    from model.checkpoint import load_checkpoint
    from model.decoding import DecodeOptions
    from model.pipeline import translate
    ckpt = load_checkpoint(checkpoint)
    return dict(zip(texts, translate(ckpt, texts, DecodeOptions("beam", beam_size=4, alpha=ckpt.beam_alpha))))


def static_paths(url: str) -> list[str]:
    """The static files a first visit downloads, as a real Chromium fetched them."""
    if not Path("/usr/bin/chromium").exists():
        return []
    from playwright.sync_api import sync_playwright
    seen = []
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium", args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-dev-shm-usage"])
        page = b.new_page()
        page.on("request", lambda r: seen.append(r.url))
        page.goto(url)
        page.wait_for_selector("[data-testid='stPlotlyChart']", timeout=120_000)
        b.close()
    prefix = url.rstrip("/")
    return sorted({u[len(prefix):] for u in seen if u.startswith(prefix + "/static/")} | {"/"})


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8501")
    p.add_argument("--students", default="1,5,10,20,30", help="class sizes, one level each (default 1,5,10,20,30)")
    p.add_argument("--scenario", default="open", choices=["open", "shared"])
    p.add_argument("--changes", type=int, default=5, help="widget changes (or Next presses) per student")
    p.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "multi30k-en-de"),
                   help="the checkpoint the app opens on, for the expected translations")
    p.add_argument("--no-static", action="store_true", help="do not download the static files")
    p.add_argument("--pause", type=float, default=10, help="seconds between levels")
    p.add_argument("--max-seconds", type=float, default=600, help="bound on one level")
    p.add_argument("--json", help="also write the summaries here")
    args = p.parse_args()
    expected = expected_translations(args.checkpoint, SENTENCES)
    static = [] if args.no_static else static_paths(args.url)
    print(f"{len(static)} static files per first visit; scenario {args.scenario}", flush=True)
    print("| students | first page p50 / p95 | + static p50 / p95 | change p50 / p95 | CPU cores | static MB "
          "| errors | waited in line (first / later) |")
    print("|---|---|---|---|---|---|---|---|")
    out = []
    for n in [int(x) for x in args.students.split(",")]:
        s = asyncio.run(level(args, n, expected, static))
        out.append(s)
        print(f"| {n} | {fmt(s['first_p50'])} / {fmt(s['first_p95'])} s | {fmt(s['first_static_p50'])} / "
              f"{fmt(s['first_static_p95'])} s | {fmt(s['change_p50'])} / {fmt(s['change_p95'])} s | "
              f"{s['cpu_cores']:.2f} | {s['static_mb']:.1f} | {s['errors']} of {s['runs']} "
              f"(cross-talk {s['crosstalk']}) | {s['waited_first']} / {s['waited_later']} |", flush=True)
        for e in s["error_examples"]:
            print(f"    error: {e}", flush=True)
        time.sleep(args.pause)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
