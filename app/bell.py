"""The class bell in the app: the route a follower's browser waits on, and the small component that waits.

`streamlit run app/main.py` serves the app as an st.App (ASGI) with one route of ours, `/_class/bell`
(serving/class_bell.py: answered when the class changes). In a follower's page, `listen` draws a component
(components v2: JavaScript in the page) that keeps one such request open and, when it answers with a new
version, triggers a run of the fragment it is drawn in: the follower's check (app/classroom.py), which applies
the teacher's view at once, or on the step page the step-through itself (classroom.follow_here). The check
still runs by itself every few seconds (it says the student is there, and is the fallback where the bell cannot
be reached).
"""
from __future__ import annotations

import asyncio
import logging
import secrets
import threading
import time
from pathlib import Path

import streamlit as st

from app import resources
from app.context import Context
from app.settings import SidebarChoices
from serving import class_ahead, class_store
from serving.class_bell import GONE, Bell, Busy

PATH = "/_class/bell"
_LOG = logging.getLogger(__name__)

# One request at a time per page; a new version -> the trigger (a run of the fragment it is in). A failure waits a
# little and asks again; 404 (no bell here) or 403 (not a member: the class ended) stop asking: the fragment's own
# timer remains. Streamlit calls this again each time the fragment draws it anew (a new `known`), not only once:
# the loop lives on the component's element, and a later call only tells it the newer version (a call that
# started a loop of its own each time left one request open per change: 7 after 6 steps, past the 6 connections
# a browser opens to one server).
JS = """
export default function(component) {
    const { data, setTriggerValue, parentElement: host } = component;
    const key = `${data.path}|${data.code}|${data.token}`;
    const running = host.__classBell;
    if (running && running.key === key) {
        running.tell = setTriggerValue;
        if (data.known > running.known) { running.known = data.known; running.request?.abort(); }
        return running.stop;
    }
    if (running) running.stop();
    const bell = { key, known: data.known, tell: setTriggerValue, stopped: false, request: null };
    bell.stop = () => {
        bell.stopped = true;
        bell.request?.abort();
        if (host.__classBell === bell) delete host.__classBell;
    };
    host.__classBell = bell;
    const pause = (ms) => new Promise((done) => setTimeout(done, ms));
    const ask = async () => {
        while (!bell.stopped) {
            bell.request = new AbortController();
            try {
                const query = `code=${encodeURIComponent(data.code)}&token=${data.token}&known=${bell.known}`;
                const answer = await fetch(`${data.path}?${query}`, { signal: bell.request.signal, cache: "no-store" });
                if (answer.status === 404 || answer.status === 403) return;
                if (!answer.ok) { await pause(2000); continue; }
                const { version } = await answer.json();
                if (version !== bell.known) { bell.known = version; bell.tell("rang", version); }
            } catch (e) {
                if (bell.stopped) return;
                if (e.name !== "AbortError") await pause(2000);     // aborted: asked again with a newer version
            }
        }
    };
    ask();
    return bell.stop;
}
"""

_listener = st.components.v2.component("transformer_explained.class_bell", js=JS)


def listen(code: str, token: str, known: int) -> None:
    """In a follower's fragment (its check, or the page's own: classroom.follow_here): wait on the class `code`
    (its bell token: ClassStore.bell_token) from version `known`; the fragment runs again when it changes."""
    ring_here(resources.class_store())
    _listener(key="class_bell", data={"path": PATH, "code": code, "token": token, "known": known},
              on_rang_change=lambda: None)


_HERE: list[tuple[Bell, class_store.ClassStore]] = []   # the process's bell and its store, made by the first
_MAKING = threading.Lock()                               # follower's run (which knows the store)


def ring_here(store: class_store.ClassStore) -> None:
    """The process's bell reads `store` from now on (the process's one store; a test's own)."""
    with _MAKING:
        if _HERE and _HERE[0][1] is store:
            return
        _MEMBERS.clear()

        heard = class_ahead.Heard(compute_ahead)

        def read(code: str) -> int:
            try:
                view = store.view(code)
            except class_store.ClassGone:
                return GONE
            heard.hear(view.coming)         # the teacher's run is decoding a new sentence: so does this process
            return view.version
        _HERE[:] = [(Bell(read), store)]


def compute_ahead(work: class_ahead.Work) -> None:
    """A sentence a teacher's run announced (serving/class_ahead.py), decoded into this process's cache with what
    the teacher's page computes from it (Page.ahead, Context.compute_ahead). What fails here is left to the
    followers' own runs, which say it."""
    if work.path not in {str(p) for p in resources.available_checkpoints()}:
        return
    try:
        ckpt = resources.get_checkpoint(work.path)
        ctx = Context(ckpt, SidebarChoices(Path(work.path), work.opts, precision=work.precision), work.text)
        ctx.compute_ahead(work.also)
    except Exception:  # noqa: BLE001 - text the model cannot take, a model that cannot load: said in the page
        _LOG.debug("an announced sentence was not computed ahead", exc_info=True)


# A bell token the store said is its class's is trusted for MEMBER_SECONDS without asking again: every follower asks
# after every change, and each ask cost the event loop a thread's round trip to Redis (a class that ended meanwhile
# still answers GONE: its bell reads the class). Only the event loop reads and writes it.
MEMBER_SECONDS = 60.0
_MEMBERS: dict[tuple[str, str], float] = {}      # (code, token) -> until when (time.monotonic)


async def _is_member(store: class_store.ClassStore, code: str, token: str) -> bool:
    now = time.monotonic()
    if _MEMBERS.get((code, token), 0.0) > now:
        return True
    member = await asyncio.to_thread(_member, store, code, token)
    if member:
        if len(_MEMBERS) >= 4096:                   # bounded: only tokens the store confirmed come in
            _MEMBERS.clear()
        _MEMBERS[(code, token)] = now + MEMBER_SECONDS
    return member


def _member(store: class_store.ClassStore, code: str, token: str) -> bool:
    """Whether `token` is the class's bell token (False too when there is no such class)."""
    try:
        return secrets.compare_digest(store.bell_token(code), token)
    except class_store.ClassGone:
        return False


async def answer(request):
    """GET /_class/bell?code=CODE&token=TOKEN&known=VERSION: the class's version once it is not `known`."""
    from starlette.responses import JSONResponse, Response
    q = request.query_params
    code, token = class_store.normalize_code(q.get("code", "")), q.get("token", "")
    try:
        known = int(q.get("known", ""))
    except ValueError:
        known = None
    if code is None or known is None or not token:
        return Response("a class code, its bell token and a version, please", status_code=400)
    if not _HERE:                               # no follower's page has run in this process yet
        return Response("not yet", status_code=503, headers={"Retry-After": "2"})
    bell, store = _HERE[0]
    try:
        member = await _is_member(store, code, token)
    except class_store.StoreDown:
        return Response("the class store is out of reach", status_code=503, headers={"Retry-After": "2"})
    if not member:                              # the same answer whether the class exists or not
        return Response("not a member of this class", status_code=403)
    waiting = asyncio.ensure_future(bell.wait(code, known))
    gone = asyncio.ensure_future(_gone(request))
    await asyncio.wait({waiting, gone}, return_when=asyncio.FIRST_COMPLETED)
    gone.cancel()
    if not waiting.done():                      # the page went away (a tab closed): its place is freed now
        waiting.cancel()                        # (behind HAProxy: `option abortonclose`), not after 25 s
        return Response("gone", status_code=499)
    try:
        version = waiting.result()
    except Busy:
        return Response("busy", status_code=503, headers={"Retry-After": "2"})
    return JSONResponse({"version": version}, headers={"Cache-Control": "no-store"})


async def _gone(request) -> None:
    """Returns when the client of `request` (a GET: no body to read) has gone away; never, where the server
    gives no way to tell (starlette's request without a receive channel raises RuntimeError)."""
    try:
        while (await request.receive())["type"] != "http.disconnect":
            pass
    except RuntimeError:
        await asyncio.Event().wait()


def routes() -> list:
    from starlette.routing import Route
    return [Route(PATH, answer, methods=["GET"])]
