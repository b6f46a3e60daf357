"""A client of Streamlit's own websocket protocol: one browser session without a browser.

`Student` connects as a browser does (the health and host-config requests first, so that a
proxy's stickiness cookie comes back, then the websocket), asks for page runs (a page, a
link's query, widget states; or one fragment's rerun), and keeps what the page showed: its
widgets (by key), blocks, markdown, exceptions, and whether the admission line showed. Used
by the launcher's warm-up (serving/warmup.py), the class-load benchmark and the serve tests.
Loopback or a school's network; every wait is bounded by TIMEOUT.
"""
from __future__ import annotations

import asyncio
import functools
import json
import random
import time
import urllib.parse
from dataclasses import dataclass, field

from streamlit.util import calc_hash

TIMEOUT = 120.0
DROPPED_SECONDS = 5.0     # a fragment's rerun not started by then was dropped by the server (Student.rerun)
EARLY_FOR_RERUN = 2   # ForwardMsg.ScriptFinishedStatus.FINISHED_EARLY_FOR_RERUN
WHOLE_RUN_DONE = 0    # ... FINISHED_SUCCESSFULLY: a whole page's run (a fragment's alone ends otherwise)


def _read_out(future: asyncio.Future) -> None:
    """Marks a future's exception read (a closed websocket ends the run asked for last, awaited or not)."""
    if not future.cancelled():
        future.exception()


@functools.cache
def _pb():
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ClientState_pb2 import ClientState, ContextInfo
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates
    return BackMsg, ClientState, ContextInfo, ForwardMsg, WidgetState, WidgetStates


def _get(host: str, port: int, path: str, cookies: dict[str, str], gzip: bool = True, close: bool = False) -> bytes:
    """A GET request's bytes, with the cookie jar's cookies."""
    cookie = "; ".join(f"{k}={v}" for k, v in cookies.items())
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}:{port}", *(["Accept-Encoding: gzip"] if gzip else []),
             *(["Connection: close"] if close else []), *([f"Cookie: {cookie}"] if cookie else [])]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def http_get(host: str, port: int, path: str, cookies: dict[str, str]) -> tuple[int, int, dict[str, str]]:
    """One GET (gzip accepted, Connection: close): (status, bytes on the wire, headers).
    Set-Cookie values are added to `cookies` (the proxy's stickiness cookie)."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), TIMEOUT)
    try:
        writer.write(_get(host, port, path, cookies, close=True))
        await writer.drain()
        status, size, _, headers = await asyncio.wait_for(_answer(reader), TIMEOUT)
    finally:
        writer.close()
    if "set-cookie" in headers:
        k, _, v = headers["set-cookie"].split(";", 1)[0].partition("=")
        cookies[k] = v
    return status, size, headers


BROWSER_CONNECTIONS = 6    # what a browser opens to one host over HTTP/1.1 at once


async def http_get_many(host: str, port: int, paths: list[str], cookies: dict[str, str],
                        connections: int = BROWSER_CONNECTIONS) -> int:
    """GET every path (gzip accepted) over at most `connections` keep-alive connections, each taking the next
    path as its last answer ends; a connection the server closes is opened again. Bytes on the wire, all of them.
    Raises RuntimeError on an answer other than 200."""
    todo = list(reversed(paths))

    async def one_connection() -> int:
        got, stream = 0, None
        try:
            while todo:
                path = todo.pop()
                for fresh in (stream is None, True):       # a kept connection the server closed meanwhile: again
                    if stream is None:
                        stream = await asyncio.wait_for(asyncio.open_connection(host, port), TIMEOUT)
                    stream[1].write(_get(host, port, path, cookies))
                    try:
                        status, size, keep, _ = await asyncio.wait_for(_answer(stream[0]), TIMEOUT)
                        break
                    except (asyncio.IncompleteReadError, ConnectionError):
                        stream[1].close()
                        stream = None
                        if fresh:
                            raise
                if status != 200:
                    raise RuntimeError(f"GET {path}: {status}")
                got += size
                if not keep:
                    stream[1].close()
                    stream = None
        finally:
            if stream is not None:
                stream[1].close()
        return got
    return sum(await asyncio.gather(*(one_connection() for _ in range(min(connections, len(paths))))))


async def _answer(reader: asyncio.StreamReader) -> tuple[int, int, bool, dict[str, str]]:
    """One HTTP/1.1 answer: (status, bytes on the wire, whether the connection stays open, headers by lower-case
    name). Its body's end: Content-Length, else chunks (HAProxy compresses into chunks), else the connection's end."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    status = int(lines[0].split()[1]) if lines[0].startswith("HTTP/") else 0
    size, keep = len(head), headers.get("connection", "").lower() != "close"
    if "content-length" in headers:
        size += len(await reader.readexactly(int(headers["content-length"])))
    elif "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            line = await reader.readuntil(b"\r\n")
            chunk = int(line.split(b";")[0], 16)
            size += len(line) + len(await reader.readexactly(chunk + 2))
            if chunk == 0:              # no trailers from HAProxy or Streamlit: the chunk's CRLF ended the body
                break
    else:
        size += len(await reader.read())
        keep = False
    return status, size, keep, headers


async def http_text(host: str, port: int, path: str, cookies: dict[str, str],
                    timeout: float = TIMEOUT) -> tuple[int, str]:
    """One GET, uncompressed (Connection: close): (status, body)."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    try:
        writer.write(_get(host, port, path, cookies, gzip=False, close=True))
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
    status = int(status_line.split()[1]) if status_line.startswith("HTTP/") else 0
    return status, body.decode("utf-8", "replace")


def _closed() -> type[Exception]:
    """websockets' closed-connection error (imported late, as the client: `make serve` without the dev extras
    never opens one)."""
    from websockets.exceptions import ConnectionClosed
    return ConnectionClosed


@dataclass
class Run:
    kind: str
    seconds: float
    ok: bool
    error: str = ""
    with_static: float | None = None   # first page: plus the HTTP requests before the websocket
    waited: bool = False               # the page showed the admission gate's "in line" note
    dropped: bool = False              # a fragment's rerun the server never started (see Student.rerun)


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
        self.started: asyncio.Future | None = None   # the run asked for last has begun (its new_session)
        self.asked_fragment = ""                     # the fragment the run asked for last reruns ("": the page)
        self.run_id: str | None = None               # Streamlit's id of that run once it began (_ours)
        self.rerun_follows = False                   # that run ended early for a rerun: the next run is its own
        self.whole_runs = 0                          # whole page runs finished (not a fragment's alone)
        self.saw_wait = False
        self.ws = None
        self.reader: asyncio.Task | None = None
        self.auto_reruns: dict[str, float] = {}      # fragment id -> seconds (st.fragment(run_every=...))
        self.link = ""                               # the query string the app last wrote to the address bar
        self.link_seen: list[tuple[float, str]] = []   # (when, query string), each time the app wrote one
        self.first_seen: dict[str, float] = {}       # widget / chart key -> when the page first showed it

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
            additional_headers={"Cookie": cookie} if cookie else None, max_size=None, ping_interval=None,
            proxy=None), TIMEOUT)                   # the app directly, never through a proxy set in the environment
        self.reader = asyncio.create_task(self._read())
        return http_s

    async def _fetch_static(self, paths: list[str]) -> int:
        """Static files as a browser fetches them from one host: over at most 6 connections, each kept open for
        the next file (HTTP/1.1 keep-alive; a real Chromium's first visit: 125 requests over 7 connections, the
        websocket one of them). Bytes on the wire, all of them."""
        return await http_get_many(self.host, self.port, paths, self.cookies)

    @property
    def connected(self) -> bool:
        """False once the websocket dropped (its app process died) or was closed."""
        return self.reader is not None and not self.reader.done()

    async def reconnect(self) -> None:
        """What a browser does when its websocket drops: keep the address bar (the link the app last wrote,
        the page's path), connect again (HAProxy sends a browser whose process died to a live one, which
        starts a new session), and the page runs from the link (self.query: kept as the app writes it)."""
        await self.close()
        self.widgets.clear(), self.blocks.clear(), self.markdown.clear(), self.auto_reruns.clear()
        await self.open()

    async def close(self) -> None:
        if self.ws is not None:
            try:
                await self.ws.close()
            except (ConnectionError, _closed()):     # its server is gone already
                pass
        if self.reader is not None:
            self.reader.cancel()

    async def _read(self) -> None:
        ForwardMsg = _pb()[3]
        try:
            async for data in self.ws:
                msg = ForwardMsg()
                msg.ParseFromString(data)
                self.handle(msg)
        finally:
            if self.done is not None and not self.done.done():
                self.done.set_exception(ConnectionError("websocket closed"))

    def handle(self, msg) -> None:
        """One message from the app (the reader task passes each; tests feed them by hand)."""
        kind = msg.WhichOneof("type")
        if kind == "ref_hash":
            msg = self.cache[msg.ref_hash]
            kind = msg.WhichOneof("type")
        elif msg.metadata.cacheable and msg.hash:
            self.cache[msg.hash] = msg
        if kind == "new_session":
            run = msg.metadata.run
            if self._ours(run.script_run_id, list(run.fragment_ids)):
                self.run_id, self.rerun_follows = run.script_run_id, False
                if self.started is not None and not self.started.done():
                    self.started.set_result(True)
            self.page_hash = msg.new_session.page_script_hash
            whole = not run.fragment_ids if run.script_run_id else not self.asked_fragment
            if whole:                          # a fragment's rerun redraws only the fragment
                self.widgets.clear(), self.blocks.clear(), self.markdown.clear()
                self.auto_reruns.clear()       # a whole run registers its timed fragments again
            self.exceptions.clear()
        elif kind == "auto_rerun":
            self.auto_reruns[msg.auto_rerun.fragment_id] = msg.auto_rerun.interval
        elif kind == "page_info_changed":
            self.link = msg.page_info_changed.query_string
            self.link_seen.append((time.monotonic(), self.link))
            self.query = dict(urllib.parse.parse_qsl(self.link))   # the address bar, sent with every rerun
        elif kind == "delta":
            self._delta(tuple(msg.metadata.delta_path), msg.delta)
        elif kind == "script_finished":
            self.whole_runs += msg.script_finished == WHOLE_RUN_DONE
            ended = msg.metadata.run.script_run_id
            if self.done is not None and not self.done.done() and self.run_id is not None \
                    and (not ended or ended == self.run_id):
                if msg.script_finished == EARLY_FOR_RERUN:    # a page switch or st.rerun: another run follows
                    self.rerun_follows = True
                else:
                    self.done.set_result(msg.script_finished)

    def _ours(self, run_id: str, fragments: list[str]) -> bool:
        """Whether the run that begins is the one asked for last. Streamlit tags each run's first and last
        message with its id and the fragments it reruns: a rerun asked for earlier that the server starts
        late (after this client counted it dropped, Student.rerun) must not end the run asked for now, nor
        may a fragment's rerun clear the page's widgets. Without tags (an older Streamlit): every run is."""
        if not run_id or self.rerun_follows:
            return True
        if self.run_id is not None:            # it began already: this is a later one
            return False
        return self.asked_fragment in fragments if self.asked_fragment else not fragments

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
            self.first_seen.setdefault(key, time.monotonic())
            self.fragments[key] = delta.fragment_id

    def bell(self) -> dict | None:
        """The class bell's data on this page (app/bell.py: path, code, token, known), or None."""
        return self.component_data("class_bell")

    async def bell_wait(self, known: int, timeout: float = 60.0) -> int | None:
        """What the bell's component does in a browser: wait on the bell from version `known`; the version it
        answers (None: no bell on the page, or no answer)."""
        data = self.bell()
        if data is None:
            return None
        query = urllib.parse.urlencode({"code": data["code"], "token": data["token"], "known": known})
        try:
            status, body = await http_text(self.host, self.port, f"{data['path']}?{query}", self.cookies, timeout)
        except (OSError, TimeoutError):
            return None
        return json.loads(body)["version"] if status == 200 else None

    def ring(self, version: int):
        """The WidgetState the bell's component sends when the class changed (its fragment then runs)."""
        return self.trigger("class_bell", "rang", version)

    def trigger(self, key: str, event: str, value):
        """The WidgetState a component (components v2) with key `key` sends for its trigger `event`."""
        from streamlit.components.v2.bidi_component.constants import EVENT_DELIM
        from streamlit.runtime.state.session_state import STREAMLIT_INTERNAL_KEY_PREFIX
        WidgetState = _pb()[4]
        trigger = f"{STREAMLIT_INTERNAL_KEY_PREFIX}_{self.widgets[key][0]}{EVENT_DELIM}events"
        return WidgetState(id=trigger, json_trigger_value=json.dumps([{"event": event, "value": value}]))

    def component_data(self, key: str):
        """The data the server drew component `key` (components v2) with: app/attention_charts.py sends a list
        of one item (that item), the bell a dict. None: no such component on the page."""
        found = self.widgets.get(key)
        data = json.loads(found[1].json) if found is not None and found[1].json else None
        return data[0] if isinstance(data, list) else data

    def pick_head(self, rng: random.Random):
        """What a browser tells the server after a student chose another layer and head in the explorer's own
        pickers (app/attention_charts.py: sent with the student's next action elsewhere): the pickers' "pick" of
        a head other than the one drawn, and that head's (layer, head)."""
        data = self.component_data("pickers")
        heads = [(i, h) for i in range(data["n_layers"]) for h in range(data["n_heads"])
                 if (i, h) != (data["layer"], data["head"])]
        layer, head = rng.choice(heads)
        return self.trigger("pickers", "pick", layer * data["n_heads"] + head), (layer, head)

    def translation(self) -> str | None:
        for path, block in self.blocks.items():
            if block.endswith("-translation") and path + (0,) in self.markdown:
                return self.markdown[path + (0,)].removeprefix("### ").strip()
        return None

    def goto(self, page: str) -> None:
        """The next run asks for `page` (its URL path), as a click in the page menu does."""
        self.page, self.page_hash = page, calc_hash(page)

    async def rerun(self, kind: str, states: list = (), expect: str | None = None, fragment: str = "",
                    timeout: float = TIMEOUT) -> Run:
        """One page run (or, with `fragment`, the rerun of that fragment only, as a browser asks
        for it when a widget inside a fragment changes); `expect`: the translation to see."""
        BackMsg, ClientState, ContextInfo, _, _, WidgetStates = _pb()
        client = ClientState(query_string=urllib.parse.urlencode(self.query), page_script_hash=self.page_hash,
                             cached_message_hashes=list(self.cache), fragment_id=fragment,
                             context_info=ContextInfo(timezone="UTC", locale="en-US", url=self.address()))
        client.widget_states.CopyFrom(WidgetStates(widgets=list(states)))
        if not self.connected:                  # its server went away: no answer will come (a browser reconnects)
            run = Run(kind, 0.0, False, "ConnectionError: not connected")
            self.runs.append(run)
            return run
        self.done = asyncio.get_running_loop().create_future()
        self.done.add_done_callback(_read_out)     # a run counted dropped is awaited by none
        self.started = asyncio.get_running_loop().create_future()
        self.asked_fragment, self.run_id, self.rerun_follows = fragment, None, False
        self.saw_wait = False
        start = time.monotonic()
        try:
            await self.ws.send(BackMsg(rerun_script=client).SerializeToString())
            if fragment and not await self._starts():
                run = Run(kind, time.monotonic() - start, True, dropped=True)
                self.runs.append(run)
                return run
            await asyncio.wait_for(asyncio.shield(self.done), timeout)
        except (TimeoutError, ConnectionError, _closed()) as exc:
            run = Run(kind, time.monotonic() - start, False, f"{type(exc).__name__}: {exc}")
        else:
            problems = list(self.exceptions)
            got = self.translation()
            if expect is not None and got != expect:
                problems.append(f"translation {got!r}, expected {expect!r}")
            run = Run(kind, time.monotonic() - start, not problems, "; ".join(problems), waited=self.saw_wait)
        self.runs.append(run)
        return run

    async def _starts(self) -> bool:
        """Whether the run just asked for starts within DROPPED_SECONDS. Streamlit drops the rerun of a
        fragment that a whole run in between has drawn elsewhere (its id changed: app_session.py, "does not
        exist anymore"), silently; a browser does not wait for an answer, and neither does this."""
        try:
            await asyncio.wait_for(asyncio.shield(self.started), DROPPED_SECONDS)
        except TimeoutError:
            return self.done.done()
        return True

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

    def type(self, key: str, text: str):
        """A WidgetState typing `text` into the text input `key`."""
        WidgetState = _pb()[4]
        return WidgetState(id=self.widgets[key][0], string_value=text)

    def press(self, key: str):
        WidgetState = _pb()[4]
        return WidgetState(id=self.widgets[key][0], trigger_value=True)


