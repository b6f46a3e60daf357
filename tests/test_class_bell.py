"""The class bell (serving/class_bell.py): waiters wake when their class's version changes, the store is read
once per class and interval however many wait, and nothing is read once nobody waits."""
from __future__ import annotations

import asyncio
import json
import time

import pytest

from serving.class_bell import GONE, Bell, Busy

WATCH = 0.01


class Store:
    def __init__(self) -> None:
        self.versions = {"ABCDEFGH": 1}
        self.reads = 0
        self.down = False

    def read(self, code: str) -> int:
        self.reads += 1
        if self.down:
            raise ConnectionError("store down")
        return self.versions.get(code, GONE)


def waiting(store: Store) -> asyncio.Task:
    """One waiter on class ABCDEFGH, which it knows at version 1 (call inside a running loop)."""
    return asyncio.create_task(Bell(store.read, watch=WATCH).wait("ABCDEFGH", 1, timeout=5))


def test_a_waiter_wakes_when_its_class_changes():
    async def go():
        store = Store()
        waiter = waiting(store)
        await asyncio.sleep(0.1)
        assert not waiter.done()
        t0 = time.monotonic()
        store.versions["ABCDEFGH"] = 2
        assert await waiter == 2
        return time.monotonic() - t0
    assert asyncio.run(go()) < 0.5


def test_a_waiter_that_knows_an_old_version_is_answered_at_once():
    async def go():
        bell = Bell(Store().read, watch=WATCH)
        return await asyncio.wait_for(bell.wait("ABCDEFGH", 0, timeout=5), 1)
    assert asyncio.run(go()) == 1


def test_many_waiters_cost_one_read_per_interval():
    async def go():
        store = Store()
        bell = Bell(store.read, watch=WATCH)
        waiters = [asyncio.create_task(bell.wait("ABCDEFGH", 1, timeout=5)) for _ in range(200)]
        await asyncio.sleep(0.3)
        reads = store.reads
        store.versions["ABCDEFGH"] = 7
        return reads, await asyncio.gather(*waiters)
    reads, got = asyncio.run(go())
    assert got == [7] * 200
    assert reads <= 0.3 / WATCH + 3                      # not 200 per interval


def test_nothing_is_read_once_nobody_waits():
    async def go():
        store = Store()
        bell = Bell(store.read, watch=WATCH)
        assert await bell.wait("ABCDEFGH", 1, timeout=0.05) == 1          # no change: `known` back
        await asyncio.sleep(0.05)
        before = store.reads
        await asyncio.sleep(0.2)
        return store.reads - before, bell.waiting
    assert asyncio.run(go()) == (0, 0)


def test_an_ended_class_answers_gone():
    async def go():
        store = Store()
        waiter = waiting(store)
        await asyncio.sleep(0.05)
        del store.versions["ABCDEFGH"]
        return await asyncio.wait_for(waiter, 1)
    assert asyncio.run(go()) == GONE


def test_the_store_out_of_reach_keeps_waiters_waiting_until_it_is_back():
    async def go():
        store = Store()
        bell = Bell(store.read, watch=WATCH)
        waiter = asyncio.create_task(bell.wait("ABCDEFGH", 1, timeout=5))
        await asyncio.sleep(0.05)
        store.down = True
        await asyncio.sleep(0.1)
        assert not waiter.done()
        store.versions["ABCDEFGH"], store.down = 3, False
        return await asyncio.wait_for(waiter, 1)
    assert asyncio.run(go()) == 3


def test_past_the_most_waiting_the_bell_says_busy():
    async def go():
        bell = Bell(Store().read, watch=WATCH, most=2)
        held = [asyncio.create_task(bell.wait("ABCDEFGH", 1, timeout=1)) for _ in range(2)]
        await asyncio.sleep(0.02)
        with pytest.raises(Busy):
            await bell.wait("ABCDEFGH", 1, timeout=1)
        for h in held:
            h.cancel()
        await asyncio.gather(*held, return_exceptions=True)
        return bell.waiting
    assert asyncio.run(go()) == 0


# ---- the route (app/bell.py) ------------------------------------------------------------------------------------
def _ask(query: str):
    from starlette.requests import Request

    from app import bell
    scope = {"type": "http", "method": "GET", "path": bell.PATH, "query_string": query.encode(), "headers": []}
    return asyncio.run(bell.answer(Request(scope)))


def test_the_route_answers_a_member_and_nobody_else():
    import json

    from app import bell
    from serving.class_store import MemoryStore
    store = MemoryStore()
    c = store.start("overview", {})
    bell.ring_here(store)
    token = store.bell_token(c.code)
    store.publish(c.code, c.secret, "step", {})                              # version 2
    got = _ask(f"code={c.code}&token={token}&known=1")
    assert got.status_code == 200 and json.loads(got.body) == {"version": 2}
    assert _ask(f"code={c.code}&token={'0' * 32}&known=1").status_code == 403  # a guessed code hears nothing
    other = "ZZZZZZZZ" if c.code != "ZZZZZZZZ" else "YYYYYYYY"
    assert _ask(f"code={other}&token={token}&known=1").status_code == 403     # the same: no class there
    for bad in ("", f"code={c.code}&token={token}", f"code={c.code}&token={token}&known=x", "code=!!&token=a&known=1"):
        assert _ask(bad).status_code == 400, bad


def test_the_route_asks_the_store_once_for_a_member_and_every_time_for_a_stranger():
    """Every follower asks again after every change: a token the store confirmed is trusted a while (each ask was a
    thread's round trip to Redis on the event loop); a wrong one is asked of the store each time, and refused."""
    from app import bell
    from serving.class_store import MemoryStore
    store = MemoryStore()
    c = store.start("overview", {})
    bell.ring_here(store)
    token, asked = store.bell_token(c.code), []
    real = store.bell_token
    store.bell_token = lambda code: asked.append(code) or real(code)
    store.publish(c.code, c.secret, "step", {})                              # version 2
    assert [_ask(f"code={c.code}&token={token}&known=1").status_code for _ in range(3)] == [200] * 3
    assert len(asked) == 1
    assert [_ask(f"code={c.code}&token={'0' * 32}&known=1").status_code for _ in range(2)] == [403] * 2
    assert len(asked) == 3
    store.end(c.code, c.secret)                   # a class that ended: its member hears it is gone
    assert json.loads(_ask(f"code={c.code}&token={token}&known=2").body) == {"version": GONE}


def test_a_bell_request_whose_page_went_away_is_answered_at_once_not_after_25_s():
    """app/bell.answer: a closed tab's request (the client gone: HAProxy's `abortonclose` passes that on) stops
    waiting at once; one whose page stays gets the class's new version."""
    from starlette.requests import Request

    from app import bell
    from serving.class_store import MemoryStore

    store = MemoryStore()
    started = store.start("step", {})
    token = store.bell_token(started.code)
    bell.ring_here(store)

    def request(leaves_after: float | None) -> Request:
        async def receive() -> dict:
            if not sent:
                sent.append(1)
                return {"type": "http.request", "body": b"", "more_body": False}
            await asyncio.sleep(60 if leaves_after is None else leaves_after)
            return {"type": "http.disconnect"}
        sent: list[int] = []
        query = f"code={started.code}&token={token}&known={store.view(started.code).version}".encode()
        return Request({"type": "http", "method": "GET", "path": bell.PATH, "query_string": query, "headers": []},
                       receive)

    async def go() -> tuple[int, float, int, bytes]:
        t = time.monotonic()
        left = await bell.answer(request(leaves_after=0.1))
        gone_after = time.monotonic() - t
        staying = asyncio.ensure_future(bell.answer(request(leaves_after=None)))
        await asyncio.sleep(0.2)
        store.publish(started.code, started.secret, "step", {"step": "1"})
        stayed = await asyncio.wait_for(staying, 5)
        return left.status_code, gone_after, stayed.status_code, stayed.body
    gone_status, gone_after, status, body = asyncio.run(go())
    assert gone_status == 499 and gone_after < 2
    assert status == 200 and b'"version"' in body
