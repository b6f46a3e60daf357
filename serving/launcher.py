"""Serve the app to a class: one app process per core behind HAProxy.

  python -m serving.launcher                         # http://127.0.0.1:8501, one process per core
  python -m serving.launcher --bind 0.0.0.0:8501     # a school server, reachable on the network
  python -m serving.launcher --processes 0 --backend 10.0.0.12:8501 --backend 10.0.0.13:8501 --redis URL
  python -m serving.launcher --apps-only --bind 10.0.0.12:8501 --processes 2 --redis URL   # on 10.0.0.12

One Streamlit process uses at most about one core (one Python interpreter), so a class
is served by several processes. HAProxy (Debian's package `haproxy`) in front of them:
- keeps each browser on one process with a cookie (TXSRV), not by client address: a whole
  school behind one NAT has one address, and a browser's session, its websocket and the
  files its download buttons made live in one process;
- compresses static files and JSON with gzip (Streamlit itself sends them uncompressed),
  and keeps the static files in its cache, so that only the first browser's requests for
  them reach an app process;
- checks each process's /_stcore/health; when one dies, its students' browsers reconnect
  to a live one, which rebuilds their page from the link in the address bar.
Classes (a teacher's screen followed by the students', serving/class_store.py) live in Redis, so that
the teacher and the students may sit on different processes: the launcher starts Debian's
`redis-server` on loopback (or uses `--redis URL`, a school's own) and restarts it if it dies.
A class across several machines: one Redis they all reach (`--redis URL`, a school's own), on each app
machine `python -m serving.launcher --apps-only --bind ADDRESS:8501 --processes N --redis URL` (app
processes only, on ports 8501.., with the same settings as here, warmed and restarted), and on the front
machine `python -m serving.launcher --bind 0.0.0.0:8501 --processes 0 --backend ADDRESS:8501 ... --redis
URL` (HAProxy, balancing over all of them; `--processes N` adds app processes of its own).
This launcher warms each local process up (one
session draws the first pages: the model is loaded and the default sentence cached before
the first student; serving/warmup.py), restarts local processes that die (and warms them),
and stops everything on Ctrl-C / SIGTERM.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from model.commands import registry as command
from serving.config import ServingConfig, streamlit_flags
from serving.lab_shelf import LabShelf
from serving.warmup import warm_blocking

ROOT = Path(__file__).resolve().parent.parent

COOKIE = "TXSRV"
COMPRESSED_TYPES = ("text/html", "text/css", "text/javascript", "application/javascript", "application/json",
                    "image/svg+xml", "text/plain")
# Files compressed by their own format (fonts, raster images): never gzipped, the same plain copy for every browser,
# so HAProxy's cache keeps and gives them whatever a browser accepts (Streamlit's four fonts, 587 KB, had come from
# the app processes at every first visit: ~10 ms of their CPU a student, BENCHMARKS.md, session 53).
PACKED_SUFFIXES = (".woff2", ".woff", ".ttf", ".otf", ".png", ".jpg", ".jpeg", ".gif", ".webp", ".ico")
PACKED_TYPES = ("font/", "application/font", "image/png", "image/jpeg", "image/gif", "image/webp", "image/x-icon",
                "image/vnd.microsoft.icon")


@dataclass(frozen=True)
class Backend:
    name: str
    host: str
    port: int


UNAVAILABLE_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="5">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>Transformer, explained: back soon</title>
<style>body{font-family:sans-serif;max-width:36em;margin:4em auto;padding:0 1em;color:#262730}</style></head>
<body><h1>The class server is restarting</h1>
<p>This page tries again by itself in a few seconds; your class and your answers are kept.</p>
<p lang="de">Der Klassen-Server startet neu. Diese Seite versucht es in ein paar Sekunden von selbst wieder;
deine Klasse und deine Antworten bleiben erhalten.</p></body></html>
"""


def unavailable_response() -> bytes:
    """What HAProxy answers while no app process can (its errorfile for 503): the app's own page, which
    retries by itself, instead of the proxy's bare error."""
    body = UNAVAILABLE_HTML.encode()
    head = ("HTTP/1.0 503 Service Unavailable\r\nCache-Control: no-store\r\nRetry-After: 5\r\n"
            f"Content-Type: text/html; charset=utf-8\r\nContent-Length: {len(body)}\r\n\r\n")
    return head.encode() + body


def haproxy_config(bind: str, backends: list[Backend], max_sessions: int = 0, errorfile: str | None = None,
                   static_socket: str | None = None) -> str:
    """The HAProxy configuration: sticky by cookie, gzip, health checks, failover, and a
    cache for /static/ (Streamlit's files there are immutable, content-hashed names): after the
    first browser, a class's ~120 files per first visit come from HAProxy's memory instead
    of the app processes' Python (measured: 145 ms of app CPU per first visit saved; its fonts too since session 53).

    The cache keeps them gzipped: HAProxy compresses after its cache stores (and will not compress before a cache
    of the same proxy), so /static/ goes through a second proxy of its own, `static_gzip` on `static_socket` (a
    unix socket; by default an abstract one of a random name), which compresses; the first proxy's cache keeps only
    gzipped answers and gives them only to requests that take gzip (HAProxy's cache would give a plain copy to
    everyone), so each file is compressed once; fonts and raster images, which are never gzipped (PACKED_TYPES),
    are kept plain and given to every browser. Compressing each first visit's
    8.3 MB again cost HAProxy ~0.03 core-s a student (BENCHMARKS.md, session 38). The page shell too: Streamlit
    answers every page's path ("/", "/explore?text=...") with the same index.html, ~2 ms of an app process's CPU a
    first visit, so those paths are asked for as "/" through the same gzip proxy and kept for 60 s (`shell`),
    still sent with `Cache-Control: no-cache` (the browser revalidates it, against HAProxy); the first request
    that reaches an app process (the health check a browser makes next) pins the browser to it.

    Health checks every second (every 250 ms while a server changes state) and a connection refused is retried
    on another server at once: a killed process's students move within ~1.5 s (BENCHMARKS.md, session 22). A
    check may take 5 s: a process busy with a heavy page is slow to answer, not down. The static proxy's servers
    follow those checks (`track`) instead of checking again: each check is a request through the app's Python
    (two a second per process were ~40 % of an idle server's CPU, BENCHMARKS.md, session 54). A request whose
    browser went away is given up at the app too (`abortonclose`): a closed tab's class bell frees its place at once.

    max_sessions: at most this many requests (websockets included) per app process at
    once; 0 = no limit. errorfile: the response HAProxy sends while no app process answers (503, 502,
    504: unavailable_response() written to a file)."""
    checked = "check inter 1s fastinter 250ms fall 2 rise 2"
    servers = "\n".join(f"    server {b.name} {b.host}:{b.port} cookie {b.name} {checked}"
                        + (f" maxconn {max_sessions}" if max_sessions else "") for b in backends)
    static_servers = "\n".join(f"    server {b.name} {b.host}:{b.port} track app/{b.name}" for b in backends)
    static_at = static_socket or f"abns@transformer-static-{uuid.uuid4().hex[:12]}"
    errors = "".join(f"    errorfile {code} {errorfile}\n" for code in (502, 503, 504)) if errorfile else ""
    return f"""global
    maxconn 4096

defaults
    mode http
    option redispatch 1
    option abortonclose
    retries 2
    timeout connect 3s
    timeout check 5s
    timeout client 1h
    timeout server 1h
    timeout tunnel 1h
    timeout queue 30s
{errors}
frontend classroom
    bind {bind}
    http-request set-header X-Forwarded-For %[src]
    acl page_path path_reg ^/([^/._][^/.]*)?$
    http-request set-var(txn.shell) bool(true) if page_path METH_GET
    use_backend static if {{ path_beg /static/ }}
    use_backend shell if {{ var(txn.shell) -m bool }}
    default_backend app
    http-response set-header Cache-Control no-cache if {{ var(txn.shell) -m bool }}

backend app
    balance leastconn
    cookie {COOKIE} insert indirect nocache httponly
    option httpchk GET /_stcore/health
    http-check expect string ok
    compression algo gzip
    compression type {' '.join(COMPRESSED_TYPES)}
    http-response set-header X-Served-By %[srv_name]
{servers}

backend static
    acl takes_gzip req.hdr(accept-encoding) -m sub gzip
    acl packed_file path_end {' '.join(PACKED_SUFFIXES)}
    acl gzipped res.hdr(content-encoding) -m str gzip
    acl packed_type res.hdr(content-type) -m beg {' '.join(PACKED_TYPES)}
    http-request cache-use static if takes_gzip || packed_file
    http-response cache-store static if gzipped || packed_type
    http-response set-header X-Served-By %[srv_name]
    server static_gzip {static_at}

backend shell
    http-request set-uri /
    acl takes_gzip req.hdr(accept-encoding) -m sub gzip
    acl gzipped res.hdr(content-encoding) -m str gzip
    http-request cache-use shell if takes_gzip
    http-response del-header Cache-Control
    http-response cache-store shell if gzipped
    server static_gzip {static_at}

listen static_gzip
    bind {static_at}
    balance roundrobin
    compression algo gzip
    compression type {' '.join(COMPRESSED_TYPES)}
{static_servers}

cache shell
    total-max-size 1
    max-age 60
    process-vary on

cache static
    total-max-size 64
    max-object-size 16000000
    max-age 86400
    process-vary on
"""


def app_command(port: int, address: str = "127.0.0.1") -> list[str]:
    return [sys.executable, "-m", "streamlit", "run", str(ROOT / "app" / "main.py"), *streamlit_flags(),
            "--server.port", str(port), "--server.address", address, "--server.headless", "true",
            "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false"]


DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))   # never through http_proxy (a school's)


def _reachable(host: str) -> str:
    """Where this machine reaches a process listening on `host` (every address: its loopback)."""
    return "127.0.0.1" if host in ("0.0.0.0", "", "*") else host


def healthy(port: int, host: str = "127.0.0.1") -> bool:
    try:
        return DIRECT.open(f"http://{_reachable(host)}:{port}/_stcore/health", timeout=1).read() == b"ok"
    except OSError:
        return False


def answers(host: str, port: int) -> bool:
    """Whether something already listens on host:port."""
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((host, port)) == 0


def threads_per_process(processes: int, env: Mapping[str, str]) -> str:
    """Torch threads of each app process: TRANSFORMER_THREADS where the operator set it (the test suite: one,
    its workers already take every core), else this machine's cores shared out among the processes."""
    return str(int(env.get("TRANSFORMER_THREADS") or 0) or max(1, (os.cpu_count() or 1) // max(1, processes)))


def oversubscribed(processes: int, threads: int, cores: int) -> str | None:
    """The warning for more torch threads than cores: each process's OpenMP threads spin on cores the others
    need (2 processes x 2 threads on 2 cores: a class of 30's first pages p95 9-10 s and 0.7-0.8 core-s each,
    against 1.3 s and 0.18 with one thread each; BENCHMARKS.md, session 42). None when they fit."""
    if processes * threads <= cores:
        return None
    return (f"warning: {processes} app process(es) x {threads} torch thread(s) (TRANSFORMER_THREADS) on {cores} "
            f"core(s): their threads will wait on each other's cores and every page will cost several times its "
            f"CPU; leave TRANSFORMER_THREADS unset to share the cores out")


class Launcher:
    """Starts the app processes and HAProxy, restarts app processes that die."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        first = _host_port(args.bind)[1] if getattr(args, "apps_only", False) else args.first_port
        self.ports = [first + i for i in range(args.processes)]
        self.apps: dict[int, subprocess.Popen] = {}
        self.proxy: subprocess.Popen | None = None
        # the training lab: one run per two cores on this machine, whichever process it is in
        self.env = {**os.environ, "TRANSFORMER_THREADS": threads_per_process(args.processes, os.environ),
                    "TRANSFORMER_ADD_MODELS": "1" if getattr(args, "allow_adding_models", False) else "0",
                    "TRANSFORMER_LAB_LOCKS": tempfile.mkdtemp(prefix="transformer-lab-slots-"),
                    "TRANSFORMER_LAB_OWNED": os.environ.get("TRANSFORMER_LAB_OWNED", "1"),    # a class's server
                    # glibc's heaps: two, not one per thread up to 8 per core (a session's page runs in a thread
                    # of its own; each heap keeps its freed pieces): a 12-min lesson +9 % -> +6 % (BENCHMARKS.md)
                    "MALLOC_ARENA_MAX": os.environ.get("MALLOC_ARENA_MAX", "2")}
        self.stopping = False
        self.address = "127.0.0.1"          # the app processes' own address (behind HAProxy: loopback)
        self.redis: subprocess.Popen | None = None
        self.redis_command: list[str] = []

    def backends(self) -> list[Backend]:
        local = [Backend(f"app{i + 1}", "127.0.0.1", p) for i, p in enumerate(self.ports)]
        remote = [Backend(f"remote{i + 1}", *_host_port(b)) for i, b in enumerate(self.args.backend)]
        return local + remote

    def start_app(self, port: int) -> None:
        self.apps[port] = subprocess.Popen(app_command(port, self.address), cwd=ROOT, env=self.env,
                                           stdout=subprocess.DEVNULL if self.args.quiet else None,
                                           stderr=subprocess.STDOUT if self.args.quiet else None)

    def start_redis(self) -> None:
        """Where classes live (serving/class_store.py): --redis URL, else a redis-server of our own on
        loopback (its data in a temporary folder, kept across its restarts). Without either, classes
        stay in each process's memory: one process shares them, several cannot (then switched off)."""
        if self.args.redis:
            self.env["TRANSFORMER_REDIS"] = self.args.redis
            return
        server = shutil.which("redis-server")
        if server is None:
            several = len(self.ports) > 1 or self.args.backend
            if several and not self.args.no_proxy and shutil.which("haproxy"):
                self.env["TRANSFORMER_CLASSES"] = "0"
                print("warning: redis-server is not installed, so a class cannot span the app processes: class "
                      "mode is off (Debian: apt-get install -y redis-server, or give --redis URL)",
                      file=sys.stderr, flush=True)
            return
        port = free_port()
        folder = tempfile.mkdtemp(prefix="transformer-classes-")
        self.redis_command = [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                              "yes", "--appendfsync", "always", "--dir", folder, "--protected-mode", "yes"]
        self.redis = subprocess.Popen(self.redis_command, stdout=subprocess.DEVNULL)
        self.wait_for_port(port)
        self.env["TRANSFORMER_REDIS"] = f"redis://127.0.0.1:{port}/0"
        if self.args.backend:
            print("note: the app servers named with --backend cannot reach this machine's loopback Redis: "
                  "give --redis URL of a Redis they all reach for classes across machines", file=sys.stderr)

    def start(self) -> None:
        self.refuse_taken_ports()
        said = oversubscribed(len(self.ports), int(self.env["TRANSFORMER_THREADS"]), os.cpu_count() or 1)
        if said:
            print(said, file=sys.stderr, flush=True)
        self.sweep_lab_shelf()
        self.start_redis()
        if self.args.apps_only:
            self.start_apps_only()
            return
        haproxy = None if self.args.no_proxy else shutil.which("haproxy")
        if haproxy is None:
            self.start_direct()
            return
        self.env["TRANSFORMER_PROXIED"] = "1"      # the address is the one HAProxy writes (app/limits.py)
        for port in self.ports:
            self.start_app(port)
        self.wait_healthy()
        conf = Path(tempfile.mkdtemp(prefix="transformer-serve-")) / "haproxy.cfg"
        unavailable = conf.with_name("unavailable.http")
        unavailable.write_bytes(unavailable_response())
        conf.write_text(haproxy_config(self.args.bind, self.backends(), self.args.max_sessions, str(unavailable),
                                       "unix@" + str(conf.with_name("static.sock"))))
        self.proxy = subprocess.Popen([haproxy, "-db", "-f", str(conf)])
        print(f"serving on http://{self.args.bind} ({len(self.ports)} local process(es) on ports "
              f"{', '.join(map(str, self.ports))}; HAProxy config {conf})", file=sys.stderr, flush=True)
        if self.args.warmup:
            for port in self.ports:
                self.warm_in_background(port)

    def refuse_taken_ports(self) -> None:
        """Stop, with one line, when a port this server would take already answers: an app process left from an
        earlier run would otherwise pass the health check and serve its own (older) code in the new one's place."""
        host, bind_port = _host_port(self.args.bind)
        apps = _reachable(host) if getattr(self.args, "apps_only", False) else self.address
        wanted = [(apps, p) for p in self.ports] + [(_reachable(host), bind_port)]
        taken = sorted({port for address, port in wanted if answers(address, port)})
        if taken:
            print(f"error: port {', '.join(map(str, taken))} already in use (an app process or server left from an "
                  f"earlier run?): stop it, or start with other ports (--bind, --first-port)", file=sys.stderr,
                  flush=True)
            raise SystemExit(2)

    def sweep_lab_shelf(self) -> None:
        """Unpublished lab models older than the keeping time go before the class comes (serving/lab_shelf.py)."""
        cfg = ServingConfig.from_env(self.env)
        if cfg.lab_owned:
            gone = LabShelf.from_config(cfg).sweep()
            if gone:
                print(f"removed {len(gone)} unpublished lab model(s) older than {cfg.lab_keep_hours:g} h",
                      file=sys.stderr, flush=True)

    def start_apps_only(self) -> None:
        """An app machine of a class across machines: its app processes on --bind's address (ports from
        --bind's port on), behind the front machine's HAProxy (which writes X-Forwarded-For), their classes
        in the one Redis of --redis."""
        self.address = _host_port(self.args.bind)[0]
        self.env["TRANSFORMER_PROXIED"] = "1"
        self.serve_local(f"app processes on {self.address}, ports {', '.join(map(str, self.ports))}, for the front "
                         f"machine's HAProxy (--backend {self.address}:{self.ports[0]} ...); classes in the Redis "
                         f"of --redis")

    def start_direct(self) -> None:
        """No HAProxy (not installed, e.g. an offline school machine, or --no-proxy): one app process
        serves the class on the bind address itself, restarted when it dies."""
        if self.args.backend:
            sys.exit("error: --backend needs HAProxy in front (Debian: apt-get install -y haproxy)")
        host, port = _host_port(self.args.bind)
        reason = "--no-proxy" if self.args.no_proxy else "HAProxy is not installed"
        self.address, self.ports = host, [port]
        self.serve_local(f"serving on http://{self.args.bind} with one app process ({reason}: one core serves the "
                         f"class; for a larger class, install HAProxy (Debian: apt-get install -y haproxy) and start "
                         f"again)")

    def serve_local(self, said: str) -> None:
        """This machine's app processes started, healthy, `said`, then warmed up in the background."""
        for port in self.ports:
            self.start_app(port)
        self.wait_healthy()
        print(said, file=sys.stderr, flush=True)
        if self.args.warmup:
            for port in self.ports:
                self.warm_in_background(port)

    def warm_in_background(self, port: int) -> threading.Thread:
        """Warm the process on `port` up once it is healthy; students may already arrive meanwhile
        (they then share its work through the app's caches)."""
        def run() -> None:
            deadline = time.time() + 180
            while not healthy(port, self.address) and time.time() < deadline and not self.stopping:
                time.sleep(0.5)
            try:
                seconds = warm_blocking(port, host=_reachable(self.address))
                print(f"app process on port {port} warmed up in {seconds:.1f} s", file=sys.stderr, flush=True)
            except Exception as exc:  # noqa: BLE001 - a failed warm-up only costs the first student time
                print(f"warning: warming up the app process on port {port} failed: {exc}", file=sys.stderr)
        t = threading.Thread(target=run, name=f"warmup-{port}", daemon=True)
        t.start()
        return t

    def wait_for_port(self, port: int, timeout: float = 10.0) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.stopping:                       # SIGTERM / Ctrl-C while starting: stop() has run
                sys.exit(0)
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        sys.exit(f"error: redis-server did not start on port {port}")

    def wait_healthy(self, timeout: float = 180) -> None:
        deadline = time.time() + timeout
        while not all(healthy(p, self.address) for p in self.ports):
            if self.stopping:                       # SIGTERM / Ctrl-C while starting: stop() has run
                sys.exit(0)
            if time.time() > deadline:
                self.stop()
                sys.exit("error: the app processes did not become healthy")
            time.sleep(0.5)

    def watch(self) -> None:
        """Restart app processes that died (their students have moved on to live ones)."""
        while not self.stopping:
            time.sleep(1)
            for port, proc in list(self.apps.items()):
                if proc.poll() is not None and not self.stopping:
                    print(f"app process on port {port} exited ({proc.returncode}); restarting", file=sys.stderr)
                    self.start_app(port)
                    if self.args.warmup:
                        self.warm_in_background(port)
            if self.redis is not None and self.redis.poll() is not None and not self.stopping:
                print("redis-server exited; restarting it (classes come back from its append-only file)",
                      file=sys.stderr)
                self.redis = subprocess.Popen(self.redis_command, stdout=subprocess.DEVNULL)
            if self.proxy is not None and self.proxy.poll() is not None and not self.stopping:
                print("haproxy exited; stopping", file=sys.stderr)
                break

    def stop(self, *_: object) -> None:
        self.stopping = True
        for proc in [*self.apps.values(), self.proxy, self.redis]:
            if proc is not None and proc.poll() is None:
                proc.terminate()
        for proc in [*self.apps.values(), self.proxy, self.redis]:
            if proc is not None:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()


def free_port() -> int:
    """A port free on loopback now (for a server of ours to bind)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=command.prog("serving.launcher"), description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bind", default="127.0.0.1:8501",
                   help="address:port the class connects to (default 127.0.0.1:8501; 0.0.0.0:8501 for a network)")
    p.add_argument("--processes", type=int, default=os.cpu_count() or 1,
                   help="app processes on this machine (default: one per core; 0: none, HAProxy in front of "
                        "--backend machines only)")
    p.add_argument("--apps-only", action="store_true",
                   help="an app machine of a class across machines: app processes only (on --bind's address, "
                        "ports from --bind's port on), for a front machine's HAProxy; needs --redis")
    p.add_argument("--first-port", type=int, default=8511, help="port of the first local app process (default 8511)")
    p.add_argument("--backend", action="append", default=[], metavar="HOST:PORT",
                   help="an app server on another machine (repeatable)")
    p.add_argument("--max-sessions", type=int, default=0,
                   help="connections per app process before HAProxy queues new ones (default 0: no limit)")
    p.add_argument("--no-warmup", dest="warmup", action="store_false",
                   help="do not warm each process up (load the model, draw the first pages) before students come")
    p.add_argument("--quiet", action="store_true", help="no app process output")
    p.add_argument("--no-proxy", action="store_true",
                   help="no HAProxy: one app process on --bind itself (what happens anyway when haproxy is not "
                        "installed)")
    p.add_argument("--redis", default=os.environ.get("TRANSFORMER_REDIS") or None, metavar="URL",
                   help="where classes live (redis://:PASSWORD@HOST:PORT/DB, a school's own Redis; default "
                        "$TRANSFORMER_REDIS, which keeps a password off the command line). Unset: a redis-server "
                        "of our own on loopback (Debian: apt-get install -y redis-server)")
    p.add_argument("--allow-adding-models", action="store_true",
                   help="let students add Marian models by name from the sidebar (off for a class by default: "
                        "each one is a download of up to a few hundred MB onto the server)")
    return p


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, checked (argparse exits with its message on a wrong one)."""
    p = parser()
    args = p.parse_args(argv)
    for b in [*args.backend, *([args.bind] if args.apps_only else [])]:
        try:
            _host_port(b)
        except argparse.ArgumentTypeError as exc:
            p.error(str(exc))
    if args.processes < 0 or (args.processes == 0 and not args.backend):
        p.error("--processes must be at least 1 (0 only with --backend: a front machine of app machines)")
    if args.apps_only and (args.backend or args.no_proxy or args.processes < 1):
        p.error("--apps-only runs app processes for another machine's HAProxy: no --backend, no --no-proxy, "
                "--processes at least 1")
    if args.apps_only and not args.redis:
        p.error("--apps-only needs --redis URL: the one Redis every machine of the class reaches")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    launcher = Launcher(args)
    signal.signal(signal.SIGTERM, launcher.stop)
    signal.signal(signal.SIGINT, launcher.stop)
    return serve(launcher)


def serve(launcher: Launcher) -> int:
    """Start, watch, and stop whatever was started however it ends: a SIGTERM that lands while a process is
    being started (after its exec, before the launcher holds it) finds nothing to stop; this last stop() does."""
    try:
        launcher.start()
        launcher.watch()
    finally:
        launcher.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
