"""`make serve` on loopback: two app processes behind HAProxy (serving/launcher.py). Each browser
stays on its process (a cookie, not its address), static files come gzipped, a killed
process's students reconnect to a live one and get their page back from the link, and
concurrent students never see each other's sentences."""
from __future__ import annotations

import asyncio
import os
import random
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from pathlib import Path

import psutil
import pytest

from serving.launcher import COOKIE, Backend, haproxy_config
from serving.protocol import Student, http_get
from tests.support import (
    CHROMIUM,
    ROOT,
    choose,
    free_port,
    reconnected,
    run_apart,
    settle,
    shown_value,
    wait_healthy,
    wait_in_page,
    watch_connection,
)

HAPROXY = shutil.which("haproxy")
LAUNCHER_OUTPUT: list[str] = []      # what the launcher printed (read by a thread as it comes)
needs_haproxy = pytest.mark.skipif(HAPROXY is None, reason="haproxy not installed (apt-get install -y haproxy)")


def test_the_proxy_configuration_is_valid_and_sticky(tmp_path):
    from serving.launcher import unavailable_response
    (tmp_path / "unavailable.http").write_bytes(unavailable_response())
    conf = haproxy_config("127.0.0.1:9999", [Backend("app1", "127.0.0.1", 9001), Backend("m2", "10.0.0.2", 8501)],
                          max_sessions=40, errorfile=str(tmp_path / "unavailable.http"))
    assert f"cookie {COOKIE} insert" in conf and "compression algo gzip" in conf and "option redispatch" in conf
    assert "server app1 127.0.0.1:9001 cookie app1 check" in conf and "server m2 10.0.0.2:8501 cookie m2" in conf
    assert conf.count(" maxconn 40\n") == 2 and "balance source" not in conf   # never by client address
    assert "http-request set-header X-Forwarded-For %[src]" in conf      # a browser's own is replaced
    # the static proxy's servers follow the app backend's checks: one health request a second per process, not two
    assert "server app1 127.0.0.1:9001 track app/app1" in conf and conf.count("option httpchk") == 1
    if HAPROXY:
        (tmp_path / "h.cfg").write_text(conf)
        done = subprocess.run([HAPROXY, "-c", "-f", str(tmp_path / "h.cfg")], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr


@needs_haproxy
def test_with_no_app_process_up_the_proxy_answers_with_the_apps_own_page(tmp_path):
    """Issue 42, 4d: the backend down, a browser gets our page (503, it retries by itself), not HAProxy's."""
    from serving.launcher import unavailable_response
    (tmp_path / "unavailable.http").write_bytes(unavailable_response())
    port = free_port()
    conf = haproxy_config(f"127.0.0.1:{port}", [Backend("app1", "127.0.0.1", free_port())],
                          errorfile=str(tmp_path / "unavailable.http"))
    (tmp_path / "h.cfg").write_text(conf)
    proxy = subprocess.Popen([HAPROXY, "-db", "-f", str(tmp_path / "h.cfg")], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 10
        while True:
            try:
                urllib.request.build_opener(urllib.request.ProxyHandler({})).open(f"http://127.0.0.1:{port}/",
                                                                                 timeout=10)
            except urllib.error.HTTPError as exc:
                status, body = exc.code, exc.read().decode()
                break
            except OSError:
                assert time.time() < deadline, "haproxy did not start"
                time.sleep(0.1)
        assert status == 503 and "The class server is restarting" in body and 'http-equiv="refresh"' in body
    finally:
        proxy.terminate()
        proxy.wait(timeout=10)


def _app_pid(port: int) -> int:
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if "streamlit" in " ".join(cmd) and str(port) in cmd:
            return p.pid
    raise LookupError(port)


@pytest.fixture(scope="module")
def proxy(app_checkpoints):
    if HAPROXY is None:
        pytest.skip("haproxy not installed (apt-get install -y haproxy)")
    port, first = free_port(), free_port()
    env = {**os.environ, "TRANSFORMER_CHECKPOINTS": str(app_checkpoints)}
    launcher = subprocess.Popen([sys.executable, "-m", "serving.launcher", "--bind", f"127.0.0.1:{port}",
                                 "--processes", "2", "--first-port", str(first)], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, launcher)
    LAUNCHER_OUTPUT.clear()
    threading.Thread(target=lambda: LAUNCHER_OUTPUT.extend(iter(launcher.stdout.readline, "")), daemon=True).start()
    yield url, (first, first + 1)
    launcher.send_signal(signal.SIGTERM)
    launcher.wait(timeout=30)


def app_tracebacks(most: int = 80) -> str:
    """The tracebacks the app processes printed (the launcher runs them without --quiet here), at most `most`
    lines: a page that raised says "This app has encountered an error" and nothing more (showErrorDetails none)."""
    lines = list(LAUNCHER_OUTPUT)
    start = next((i for i, line in enumerate(lines) if "Traceback" in line), len(lines))   # rich boxes it
    if found := "".join(lines[start:start + most]):
        return found
    said = [line for line in lines if re.search(r"error|exception|warning", line, re.IGNORECASE)][-20:]
    return "(no traceback in the app processes' output; its lines that name an error, an exception or a " \
           "warning, the last 20:)\n" + "".join(said)


def get(url: str, path: str, cookies: dict[str, str]) -> dict[str, str]:
    host, port = url.removeprefix("http://").split(":")
    status, _, headers = run_apart(http_get(host, int(port), path, cookies))
    assert status == 200, (path, status)
    return headers


@needs_haproxy
def test_each_process_is_warmed_up_before_students_come(proxy):
    """serve.py draws the first pages once in each process (serving/warmup.py): the model is
    loaded, and the pages ran without an exception (warm-up fails on one)."""
    _, ports = proxy
    deadline = time.time() + 240
    while time.time() < deadline and not all(any(f"port {p} warmed up" in line for line in LAUNCHER_OUTPUT)
                                              for p in ports):
        assert not any("warming up" in line and "failed" in line for line in LAUNCHER_OUTPUT), LAUNCHER_OUTPUT
        time.sleep(0.5)
    assert all(any(f"port {p} warmed up" in line for line in LAUNCHER_OUTPUT) for p in ports), LAUNCHER_OUTPUT
    assert all(psutil.Process(_app_pid(p)).environ().get("MALLOC_ARENA_MAX") == "2" for p in ports)   # two heaps


@needs_haproxy
def test_each_browser_stays_on_one_process_by_cookie(proxy):
    url, _ = proxy
    seen = set()
    for _ in range(4):                                 # four browsers (cookie jars), one address
        jar: dict[str, str] = {}
        assert "x-served-by" not in get(url, "/", jar) and COOKIE not in jar     # the page shell: HAProxy's own
        first = get(url, "/_stcore/health", jar)["x-served-by"]                  # the first to reach an app pins
        assert jar.get(COOKIE) == first
        later = ("/_stcore/health", "/_stcore/host-config", "/_stcore/health")
        assert {get(url, p, jar)["x-served-by"] for p in later} == {first}
        seen.add(first)
    assert seen == {"app1", "app2"}                    # and the browsers are spread over both


@needs_haproxy
def test_static_files_come_gzipped_and_from_the_proxys_cache(proxy):
    """The cache keeps the gzipped file (compressed once, not at every visit); a client that takes no gzip gets the
    plain file, from an app process, and leaves the cache to the browsers that do."""
    url, _ = proxy
    index = urllib.request.urlopen(url + "/", timeout=30).read().decode()
    script = next(part.split('"')[0] for part in index.split('src="')[1:] if part.split('"')[0].endswith(".js"))
    path = "/" + script.removeprefix("./").lstrip("/")
    plain = urllib.request.urlopen(urllib.request.Request(url + path, headers={"Accept-Encoding": "identity"}),
                                   timeout=30)
    assert plain.headers.get("Content-Encoding") is None and plain.read()[:1] != b"\x1f"
    first = get(url, path, {})                          # a first browser: may come from an app process
    assert first.get("content-encoding") == "gzip", first
    again = get(url, path, {})                          # the next browser: from HAProxy's cache
    assert again.get("content-encoding") == "gzip", again
    assert again.get("x-served-by") == "" and "age" in again, again     # no app process served it


@needs_haproxy
def test_fonts_come_from_the_proxys_cache_to_every_browser(proxy):
    """Fonts are never gzipped: HAProxy's cache keeps the plain file and gives it to every browser, whatever it
    accepts (they had come from an app process at every first visit: ~10 ms of its CPU a student)."""
    import streamlit as st
    url, _ = proxy
    fonts = sorted((Path(st.__file__).parent / "static" / "static" / "media").glob("*.woff2"))
    assert fonts, "this Streamlit ships no woff2 font"
    path = f"/static/media/{fonts[0].name}"
    first = urllib.request.urlopen(urllib.request.Request(url + path, headers={"Accept-Encoding": "identity"}),
                                   timeout=30)
    body = first.read()
    assert first.headers.get("Content-Encoding") is None and body == fonts[0].read_bytes()
    for accepted in ("identity", "gzip, deflate, br"):                  # the next browsers: from the cache
        again = urllib.request.urlopen(urllib.request.Request(url + path, headers={"Accept-Encoding": accepted}),
                                       timeout=30)
        assert again.read() == body and again.headers.get("Content-Encoding") is None
        assert again.headers.get("X-Served-By") in ("", None) and again.headers.get("Age") is not None, \
            dict(again.headers)


@needs_haproxy
def test_the_page_shell_comes_from_the_proxys_cache_for_every_page_and_link(proxy):
    """Streamlit answers every page's path with the same index.html (~2 ms of an app process's CPU a first visit):
    HAProxy asks for it once, gzipped, and gives that to the next browsers whatever page or link they open, still
    told to revalidate it (no-cache) and without pinning them to the process that answered it."""
    import gzip

    import streamlit as st
    url, _ = proxy
    shell = (Path(st.__file__).parent / "static" / "index.html").read_bytes()

    def get(path: str):
        answer = urllib.request.urlopen(urllib.request.Request(url + path, headers={"Accept-Encoding": "gzip"}),
                                        timeout=30)
        return answer, gzip.decompress(answer.read())

    first, body = get("/")
    assert body == shell and first.headers.get("Cache-Control") == "no-cache"
    for path in ("/", "/explore?text=A+dog+runs.", "/step?class=ABCDEF&seat=s1"):
        again, body = get(path)
        assert body == shell and again.headers.get("Age") is not None, (path, dict(again.headers))
        assert again.headers.get("Cache-Control") == "no-cache" and again.headers.get("Set-Cookie") is None
    health, _ = get("/_stcore/health")                                   # everything else still reaches an app
    assert health.headers.get("X-Served-By", "").startswith("app") and health.headers.get("Age") is None


@needs_haproxy
def test_students_never_see_each_others_sentences(proxy, app_checkpoints):
    """Twelve students at once, each with their own sentence, on both processes: each
    page run shows that student's own translation."""
    from model.inference.options import DecodeOptions
    from model.inference.pipeline import translate
    from model.storage.checkpoint import load_checkpoint
    from tests.support import sentences
    url, _ = proxy
    texts = sentences(12, seed=5)
    ckpt = load_checkpoint(app_checkpoints / "multi30k-en-de")
    expected = translate(ckpt, texts, DecodeOptions("beam", beam_size=4, alpha=ckpt.beam_alpha))
    assert len(set(expected)) > 1

    async def student(text: str, want: str) -> Student:
        s = Student(url, {"text": text})
        await s.open()
        await s.rerun("first", expect=want)
        # a browser's session: its own layer and head pickers (issue 53), whose choice the student's next action
        # tells the server ("pick"): a run of the pickers' own fragment (not the charts': the browser drew the
        # choice already), which writes the link itself
        assert "layer" not in s.widgets and s.fragments["pickers"] not in ("", s.fragments["kind"],
                                                                           s.fragments["single"]), s.fragments
        rng = random.Random(text)
        for _ in range(5):
            pick, (layer, head) = s.pick_head(rng)
            await s.rerun("change", [pick], expect=want, fragment=s.fragments["pickers"])
            link = dict(urllib.parse.parse_qsl(s.link))
            assert (link.get("layer", "0"), link.get("head", "0")) == (str(layer), str(head)), s.link
            assert (s.component_data("pickers")["layer"], s.component_data("pickers")["head"]) == (layer, head)
        await s.close()
        return s

    async def everyone():
        return await asyncio.gather(*(student(t, w) for t, w in zip(texts, expected)))
    students = run_apart(everyone())
    runs = [r for s in students for r in s.runs]
    assert len(runs) == 72 and all(r.ok for r in runs), [r.error for r in runs if not r.ok][:3]
    assert {s.cookies.get(COOKIE) for s in students} == {"app1", "app2"}


def _on(browser, url: str, server: str, path: str, selector: str):
    """A browser (its own context: cookies, session) kept on app process `server` by the proxy's cookie."""
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    context.add_cookies([{"name": COOKIE, "value": server, "url": url}])
    page = context.new_page()
    page.goto(url + path)
    page.wait_for_selector(selector, timeout=90_000)
    settle(page)
    return page


def _sidebar(page) -> str:
    return page.locator("[data-testid='stSidebar']").inner_text()


def _shows(page, text: str, timeout: float = 10_000) -> None:
    wait_in_page(page, "(t) => document.body.innerText.includes(t)", arg=text, timeout=timeout)


def _sentence(page) -> str:
    return page.get_by_label("Sentence to translate", exact=False).input_value()


def _gets_sentence(page, text: str) -> None:
    wait_in_page(page, "(t) => [...document.querySelectorAll('input')].some(i => i.value === t)", arg=text,
                 timeout=10_000)


def _type_sentence(page, text: str) -> None:
    box = page.get_by_label("Sentence to translate", exact=False)
    box.fill(text)
    box.press("Enter")
    settle(page)


@needs_haproxy
@pytest.mark.e2e
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not installed")
@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server not installed")
def test_a_class_follows_its_teacher_across_processes(proxy, browser):
    """A teacher on one app process, students on both, the class in Redis: the students follow a new
    sentence, a page and a step; one leaves and follows again; a poll is answered and revealed; a forged
    teacher link leads nothing; a second class beside the first sees none of it; a student whose app
    process dies comes back following."""
    url, ports = proxy
    teacher = _on(browser, url, "app1", "/", ".st-key-page-overview")
    teacher.get_by_role("button", name="Start a class").click()
    settle(teacher)
    join = teacher.locator("[data-testid='stSidebar'] a[href*='class=']").first.get_attribute("href")
    assert join.startswith(url + "/?class=")
    code = join.rsplit("=", 1)[1]
    teacher.get_by_text("QR code and teacher link").click()
    secret_link = teacher.locator("[data-testid='stSidebar'] code").filter(has_text="teacher=").inner_text()
    secret = secret_link.rsplit("teacher=", 1)[1].strip()
    students = [_on(browser, url, server, join.removeprefix(url), ".st-key-page-overview")
                for server in ("app2", "app1")]
    for s in students:
        assert "Following the teacher" in _sidebar(s) and secret not in s.content() and secret not in s.url
    _shows(teacher, "2 students following", timeout=15_000)

    _type_sentence(teacher, "the dog runs in the park")
    for s in students:
        _gets_sentence(s, "the dog runs in the park")
    teacher.get_by_role("link", name="Step through decoding").click()
    teacher.wait_for_selector(".st-key-page-step", timeout=60_000)
    settle(teacher)
    teacher.get_by_role("button", name="Next").first.click()
    settle(teacher)
    for s in students:
        s.wait_for_selector(".st-key-page-step", timeout=10_000)
        _shows(s, "Step 1 of")

    leaver, stayer = students
    rang: list[int] = []                                               # the class bell's answers (app/bell.py)
    asked: list[str] = []                                              # and its requests: one open at a time
    stayer.on("request", lambda r: asked.append(r.url) if "/_class/bell" in r.url else None)
    stayer.on("response", lambda r: rang.append(r.status) if "/_class/bell" in r.url else None)
    stayer.on("requestfailed", lambda r: rang.append(0) if "/_class/bell" in r.url else None)
    leaver.get_by_role("button", name="Next").first.click()          # on their own: they leave
    settle(leaver)
    _shows(leaver, "Exploring on your own")
    for _ in range(2):
        teacher.get_by_role("button", name="Next").first.click()
        settle(teacher)
    _shows(stayer, "Step 3 of")
    assert 200 in rang, rang                                           # the page was told, in the browser
    stayer.wait_for_timeout(500)
    assert len(asked) - len(rang) <= 1, (asked, rang)          # one request open per page, however often it changed
    assert "Step 2 of" in leaver.locator("body").inner_text()
    leaver.get_by_role("button", name="Follow the teacher again").click()
    _shows(leaver, "Step 3 of")
    assert _sentence(leaver) == "the dog runs in the park"

    teacher.get_by_role("button", name="Ask the class: what comes next?").click()     # a poll
    settle(teacher)
    assert teacher.locator(".st-key-translation").inner_text().startswith("(the translation is hidden")
    for i, s in enumerate(students):
        s.wait_for_selector(".st-key-class-poll [data-testid='stButtonGroup']", timeout=30_000)
        settle(s)
        assert "hidden while the class answers" in s.locator("body").inner_text()
        s.locator(".st-key-class-poll [data-testid='stButtonGroup'] button").nth(i).click()
        settle(s)
        s.get_by_role("button", name="Send my answer").click()
        settle(s)
        assert "Your answer is in" in s.locator(".st-key-class-poll").inner_text()
    _shows(teacher, "2 answers so far")
    teacher.get_by_role("button", name="Reveal the answers").click()
    settle(teacher)
    for s in students:
        s.wait_for_selector(".st-key-class-poll .js-plotly-plot", timeout=10_000)
        assert "class (2 answers)" in s.locator(".st-key-class-poll").inner_text()

    forger = _on(browser, url, "app2", f"/?class={code}&teacher=not-{secret[:6]}", ".st-key-page-overview")
    assert "This teacher link is not valid" in forger.locator("body").inner_text()
    assert forger.get_by_role("button", name="End the class").count() == 0

    other = _on(browser, url, "app2", "/", ".st-key-page-overview")
    other.get_by_role("button", name="Start a class").click()
    settle(other)
    other_join = other.locator("[data-testid='stSidebar'] a[href*='class=']").first.get_attribute("href")
    assert other_join != join
    other_student = _on(browser, url, "app1", other_join.removeprefix(url), ".st-key-page-overview")
    _type_sentence(teacher, "a woman sits on a red ball")
    _gets_sentence(stayer, "a woman sits on a red ball")
    other_student.wait_for_timeout(1500)
    assert other_student.locator(".st-key-page-overview").count() == 1 and _sentence(other_student) != \
        "a woman sits on a red ball"
    watch_connection(leaver)
    os.kill(_app_pid(ports[1]), signal.SIGKILL)          # the process of one student (app2) dies
    reconnected(leaver)                                  # its page reconnects, through the proxy, to app1
    _type_sentence(teacher, "two dogs play in the snow")
    _gets_sentence(leaver, "two dogs play in the snow")   # ...and follows the class again, by itself
    assert "Following the teacher" in _sidebar(leaver)
    for page in (teacher, *students, forger, other, other_student):
        assert page.locator("[data-testid='stException']").count() == 0
        page.context.close()


@needs_haproxy
def test_on_the_step_page_a_teachers_next_reruns_only_the_step_through_of_each_student(proxy):
    """Issue 43, item 3: a follower's step page hears the class bell in the step-through's own fragment
    (classroom.follow_here), so the teacher's Next reaches every student without a whole run of their page;
    a new sentence still reruns it whole, and the sentence the class opened with, typed again, is followed too (the
    client sends the address bar the page last wrote, as a browser does). Over Streamlit's protocol."""
    from serving.class_client import change, end_class, open_class, params, story, wait_for

    async def lesson() -> tuple[list, list[int], list[int], list[int]]:
        teacher, followers, tasks = await open_class(proxy[0], 2, "A dog runs in the park.")
        try:
            await wait_for(lambda: all({"class_bell", "next"} <= f.s.fragments.keys() for f in followers), 30)
            places = [(f.s.fragments.get("class_bell"), f.s.fragments.get("next")) for f in followers]
            before = [f.s.whole_runs for f in followers]
            for i in range(3):
                _, missed = await change(teacher, followers, f"next {i}", None, 20)
                assert missed == 0, story(teacher, *followers)
            after_next = [f.s.whole_runs for f in followers]
            _, missed = await change(teacher, followers, "sentence", "Two men play football.", 20)
            assert missed == 0, story(teacher, *followers)  # the link comes before the run ends: wait for it
            await wait_for(lambda: all(f.s.whole_runs > n for f, n in zip(followers, after_next, strict=True)), 10)
            _, missed = await change(teacher, followers, "the first again", "A dog runs in the park.", 20)
            assert missed == 0 and params(teacher.s.link)["text"] == "A dog runs in the park.", teacher.s.link
            return places, before, after_next, [f.s.whole_runs for f in followers]
        finally:
            await end_class(teacher, followers, tasks)
            errors.extend(e for x in (teacher, *followers) for e in x.errors)
    errors: list[str] = []
    places, before, after_next, after_sentence = run_apart(lesson())
    if errors:       # a student's page raised (and caught up by its own check): the app processes' log says where
        warnings.warn(f"the app raised while the class followed: {errors}\n" + app_tracebacks(), stacklevel=1)
    assert all(bell == step and bell for bell, step in places), places      # the bell is in the step-through
    # six follows of Next: whole runs only where the student's own 2-s check happened to see the change first
    assert sum(after_next) - sum(before) < 3, (before, after_next)
    assert all(s > n for s, n in zip(after_sentence, after_next, strict=True)), (after_next, after_sentence)


@needs_haproxy
def test_in_a_class_the_pickers_are_the_servers_until_a_student_explores_on_their_own(proxy):
    """Issue 53: a teacher's and a following student's layer or head change reach the server at once (the class
    follows the teacher; a follower's own change makes them leave the teacher's view), so their explorer draws
    Streamlit's pickers; a student of the class who explores on their own chooses in the browser (the pickers'
    component), as a student with no class does. Over Streamlit's protocol."""
    from serving.class_client import end_class, open_class, wait_for

    async def lesson() -> tuple[set, set, set]:
        teacher, followers, tasks = await open_class(proxy[0], 1, "A dog runs in the park.")
        follower = followers[0]
        try:
            teacher.s.goto("explore")
            await teacher.run("to the explorer")
            # the follower's explorer drawn as far as its pickers, whichever they are (the run sends them in turn)
            assert await wait_for(lambda: "head" in follower.s.widgets or "pickers" in follower.s.widgets, 30), \
                follower.s.widgets.keys()
            following = set(follower.s.widgets)
            await follower.run("explore on my own", [follower.s.press("class-leave")])
            assert await wait_for(lambda: "pickers" in follower.s.widgets, 30), follower.s.widgets.keys()
            return set(teacher.s.widgets), following, set(follower.s.widgets)
        finally:
            await end_class(teacher, followers, tasks)
    teacher, following, on_their_own = run_apart(lesson())
    assert {"layer", "head"} <= teacher and "pickers" not in teacher, teacher
    assert {"layer", "head"} <= following and "pickers" not in following, following
    assert "pickers" in on_their_own and not {"layer", "head"} & on_their_own, on_their_own


@needs_haproxy
@pytest.mark.e2e
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not installed")
def test_a_killed_process_s_students_get_their_page_back(proxy, browser):
    url, ports = proxy
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    page = context.new_page()
    page.goto(f"{url}/masks?text=the+cat+sits+on+a+red+ball&layer=1")
    page.wait_for_selector(".st-key-page-masks", timeout=90_000)
    settle(page)
    server = next(c["value"] for c in context.cookies() if c["name"] == COOKIE)
    watch_connection(page)
    os.kill(_app_pid(ports[0] if server == "app1" else ports[1]), signal.SIGKILL)
    reconnected(page)                      # the page reconnects by itself, through the proxy, to a live process
    # the run its reconnection starts is over first: a choice made during it was once drawn over, under load
    settle(page)
    choose(page, "layer", "0")             # its next action runs there, in a new session rebuilt from the link
    assert page.get_by_label("Sentence to translate", exact=False).input_value() == "the cat sits on a red ball"
    choose(page, "layer", "0")             # and the page answers from then on
    assert page.locator(".st-key-page-masks").count() == 1 and shown_value(page, "layer") == "0"
    assert page.locator("[data-testid='stException']").count() == 0
    assert "text=the+cat+sits" in page.url
    context.close()


def test_without_haproxy_one_process_serves_on_the_bind_address_and_stops_at_once(app_checkpoints):
    """An offline school machine may have no HAProxy: the class setup still serves (one process on
    --bind itself, said), and a SIGTERM that arrives while it starts stops it, not a 3-minute wait."""
    env = {**os.environ, "TRANSFORMER_CHECKPOINTS": str(app_checkpoints)}

    def launch(port: int) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "serving.launcher", "--bind", f"127.0.0.1:{port}",
                                 "--no-proxy", "--no-warmup", "--quiet"], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    port = free_port()
    launcher = launch(port)
    assert select.select([launcher.stderr], [], [], 120)[0], "the launcher said nothing in 120 s"
    said = launcher.stderr.readline()                           # printed once the app answers
    assert said.startswith(f"serving on http://127.0.0.1:{port} with one app process (--no-proxy")
    assert urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=5).read() == b"ok"
    launcher.send_signal(signal.SIGTERM)
    assert launcher.wait(timeout=20) == 0

    port = free_port()
    launcher = launch(port)
    deadline = time.time() + 60
    while not any("streamlit" in " ".join(c.cmdline()) for c in psutil.Process(launcher.pid).children()):
        assert launcher.poll() is None and time.time() < deadline, launcher.stderr.read() if launcher.poll() else ""
        time.sleep(0.05)                                        # the app started, not answering yet
    launcher.send_signal(signal.SIGTERM)
    assert launcher.wait(timeout=20) == 0
    # no app process of that port is left (its port an argument of its own: a substring of a browser's long
    # command line, as the test once read it, matched a number by chance)
    assert not [p.info["cmdline"] for p in psutil.process_iter(["cmdline"]) if str(port) in (p.info["cmdline"] or [])]


def test_an_app_machine_needs_a_shared_redis_and_a_front_needs_backends(capsys):
    from serving import launcher
    for argv, said in ((["--apps-only", "--bind", "127.0.0.1:8901"], "--redis URL"),
                       (["--processes", "0"], "0 only with --backend"),
                       (["--apps-only", "--redis", "redis://x:1/0", "--backend", "10.0.0.1:8501"], "no --backend")):
        with pytest.raises(SystemExit):
            launcher.main(argv)
        assert said in capsys.readouterr().err, argv


def test_a_port_already_answering_stops_the_launcher_with_one_line(app_checkpoints):
    """An app process left from an earlier run still answers its port: a new launcher would pass its health check
    and serve the old code (seen in session 31: a benchmark measured a stale build). It stops at once instead."""
    import socket
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "serving.launcher", "--bind", f"127.0.0.1:{free_port()}",
                               "--processes", "1", "--first-port", str(taken), "--no-warmup"], cwd=ROOT,
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, "TRANSFORMER_CHECKPOINTS": str(app_checkpoints)})
    assert done.returncode == 2, done.stderr
    said = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(said) == 1 and f"port {taken} already in use" in said[0], done.stderr


def test_a_sigterm_between_an_app_process_s_start_and_its_record_still_stops_it(monkeypatch):
    """CI (stop 60) once found an app process left after a SIGTERM that came while it started: the signal's stop()
    ran after the process was exec'd but before the launcher held it, so it stopped nothing. The signal is
    delivered at exactly that moment here (a stand-in app process, no HAProxy, no Redis of our own)."""
    from serving import launcher
    monkeypatch.setenv("TRANSFORMER_LAB_OWNED", "0")
    monkeypatch.setattr(launcher, "app_command", lambda port, address="127.0.0.1": [sys.executable, "-c",
                                                                                     "import time; time.sleep(120)"])
    args = launcher.parse(["--bind", f"127.0.0.1:{free_port()}", "--no-proxy", "--no-warmup", "--quiet",
                           "--redis", "redis://127.0.0.1:1/0"])
    server = launcher.Launcher(args)
    started: list[subprocess.Popen] = []
    real_popen = subprocess.Popen

    def popen_then_signalled(*a, **kw) -> subprocess.Popen:
        started.append(real_popen(*a, **kw))
        server.stop()                                   # what the SIGTERM handler runs, at this very moment
        return started[-1]
    monkeypatch.setattr(launcher.subprocess, "Popen", popen_then_signalled)
    try:
        with pytest.raises(SystemExit) as ended:
            launcher.serve(server)
        assert ended.value.code in (0, None)
        assert len(started) == 1 and started[0].poll() is not None, "the app process outlived its launcher"
    finally:
        for proc in started:
            proc.kill()
