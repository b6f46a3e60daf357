"""The lesson file (issue 55, webpage/): one self-contained HTML file that opens from disk with no network.

Unit: the packing of repeated data and its inverse, lesson lists and app links, the app's link parameters.
The command: every kind of unusable input gets one line and exit code 2, and leaves no file. With the shipped
models: one sentence <= 3 MB, a lesson of 10 <= 8 MB, the same inputs give the same bytes, the sidebar's
button gives the command's file (its numbers to float32 rounding), a German file speaks German. In Chromium from
file:// with every request outside the file refused: the charts are drawn, a head switch, three decoding steps,
another sentence, large letters and one column on a phone work, no console error, nothing serious for axe-core.
"""
from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest

from i18n import using
from tests.support import ARTIFACTS, CHROMIUM, ROOT, axe, english_sentences, made_once, wait_in_page
from webpage import command, content, page
from webpage.content import Request

EN_DE = ROOT / "checkpoints" / "multi30k-en-de"
shipped = pytest.mark.skipif(not (EN_DE / "config.json").is_file(), reason="the shipped checkpoints are not here")
LESSON = [  # ten sentences a class might bring: captions, everyday ones, the famous demo sentences
    "The animal didn't cross the street because it was too tired.",
    "A man in an orange hat starring at something.",
    "Two dogs are playing in the snow.",
    "I would like to book a table for two at seven.",
    "The woman is holding her baby because she is tired.",
    "Machines can translate sentences from one language into another.",
    "Where is the train station?",
    "A little girl climbs into a wooden playhouse.",
    "We are going to the museum tomorrow morning.",
    "Attention is all you need.",
]
MB = 1_000_000


# ---- packing ------------------------------------------------------------------------------------------------

def test_pack_stores_a_repeated_part_once_and_unpack_restores_it():
    shared = {"colorscale": [[0.0, "#fff"], [1.0, "#000"]] * 20}
    data = {"a": [shared, {"x": shared}], "b": shared, "small": [1, 2], "again": [1, 2], "text": "é"}
    packed = page.pack(data)
    assert json.dumps(packed).count("#fff") == 20                               # its colours once, not 3 times
    assert packed["root"]["b"] == packed["root"]["a"][0] == packed["root"]["a"][1]["x"] == {"$r": 1}
    assert page.unpack(packed) == data
    assert page.pack({"one": shared})["table"] == []            # once only: not moved


def test_float64_arrays_travel_as_float32():
    arr = np.array([0.1, 0.25, 1 / 3])
    typed = {"dtype": "f8", "bdata": base64.b64encode(arr.tobytes()).decode()}
    out = page.single_precision({"z": typed, "keep": {"dtype": "i1", "bdata": "AQ=="}})
    back = np.frombuffer(base64.b64decode(out["z"]["bdata"]), dtype="<f4")
    assert out["z"]["dtype"] == "f4" and np.allclose(back, arr, atol=1e-7) and out["keep"]["dtype"] == "i1"


# ---- lessons and links --------------------------------------------------------------------------------------

def test_the_link_parameters_are_the_app_s():
    from app.links import STEP
    from app.settings import CHECKPOINT, FP32, LANGUAGE, METHOD, TEXT
    assert content.LINK == {"text": TEXT.param, "checkpoint": CHECKPOINT.param, "method": METHOD.param,
                            "step": STEP, "fp32": FP32.param, "language": LANGUAGE.param}
    from app.pages import BY_SLUG
    assert set(content.PAGES.values()) <= set(BY_SLUG)


def test_a_lesson_file_takes_sentences_and_app_links(tmp_path):
    f = tmp_path / "lesson.txt"
    f.write_text("# a lesson\n\nA dog runs.\nhttp://school:8501/step?text=Ein+Hund.&checkpoint=multi30k-de-en&step=2\n"
                 "/explore?text=The+cat.\n")
    assert command.read_lesson(str(f), "multi30k-en-de") == [
        Request("A dog runs.", "multi30k-en-de"), Request("Ein Hund.", "multi30k-de-en"),
        Request("The cat.", "multi30k-en-de")]
    f.write_text("A dog.\nhttp://school:8501/step?checkpoint=multi30k-de-en\n")
    with pytest.raises(ValueError, match=r"line 2: the link has no sentence"):
        command.read_lesson(str(f), "multi30k-en-de")


def test_the_app_link_names_the_state_and_asks_for_fp32():
    with using("de"):
        link = content.app_link("http://school:8501/", "step", Request("A dog.", "multi30k-en-de"), {"step": "3"})
    assert link == "http://school:8501/step?text=A+dog.&checkpoint=multi30k-en-de&fp32=1&lang=de&step=3"


# ---- the command's refusals ---------------------------------------------------------------------------------

def _refused(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as done:
        command.main(argv)
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@shipped
def test_unusable_input_gets_one_line_exit_2_and_no_file(tmp_path, capsys):
    out = tmp_path / "out.html"
    assert _refused(capsys, ["A dog. " * 200, "-o", str(out)]).startswith("error: sentence 1:")
    assert "no-such-model" in _refused(capsys, ["A dog.", "--checkpoint", "no-such-model", "-o", str(out)])
    assert "does not exist" in _refused(capsys, ["A dog.", "-o", str(tmp_path / "missing" / "out.html")])
    assert "is a directory" in _refused(capsys, ["A dog.", "-o", str(tmp_path)])
    broken = tmp_path / "lesson.txt"
    broken.write_text("A dog.\nhttp://localhost:8501/explore?checkpoint=multi30k-en-de\n")
    assert "line 2" in _refused(capsys, ["--lesson", str(broken), "-o", str(out)])
    assert "no sentence" in _refused(capsys, ["-o", str(out)])
    assert "empty sentence" in _refused(capsys, ["  ", "-o", str(out)])
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["lesson.txt"]   # nothing half-written


@shipped
def test_an_over_long_sentence_is_named_by_its_number(tmp_path, capsys):
    err = _refused(capsys, ["A dog.", "A dog runs. " * 150, "-o", str(tmp_path / "x.html")])
    assert err.startswith("error: sentence 2:") and not (tmp_path / "x.html").exists()


# ---- files made with the shipped models ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def lesson_html(tmp_path_factory) -> Path:
    if not (EN_DE / "config.json").is_file():
        pytest.skip("the shipped checkpoints are not here")
    def make(folder: Path) -> None:
        listed = folder / "lesson.txt"
        link = f"http://localhost:8501/explore?text={LESSON[-1].replace(' ', '+')}"
        listed.write_text("\n".join(LESSON[:-1]) + f"\n{link}\n")
        assert command.main(["--lesson", str(listed), "-o", str(folder / "lesson.html")]) == 0
    return made_once(tmp_path_factory, "lesson-html", make) / "lesson.html"


def _packed(html: str) -> bytes:
    found = re.search(r'<script type="application/octet-stream" id="lesson-gz">([^<]+)</script>', html)
    return base64.b64decode(found.group(1))


def _data(html: str) -> dict:
    return page.unpack(json.loads(gzip.decompress(_packed(html))))


def gzip_header(html: str) -> bytes:
    """The lesson data's gzip header: its modification time among its ten bytes."""
    return _packed(html)[:10]


@shipped
def test_a_lesson_of_ten_fits_8_mb_and_holds_every_part(lesson_html):
    html = lesson_html.read_text()
    assert lesson_html.stat().st_size <= 8 * MB
    assert "plotly.js v" not in html and html.count('id="plotly-gz"') == 1         # plotly inlined once, packed
    assert not re.search(r'(src|href)="(https?:)?//', html)                         # nothing to fetch
    data = _data(html)
    assert [s["text"] for s in data["sentences"]] == LESSON
    first = data["sentences"][0]
    assert {a["kind"] for a in first["attention"]} == {"encoder_self", "decoder_self", "cross"}
    for kind in first["attention"]:
        assert len(kind["figure"]["data"]) == kind["layers"] * kind["heads"]          # every layer and head
    for method in ("greedy", "beam"):
        run = first["decoding"][method]
        assert len(run["steps"]) >= 3 and all("topk" in s and "cross" in s for s in run["steps"])
    assert all("tree" in s for s in first["decoding"]["beam"]["steps"])
    assert first["model"]["name"] == "multi30k-en-de" and first["model"]["scores"]
    assert first["links"]["attention"].startswith("http://localhost:8501/explore?text=The+animal")


@shipped
def test_one_sentence_fits_3_mb_and_the_same_sentence_gives_the_same_bytes(tmp_path):
    out, again = tmp_path / "one.html", tmp_path / "again.html"
    for path in (out, again):
        assert command.main(["A little girl climbs into a wooden playhouse.", "-o", str(path)]) == 0
    assert out.stat().st_size <= 3 * MB
    assert out.read_bytes() == again.read_bytes()           # no date, no random names, gzip without a time stamp


@shipped
def test_a_german_file_speaks_german(tmp_path):
    out = tmp_path / "de.html"
    assert command.main(["A dog runs.", "--lang", "de", "-o", str(out)]) == 0
    html = out.read_text()
    assert '<html lang="de">' in html and "Dekodieren, Schritt für Schritt" in html
    with using("de"):
        frame = page.texts()
    assert not english_sentences(list(frame.values())), english_sentences(list(frame.values()))
    step = _data(html)["sentences"][0]["decoding"]["beam"]
    assert "Schritt 0" in step["steps"][0]["heading"] and not english_sentences([step["caption"]])


def test_the_app_s_address_without_its_page():
    from app.sentence import app_url
    assert app_url("http://school:8501/step?text=x") == "http://school:8501"
    assert app_url("https://host/class/explore") == "https://host/class"
    assert app_url("http://localhost:8501/") == "http://localhost:8501"
    assert app_url(None) == content.APP_URL


# ---- in the browser, from disk, offline ---------------------------------------------------------------------

SHOWN = """() => {
  const div = document.querySelector('[data-chart="attention"]');
  const k = div.data.findIndex((t) => t.visible === true);
  return {visible: k, title: div.layout.title.text, heads: div.data.length};
}"""


@pytest.mark.e2e
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not installed (apt-get install -y chromium)")
def test_the_file_works_from_disk_with_the_network_refused(browser, lesson_html):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    refused, errors = [], []
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file://")
                  else (refused.append(route.request.url), route.abort()))
    pg = context.new_page()
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(lesson_html.as_uri())
    pg.wait_for_selector("body[data-ready='1']", timeout=60_000)
    assert pg.locator(".js-plotly-plot").count() >= 14 and pg.locator(".main-svg").count() > 20

    # a head switch: the page's pickers choose the visible head of the figure that holds them all
    assert pg.evaluate(SHOWN)["visible"] == 0
    pg.select_option("#layer", "1")
    pg.select_option("#head", "2")
    shown = pg.evaluate(SHOWN)
    assert shown["visible"] == 1 * 8 + 2 and "1" in shown["title"] and "2" in shown["title"]
    pg.locator("#kinds input").nth(1).check()                               # another kind keeps the head
    assert pg.evaluate(SHOWN)["visible"] == 1 * 8 + 2

    # three decoding steps by the keyboard, the top-k and the tree following
    pg.locator("h1").click()
    for t in (1, 2, 3):
        pg.keyboard.press("ArrowRight")
        wait_in_page(pg, f"document.querySelector('#step-heading').innerText.includes('Step {t} ')")
    assert pg.locator("#step").input_value() == "3" and "step=3" in pg.locator("#step-link").get_attribute("href")
    tree = pg.evaluate("document.querySelector('[data-chart=\"tree\"]').data.length")
    pg.locator("#methods input[value='greedy']").check()
    wait_in_page(pg, "document.querySelector('#step-heading').innerText.includes('Step 0 ')")
    assert tree >= 2 and pg.locator('[data-chart="tree"]').is_hidden()

    # another sentence of the lesson, and large letters
    pg.select_option("#sentence", "6")
    wait_in_page(pg, "document.querySelector('#source-text').innerText === 'Where is the train station?'")
    assert pg.locator("#output-text").inner_text().strip()
    pg.locator("#large").check()
    wait_in_page(pg, "document.querySelector('[data-chart=\"attention\"]').layout.font.size === 18")
    pg.screenshot(path=str(ARTIFACTS / "webpage-large.png"), full_page=False)
    counts, violations = {}, {}
    axe(pg, "lesson file", counts, violations)
    assert not violations, violations

    # a phone: one column
    pg.set_viewport_size({"width": 390, "height": 800})
    columns = pg.evaluate("getComputedStyle(document.querySelector('.pair')).gridTemplateColumns.split(' ').length")
    assert columns == 1
    pg.screenshot(path=str(ARTIFACTS / "webpage-phone.png"), full_page=False)
    assert not errors and not refused, (errors, refused)


def same_numbers(a, b, where: str = "") -> list[str]:
    """Where two unpacked lesson data differ beyond float32 rounding (nothing: []): every text, key and integer
    equal, every number and float array (plotly's typed arrays, base64) within 1e-4 relative, 1e-5 absolute."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.get("dtype") in ("f4", "f8") and "bdata" in a and a.keys() == b.keys():
            if a["dtype"] != b["dtype"] or a.get("shape") != b.get("shape"):
                return [f"{where}: {a['dtype']} {a.get('shape')} vs {b['dtype']} {b.get('shape')}"]
            x, y = (np.frombuffer(base64.b64decode(v["bdata"]), dtype="<" + v["dtype"]) for v in (a, b))
            ok = x.shape == y.shape and np.allclose(x, y, rtol=1e-4, atol=1e-5, equal_nan=True)
            return [] if ok else [f"{where}: arrays differ"]
        if a.keys() != b.keys():
            return [f"{where}: keys {sorted(a)} vs {sorted(b)}"]
        return [d for k in a for d in same_numbers(a[k], b[k], f"{where}/{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} vs {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in same_numbers(x, y, f"{where}[{i}]")]
    if isinstance(a, float) and isinstance(b, float | int) and not isinstance(b, bool):
        return [] if bool(np.isclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True)) else [f"{where}: {a} vs {b}"]
    return [] if a == b and type(a) is type(b) else [f"{where}: {a!r} vs {b!r}"]


def test_numbers_equal_to_float32_rounding_and_nothing_else_passes():
    arr = {"dtype": "f4", "bdata": base64.b64encode(np.array([0.5, 0.25], "<f4").tobytes()).decode()}
    near = {"dtype": "f4", "bdata": base64.b64encode(np.array([0.5000001, 0.25], "<f4").tobytes()).decode()}
    far = {"dtype": "f4", "bdata": base64.b64encode(np.array([0.51, 0.25], "<f4").tobytes()).decode()}
    assert not same_numbers({"z": arr, "p": [0.1, "a", 3]}, {"z": near, "p": [0.1000000001, "a", 3]})
    assert same_numbers({"z": arr}, {"z": far}) == ["/z: arrays differ"]
    assert same_numbers([0.1, "a"], [0.1, "b"]) and same_numbers({"n": 3}, {"n": 4}) and same_numbers([1], [1, 2])


@pytest.mark.e2e
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not installed (apt-get install -y chromium)")
def test_the_sidebar_button_gives_the_command_s_file(browser, shipped_server, tmp_path):
    """The command's file: the page around the data the same bytes (no date, no random names), the data the same
    but for float32 rounding. The numbers' last bits follow the number of threads a computation ran on (the app
    process runs two, this test one: every attention weight then differs by up to ~1e-6), so they are compared
    as numbers; texts, tokens and choices are compared exactly, and the gzip header (no time stamp) byte for byte."""
    from tests.support import open_page
    text = "A little girl climbs into a wooden playhouse."
    pg = open_page(browser, f"{shipped_server}/explore?text={text.replace(' ', '+')}", ".js-plotly-plot")
    with pg.expect_download(timeout=120_000) as download:
        pg.get_by_role("button", name="Download as a web page").click()
    made = Path(download.value.path()).read_text()
    out = tmp_path / "one.html"
    assert command.main([text, "-o", str(out), "--app-url", shipped_server.rstrip("/")]) == 0
    ours = out.read_text()
    assert download.value.suggested_filename == "lesson.html"
    around = r'(<script type="application/octet-stream" id="lesson-gz">)[^<]+'
    assert re.sub(around, r"\1", made) == re.sub(around, r"\1", ours)
    assert gzip_header(made) == gzip_header(ours)
    assert not (differ := same_numbers(_data(made), _data(ours))), differ[:10]
