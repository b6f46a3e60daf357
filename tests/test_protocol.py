"""serving/protocol.py's Student against messages fed by hand: which run a run's end belongs to; and its static
files fetched over kept connections, as a browser does, from a small server of the test's own.

The class tests and benchmarks count a follower as missed when its page does not show the teacher's change in
time; a rerun the server started late (after the client counted it dropped) once ended the teacher's next run
early, so the teacher's link read after it was still the old one (CI, issue 56's flakes)."""
from __future__ import annotations

import asyncio

import pytest

from serving.protocol import Student, _pb, http_get_many

ForwardMsg = _pb()[3]
WHOLE, EARLY, FRAGMENT = 0, 2, 3        # ForwardMsg.ScriptFinishedStatus


class Socket:
    """A websocket that keeps what is sent; `reader` a task that never ends (the page stays connected)."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    async def send(self, data: bytes) -> None:
        self.sent.append(data)


def _began(run: str, fragments: list[str]):
    msg = ForwardMsg()
    msg.new_session.page_script_hash = "page"
    msg.metadata.run.script_run_id = run
    msg.metadata.run.fragment_ids.extend(fragments)
    return msg


def _ended(run: str, fragments: list[str], status: int):
    msg = ForwardMsg()
    msg.script_finished = status
    msg.metadata.run.script_run_id = run
    msg.metadata.run.fragment_ids.extend(fragments)
    return msg


def _link(query: str):
    msg = ForwardMsg()
    msg.page_info_changed.query_string = query
    return msg


async def _student() -> tuple[Student, asyncio.Event]:
    s = Student("http://127.0.0.1:9", {})
    s.ws, forever = Socket(), asyncio.Event()
    s.reader = asyncio.create_task(forever.wait())
    return s, forever


def test_a_run_started_late_does_not_end_the_run_asked_for_now():
    async def scenario() -> tuple:
        s, forever = await _student()
        s.widgets["kept"] = ("id", None)
        asked = asyncio.create_task(s.rerun("next", fragment="next-fragment"))
        await asyncio.sleep(0.01)
        for msg in (_began("tick-run", ["tick-fragment"]), _link("step=1"),      # a tick asked for earlier
                    _ended("tick-run", ["tick-fragment"], FRAGMENT)):
            s.handle(msg)
        await asyncio.sleep(0.05)
        early = asked.done()
        s.handle(_began("next-run", ["next-fragment"]))
        s.handle(_link("step=2"))
        s.handle(_ended("next-run", ["next-fragment"], FRAGMENT))
        run = await asyncio.wait_for(asked, 2)
        forever.set()
        return early, run, s.link, "kept" in s.widgets, s.whole_runs
    early, run, link, kept, whole = asyncio.run(scenario())
    assert not early                      # the tick's end is not the end of Next's run
    assert run.ok and not run.dropped and link == "step=2"
    assert kept and whole == 0            # fragments' runs: the page's widgets stay, no whole run counted


def test_a_fragment_that_reruns_the_page_ends_with_the_pages_run_and_a_whole_run_clears_the_page():
    async def scenario() -> tuple:
        s, forever = await _student()
        s.widgets["old"] = ("id", None)
        asked = asyncio.create_task(s.rerun("bell", fragment="bell-fragment"))
        await asyncio.sleep(0.01)
        s.handle(_began("bell-run", ["bell-fragment"]))
        s.handle(_ended("bell-run", ["bell-fragment"], EARLY))      # st.rerun(scope="app")
        await asyncio.sleep(0.05)
        early = asked.done()
        s.handle(_began("page-run", []))
        cleared = "old" not in s.widgets
        s.handle(_ended("page-run", [], WHOLE))
        run = await asyncio.wait_for(asked, 2)
        forever.set()
        return early, cleared, run, s.whole_runs
    early, cleared, run, whole = asyncio.run(scenario())
    assert not early and cleared and run.ok and whole == 1


def test_a_run_never_started_is_counted_dropped(monkeypatch):
    import serving.protocol as protocol
    monkeypatch.setattr(protocol, "DROPPED_SECONDS", 0.1)

    async def scenario():
        s, forever = await _student()
        asked = asyncio.create_task(s.rerun("tick", fragment="gone-fragment"))
        await asyncio.sleep(0.01)
        s.handle(_began("other-run", ["other-fragment"]))            # another fragment's run, not this one
        run = await asyncio.wait_for(asked, 2)
        forever.set()
        return run
    run = asyncio.run(scenario())
    assert run.dropped and run.ok


# ---- static files over kept connections ---------------------------------------------------------------------------
BODY = b"x" * 1000


def _response(path: str) -> bytes:
    """The test server's answer to `path`: a length, chunks (as HAProxy compresses), a close, or not found."""
    if path.startswith("/chunked"):
        chunks = b"".join(b"%x\r\n" % len(part) + part + b"\r\n" for part in (BODY[:300], BODY[300:]))
        return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"
    if path.startswith("/missing"):
        return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
    close = b"Connection: close\r\n" if path.startswith("/close") else b""
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n" % (len(BODY), close) + BODY


async def _fetch(paths: list[str], hang_up_after: int = 0) -> tuple[int, int, int]:
    """(bytes http_get_many counted, bytes the server sent, connections it accepted). hang_up_after: the server
    closes a connection after that many answers without saying so (a kept connection timed out)."""
    sent, accepted = [0], [0]

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted[0] += 1
        answered = 0
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                break
            path = head.split(b" ")[1].decode()
            answer = _response(path)
            writer.write(answer)
            await writer.drain()
            sent[0] += len(answer)
            answered += 1
            if path.startswith("/close") or answered == hang_up_after:
                break
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        got = await http_get_many("127.0.0.1", port, paths, {"sticky": "a"})
    return got, sent[0], accepted[0]


def test_static_files_come_over_six_kept_connections_whatever_ends_their_bodies():
    paths = [f"/{kind}/{i}" for i in range(20) for kind in ("length", "chunked")]
    got, sent, accepted = asyncio.run(_fetch(paths))
    assert got == sent == 20 * len(_response("/length/0")) + 20 * len(_response("/chunked/0"))
    assert accepted == 6                                       # 40 files, as Chromium: not one connection each


def test_a_connection_the_server_closes_is_opened_again():
    said, _, said_accepted = asyncio.run(_fetch([f"/close/{i}" for i in range(9)]))
    silent, silent_sent, silent_accepted = asyncio.run(_fetch([f"/length/{i}" for i in range(12)], hang_up_after=1))
    assert said == 9 * len(_response("/close/0")) and said_accepted == 9
    assert silent == silent_sent == 12 * len(_response("/length/0"))
    assert silent_accepted == 12                                # each silent close cost a new connection


def test_a_file_not_found_is_an_error():
    with pytest.raises(RuntimeError, match="GET /missing/1: 404"):
        asyncio.run(_fetch(["/length/0", "/missing/1"]))
