"""The explorer's charts drawn in the browser (figures/attention_charts.mjs) are the figures the Python builders
make (figures.attention_grid, figures.attention_heads, with Display.apply): the script runs in node on the
numbers figures/browser.py packs, and every trace and layout property is compared."""
from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import figures
from figures import describe
from figures.browser import STEPS, attention_charts, packed, unpacked
from figures.common import Display

SCRIPT = Path(__file__).resolve().parent.parent / "figures" / "attention_charts.mjs"
NODE = shutil.which("node")

BUILD = """
import { readFileSync } from "node:fs";
import { gridFigure, headsFigure, unpack } from "%s";
const d = JSON.parse(readFileSync(0, "utf8"));
const values = unpack(d.numbers);
process.stdout.write(JSON.stringify({ grid: gridFigure(d, values), single: headsFigure(d, values) }));
"""


def attention(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Random rows that sum to 1 (L, H, Tq, Tk)."""
    x = np.random.default_rng(seed).normal(size=shape) * 3
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def in_node(data: dict) -> dict:
    done = subprocess.run([NODE, "--input-type=module", "-e", BUILD % SCRIPT.as_uri()], input=json.dumps(data),
                          capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


def plain(value):
    """A figure's JSON as plain Python (arrays, and plotly's base64 typed arrays, as lists), for comparing."""
    def typed(d: dict):
        if isinstance(d.get("bdata"), str) and "dtype" in d:
            shape = [int(n) for n in str(d.get("shape", "-1")).split(",")]
            return np.frombuffer(base64.b64decode(d["bdata"]), dtype=d["dtype"]).reshape(shape).tolist()
        return d
    return json.loads(json.dumps(value, default=lambda a: np.asarray(a).tolist()), object_hook=typed)


def same(js, py, path="") -> None:
    """Equal, numbers within the fixed point's rounding (and float32's)."""
    if isinstance(py, dict):
        assert isinstance(js, dict) and set(js) == set(py), (path, sorted(set(js) ^ set(py)))
        for k in py:
            same(js[k], py[k], f"{path}.{k}")
    elif isinstance(py, list):
        assert isinstance(js, list) and len(js) == len(py), path
        for i, (a, b) in enumerate(zip(js, py)):
            same(a, b, f"{path}[{i}]")
    elif isinstance(py, float) and not isinstance(py, bool):
        assert js == pytest.approx(py, abs=1e-4), path
    else:
        assert js == py, path


def python_figures(attn, rows, cols, layer, head, display, highlight):
    grid = figures.attention_grid(attn, rows, cols, title="Cross: every layer × head", highlight_row=highlight)
    single = figures.attention_heads(attn, rows, cols, layer, head, row_title="target (query)",
                                     col_title="source (key)", highlight_row=highlight)
    out = {}
    for name, fig in (("grid", grid), ("single", single)):
        made = plain(display.apply(fig).to_plotly_json())
        made["layout"].pop("template", None)             # Streamlit's theme replaces it (the script applies it)
        out[name] = made
    return out


@pytest.mark.skipif(NODE is None, reason="node is not installed (the Makefile's axe-core needs it too)")
@pytest.mark.parametrize("projector, highlight, shape", [(False, None, (2, 4, 5, 7)), (True, 3, (3, 8, 6, 4))])
def test_the_browsers_figures_are_the_python_builders(projector, highlight, shape):
    attn = attention(shape)
    rows = ["<s>", "▁Die", "▁K&atze", "▁s", "aß", "▁."][:shape[2]]
    cols = ["▁The", "▁cat", "▁s", "at", "</s>", "x", "y"][:shape[3]]
    display, layer, head = Display.for_projector(projector), shape[0] - 1, 2
    data = attention_charts(attn, rows, cols, layer, head, "Cross: every layer × head", "target (query)",
                            "source (key)", display, highlight)
    js, py = in_node(data), python_figures(attn, rows, cols, layer, head, display, highlight)
    for name in ("grid", "single"):
        same(js[name], py[name], name)
    visible = [t["visible"] for t in js["single"]["data"]]
    assert visible.index(True) == layer * shape[1] + head and visible.count(True) == 1


def test_the_numbers_keep_four_decimals_and_the_shape():
    attn = attention((2, 3, 4, 5), seed=1)
    back = unpacked(packed(attn))
    assert back.shape == attn.shape and np.abs(back - attn).max() <= 0.5 / STEPS + 1e-7
    assert np.allclose(back.sum(axis=-1), 1, atol=5 * 5 / STEPS)
    assert unpacked(packed(np.array([0.0, 1.0, 1.5, -0.2]))).tolist() == [0.0, 1.0, 1.0, 0.0]    # clipped to [0, 1]


def test_mismatched_tokens_or_head_are_refused():
    attn = attention((1, 2, 3, 3))
    with pytest.raises(ValueError, match="do not match"):
        attention_charts(attn, ["a", "b"], ["a", "b", "c"], 0, 0, "t", "r", "c", Display())
    with pytest.raises(ValueError, match="no head"):
        attention_charts(attn, ["a", "b", "c"], ["a", "b", "c"], 0, 2, "t", "r", "c", Display())


def test_the_sentence_for_screen_readers_is_the_one_the_figure_gets():
    """app/attention_charts.py says each chart in words from its numbers: the same sentence (and table)
    figures.describe makes of the Python builder's figure."""
    attn = attention((2, 4, 5, 6), seed=2)
    rows, cols = ["<s>", "a", "b&c", "d", "e"], ["x", "y", "z", "w", "v", "</s>"]
    data = attention_charts(attn, rows, cols, 1, 3, "every head", "q", "k", Display())
    grid = figures.attention_grid(attn, rows, cols, title="every head")
    single = figures.attention_heads(attn, rows, cols, 1, 3, row_title="q", col_title="k")
    assert describe.heatmaps_sentence("every head", attn[0, 0], 8) == describe.summary(grid)
    assert describe.matrix_table(attn[0, 0]) == describe.table(grid)
    shown = data["names"][7]
    assert describe.heatmaps_sentence(shown, attn[1, 3], 1, data["rows"], data["cols"]) == describe.summary(single)
    assert describe.matrix_table(attn[1, 3], data["rows"], data["cols"]) == describe.table(single)
    assert "b&c" in describe.summary(single) or "b&c" in str(describe.table(single))


def test_streamlits_own_plotly_module_is_found():
    """The charts load the plotly.js that Streamlit ships (its PlotlyChart module sets window.Plotly): a Streamlit
    that renamed it would leave the explorer waiting for a chart elsewhere on the page, so say so here."""
    from app.attention_charts import plotly_module
    name = plotly_module()
    assert name is not None and name.startswith("PlotlyChart.") and name.endswith(".js")
    import streamlit
    chunk = Path(streamlit.__file__).parent / "static" / "static" / "js" / name
    assert "window.Plotly=" in chunk.read_text(errors="replace")


NAMED = """
import { numbersFor, KEPT } from "%s";
const d = JSON.parse(process.argv[1]);
const store = {};
const full = (i) => ({ ...d.numbers[i], ref: `n${i}` });
const named = (i) => ({ ref: `n${i}`, shape: d.numbers[i].shape });
const sum = (v) => (v === null ? null : Math.round(Array.from(v).reduce((a, b) => a + b, 0) * 1000) / 1000);
const out = {};
out.kept = sum(await numbersFor(full(0), store, 50));
out.byName = sum(await numbersFor(named(0), store, 50));
const early = numbersFor(named(1), store, 2000);          // drawn before the chart that carries them
await numbersFor(full(1), store, 50);
out.early = sum(await early);
out.unknown = sum(await numbersFor(named(2), store, 50));
for (let i = 3; i < 3 + KEPT; i++) await numbersFor(full(i), store, 50);
out.evicted = [sum(await numbersFor(named(0), store, 50)), sum(await numbersFor(named(1), store, 50))];
out.kept_count = store.__attentionNumbers.size;
out.waiting_left = store.__attentionWaiting.size;
process.stdout.write(JSON.stringify(out));
"""


@pytest.mark.skipif(NODE is None, reason="node is not installed (the Makefile's axe-core needs it too)")
def test_numbers_sent_once_are_found_by_name_and_a_missing_name_says_so():
    """The explorer sends a sentence's numbers to the browser once and then only their name
    (app/attention_charts.py): the browser finds them by name, also when the chart that carries them is drawn
    after the one that names them; a name it does not hold (never sent, or pushed out by KEPT newer ones)
    gives null, which makes the chart ask the server for them again."""
    sets = [attention((1, 2, 3, 3), seed=i) for i in range(12)]
    numbers = [packed(a) for a in sets]
    script = NAMED % SCRIPT.as_uri()
    done = subprocess.run([NODE, "--input-type=module", "-e", script, json.dumps({"numbers": numbers})],
                          capture_output=True, text=True, timeout=60, check=True)
    out = json.loads(done.stdout)
    total = [round(float(unpacked(n).sum()), 3) for n in numbers]
    assert out["kept"] == out["byName"] == total[0] and out["early"] == total[1]
    assert out["unknown"] is None and out["waiting_left"] == 0
    assert out["evicted"] == [None, None] and out["kept_count"] == 8


def test_the_numbers_name_follows_their_content_and_shape():
    from figures.browser import numbers_ref
    a = attention((1, 2, 3, 4))
    assert numbers_ref(packed(a)) == numbers_ref(packed(a.copy()))
    assert numbers_ref(packed(a)) != numbers_ref(packed(attention((1, 2, 3, 4), seed=5)))
    assert numbers_ref(packed(a)) != numbers_ref(packed(a.reshape(1, 2, 4, 3)))


CSV = """
import { readFileSync } from "node:fs";
import { matrixCsv, unpack, g6, linkWith } from "%s";
const d = JSON.parse(readFileSync(0, "utf8"));
const values = unpack(d.numbers);
const [, nH, tq, tk] = d.numbers.shape;
process.stdout.write(JSON.stringify({
  csv: matrixCsv(values, d.k, tq, tk, d.rows, d.cols),
  g6: d.plain.map(g6),
  links: d.links.map(([search, layer, head]) => linkWith(search, { layer: "layer", head: "head" },
                                                          { layer: 0, head: 0 }, layer, head)),
}));
"""


@pytest.mark.skipif(NODE is None, reason="node is not installed (the Makefile's axe-core needs it too)")
def test_the_browsers_csv_and_link_are_the_servers():
    """Where the browser chooses the head (app/attention_charts.py): its CSV of the chosen head is the server's
    (model.analysis.readings.matrix_csv, tokens quoted as csv does) of the numbers it holds, and the address bar
    it writes names layer and head as the server's links do (left out at their defaults)."""
    from model.analysis.readings import matrix_csv
    attn = attention((2, 3, 4, 5), seed=3)
    rows, cols = ["<s>", "▁a,b", 'say "hi"', "."], ["▁x", "y", "▁z", ",", "</s>"]
    numbers = packed(attn)
    plain = [0.0, 1.0, 0.5, 1 / STEPS, 0.123456789, 3e-5, 0.000123456, 0.999999, 1e-4]
    links = [("?text=a+b", 1, 2), ("?text=a&layer=1&head=2", 0, 0), ("", 0, 3), ("?head=4&x=1", 1, 0)]
    done = subprocess.run([NODE, "--input-type=module", "-e", CSV % SCRIPT.as_uri()],
                          input=json.dumps({"numbers": numbers, "k": 4, "rows": rows, "cols": cols, "plain": plain,
                                            "links": links}),
                          capture_output=True, text=True, timeout=60, check=True)
    out = json.loads(done.stdout)
    held = unpacked(numbers)                                              # what the browser holds: 16-bit
    assert out["csv"] == matrix_csv(held.reshape(6, 4, 5)[4].astype(np.float64), rows, cols)
    assert out["g6"] == [format(v, ".6g") for v in plain]
    assert out["links"] == ["?text=a+b&layer=1&head=2", "?text=a", "?head=3", "?x=1&layer=1"]
