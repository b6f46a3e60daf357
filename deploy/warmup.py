"""Warm an app process up before its first student: open one session over Streamlit's own
websocket protocol and draw the first pages once.

A fresh process imports torch and plotly, loads the model and decodes the first sentence
when its first student arrives (~2.5 s on a 2-core machine, on top of that student's page).
`deploy/serve.py` runs this on each process once it answers its health check (and again
after a restart), so that a class's first students find the model loaded and the default
sentence's pages already cached.

  python deploy/warmup.py --port 8511 [--page overview --page explore]

Uses the `websockets` client (a dependency of Streamlit itself); loopback only; bounded in time.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import time

DEFAULT_PAGES = ("overview", "explore")
EARLY_FOR_RERUN = 2   # ForwardMsg.ScriptFinishedStatus.FINISHED_EARLY_FOR_RERUN


def _rerun_message(page: str, port: int) -> bytes:
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ClientState_pb2 import ClientState, ContextInfo
    from streamlit.util import calc_hash
    client = ClientState(query_string="", page_script_hash=calc_hash(page),
                         context_info=ContextInfo(timezone="UTC", locale="en-US", url=f"http://127.0.0.1:{port}/{page}"))
    return BackMsg(rerun_script=client).SerializeToString()


async def _draw(ws, page: str, port: int, deadline: float) -> list[str]:
    """One page run; returns the exceptions it showed."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    await ws.send(_rerun_message(page, port))
    problems: list[str] = []
    while True:
        data = await asyncio.wait_for(ws.recv(), max(0.1, deadline - time.monotonic()))
        msg = ForwardMsg()
        msg.ParseFromString(data)
        kind = msg.WhichOneof("type")
        if kind == "delta" and msg.delta.WhichOneof("type") == "new_element" \
                and msg.delta.new_element.WhichOneof("type") == "exception":
            problems.append(msg.delta.new_element.exception.message[:200])
        if kind == "script_finished" and msg.script_finished != EARLY_FOR_RERUN:
            return problems


async def warm(port: int, pages: tuple[str, ...] = DEFAULT_PAGES, timeout: float = 180.0) -> float:
    """Draw `pages` once in one session of the app on `port`; returns the seconds it took."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import WebSocketException
    start = time.monotonic()
    deadline = start + timeout
    try:
        async with connect(f"ws://127.0.0.1:{port}/_stcore/stream", subprotocols=["streamlit", "PLACEHOLDER"],
                           max_size=None, ping_interval=None, open_timeout=10) as ws:
            for page in pages:
                problems = await _draw(ws, page, port, deadline)
                if problems:
                    raise RuntimeError(f"page {page}: {problems[0]}")
    except WebSocketException as exc:
        raise ConnectionError(str(exc)) from exc
    return time.monotonic() - start


def warm_blocking(port: int, pages: tuple[str, ...] = DEFAULT_PAGES, timeout: float = 180.0) -> float:
    return asyncio.run(warm(port, pages, timeout))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python deploy/warmup.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, required=True, help="port of a running app process on 127.0.0.1")
    p.add_argument("--page", action="append", help=f"page to draw (repeatable; default {', '.join(DEFAULT_PAGES)})")
    p.add_argument("--timeout", type=float, default=180.0, help="seconds for all pages (default 180)")
    args = p.parse_args(argv)
    try:
        seconds = warm_blocking(args.port, tuple(args.page or DEFAULT_PAGES), args.timeout)
    except (OSError, ConnectionError, RuntimeError, asyncio.TimeoutError) as exc:
        print(f"error: warming up the app on port {args.port}: {exc}", file=sys.stderr)
        return 1
    print(f"warmed up the app on port {args.port} in {seconds:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
