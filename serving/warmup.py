"""Warm an app process up before its first student: open one session over Streamlit's own
websocket protocol (serving/protocol.py) and draw the first pages once.

A fresh process imports torch and plotly, loads the model and decodes the first sentence
when its first student arrives (~2.5 s on a 2-core machine, on top of that student's page).
The launcher (`make serve`, serving/launcher.py) runs this on each process once it answers
its health check (and again after a restart), so that a class's first students find the
model loaded and the default sentence's pages already cached.

  python -m serving.warmup --port 8511 [--page overview --page explore]
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import time

from serving.protocol import Student

DEFAULT_PAGES = ("overview", "explore")


async def warm(port: int, pages: tuple[str, ...] = DEFAULT_PAGES, timeout: float = 180.0,
               host: str = "127.0.0.1") -> float:
    """Draw `pages` once in one session of the app on `host`:`port`; returns the seconds it took."""
    from websockets.exceptions import WebSocketException
    start = time.monotonic()
    session = Student(f"http://{host}:{port}", {})
    try:
        await asyncio.wait_for(session.open(), timeout)
        for page in pages:
            session.goto(page)
            run = await session.rerun(page, timeout=max(0.1, start + timeout - time.monotonic()))
            if not run.ok:
                raise RuntimeError(f"page {page}: {run.error}")
    except WebSocketException as exc:
        raise ConnectionError(str(exc)) from exc
    finally:
        await session.close()
    return time.monotonic() - start


def warm_blocking(port: int, pages: tuple[str, ...] = DEFAULT_PAGES, timeout: float = 180.0,
                  host: str = "127.0.0.1") -> float:
    return asyncio.run(warm(port, pages, timeout, host))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m serving.warmup", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, required=True, help="port of a running app process on 127.0.0.1")
    p.add_argument("--page", action="append", help=f"page to draw (repeatable; default {', '.join(DEFAULT_PAGES)})")
    p.add_argument("--timeout", type=float, default=180.0, help="seconds for all pages (default 180)")
    args = p.parse_args(argv)
    pages = tuple(args.page or DEFAULT_PAGES)
    try:
        message = f"warmed up the app on port {args.port} in {warm_blocking(args.port, pages, args.timeout):.1f} s"
    except (TimeoutError, OSError, ConnectionError, RuntimeError) as exc:
        message = f"error: warming up the app on port {args.port}: {exc}"
    print(message, file=sys.stderr)
    return 1 if message.startswith("error") else 0


if __name__ == "__main__":
    sys.exit(main())
