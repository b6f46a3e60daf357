"""serving/protocol.py's Student against messages fed by hand: which run a run's end belongs to.

The class tests and benchmarks count a follower as missed when its page does not show the teacher's change in
time; a rerun the server started late (after the client counted it dropped) once ended the teacher's next run
early, so the teacher's link read after it was still the old one (CI, issue 56's flakes)."""
from __future__ import annotations

import asyncio

from serving.protocol import Student, _pb

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
