"""One self-contained HTML file for a sentence or a lesson of several: the page's words (in the chosen
language), its style and script, plotly.js and the lesson's data, each compressed once and inlined.

Nothing is fetched when the file is opened: plotly.js (4.8 MB as shipped with plotly) and the data travel
gzipped and base64-encoded inside the file, and the browser unpacks them with its own DecompressionStream
(Chrome 80, Firefox 113, Safari 16.4 and later). Repeated parts of the data (the same hover labels, colour
scale or axis in many figures) are stored once (`pack`). The same inputs give the same bytes: no date, no
random names, gzip without a timestamp (the app's button and the command give the same file).
"""
from __future__ import annotations

import base64
import functools
import gzip
import html
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from plotly.offline import get_plotlyjs

import webpage.content as content
from i18n import _, using
from model.storage.checkpoint import Checkpoint
from webpage.content import Request

HERE = Path(__file__).resolve().parent
MIN_SHARED = 120          # a part of the data this long (as JSON) or longer is stored once when it repeats
ON_PROGRESS = Callable[[int, int, str], None]


@functools.cache
def packed_plotly() -> str:
    """plotly.js, gzipped (no timestamp) and base64-encoded: ~2 MB of the file, made once per process."""
    return base64.b64encode(gzip.compress(get_plotlyjs().encode(), 9, mtime=0)).decode()


def single_precision(value: Any) -> Any:
    """Plotly's typed arrays of float64 as float32 (attention weights and probabilities need no more)."""
    if isinstance(value, dict):
        if value.get("dtype") == "f8" and isinstance(value.get("bdata"), str):
            arr = np.frombuffer(base64.b64decode(value["bdata"]), dtype="<f8").astype("<f4")
            return {**value, "dtype": "f4", "bdata": base64.b64encode(arr.tobytes()).decode()}
        return {k: single_precision(v) for k, v in value.items()}
    if isinstance(value, list):
        return [single_precision(v) for v in value]
    return value


def pack(root: Any, min_len: int = MIN_SHARED) -> dict[str, Any]:
    """{"root", "table"}: every list or object of at least `min_len` characters (as JSON, about) that occurs
    more than once is stored once in `table` and replaced by {"$r": its index} (webpage/page.js puts them back).

    One pass names every distinct subtree (its kind and its children's names: equal subtrees get the same
    name, found by a dict, not by comparing text), with its size; a second writes each repeated one once."""
    names: dict[tuple, int] = {}
    sizes: list[int] = []
    counts: list[int] = []
    of: dict[int, int] = {}                           # id() of each list and object -> its subtree's name

    def name(v: Any) -> int:
        if isinstance(v, dict):
            children = tuple((k, name(x)) for k, x in v.items())
            key: tuple = ("d", children)
            size = 2 + sum(len(k) + 4 + sizes[c] for k, c in children)
        elif isinstance(v, list):
            children = tuple(name(x) for x in v)
            key = ("l", children)
            size = 2 + sum(sizes[c] + 1 for c in children)
        else:
            text = json.dumps(v, ensure_ascii=False)
            key, size = ("v", text), len(text)
        n = names.get(key)
        if n is None:
            n = names[key] = len(sizes)
            sizes.append(size)
            counts.append(0)
        counts[n] += 1
        if isinstance(v, dict | list):
            of[id(v)] = n
        return n

    table: list[Any] = []
    index: dict[int, int] = {}

    def walk(v: Any) -> Any:
        if not isinstance(v, dict | list):
            return v
        n = of[id(v)]
        if sizes[n] >= min_len and counts[n] > 1:
            if n not in index:
                inner = {a: walk(b) for a, b in v.items()} if isinstance(v, dict) else [walk(b) for b in v]
                index[n] = len(table)
                table.append(inner)
            return {"$r": index[n]}
        return {a: walk(b) for a, b in v.items()} if isinstance(v, dict) else [walk(b) for b in v]

    name(root)
    return {"root": walk(root), "table": table}


def unpack(packed: dict[str, Any]) -> Any:
    """`pack`'s inverse (what page.js does; the tests check the round trip)."""
    table = packed["table"]

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            if set(v) == {"$r"}:
                return walk(table[v["$r"]])
            return {a: walk(b) for a, b in v.items()}
        if isinstance(v, list):
            return [walk(b) for b in v]
        return v

    return walk(packed["root"])


def packed_data(data: Any) -> str:
    text = json.dumps(pack(single_precision(data)), separators=(",", ":"), ensure_ascii=False)
    return base64.b64encode(gzip.compress(text.encode(), 9, mtime=0)).decode()


def lesson(requests: Sequence[Request], load: Callable[[str], Checkpoint], app_url: str = content.APP_URL,
           on_progress: ON_PROGRESS | None = None) -> dict[str, Any]:
    """The data of every sentence, in the current language (raises pipeline.InputError, CheckpointError)."""
    sentences = []
    for i, request in enumerate(requests):
        if on_progress is not None:
            on_progress(i, len(requests), request.text)
        sentences.append(content.sentence(load(request.checkpoint), request, app_url))
    return {"sentences": sentences, "display": content.display_scales()}


def build(requests: Sequence[Request], load: Callable[[str], Checkpoint], lang: str = "en",
          app_url: str = content.APP_URL, title: str | None = None, large: bool = False,
          on_progress: ON_PROGRESS | None = None) -> str:
    """The whole file, as text."""
    with using(lang):
        data = lesson(requests, load, app_url, on_progress)
        return render(data, lang, title, large)


def render(data: dict[str, Any], lang: str, title: str | None = None, large: bool = False) -> str:
    """The page around the data (in the current language)."""
    sentences = data["sentences"]
    title = title or (_("A Transformer translates: {sentence}").format(sentence=sentences[0]["text"])
                      if len(sentences) == 1 else _("A Transformer translates: a lesson of {n} sentences").format(
                          n=len(sentences)))
    words = {k: html.escape(v) for k, v in texts().items()}
    body = (HERE / "page.html").read_text().format(
        lang=html.escape(lang), title=html.escape(title), large=" large" if large else "",
        picker_hidden=" hidden" if len(sentences) == 1 else "",
        options="".join(f'<option value="{i}">{i + 1}. {html.escape(s["text"])}</option>'
                        for i, s in enumerate(sentences)),
        style=(HERE / "page.css").read_text(), script=(HERE / "page.js").read_text(),
        plotly=packed_plotly(), data=packed_data(data), **words)
    return body


def texts() -> dict[str, str]:
    """Every word the page's frame says, in the current language."""
    return {
        "skip": _("Skip to the lesson"), "sentence_label": _("Sentence"), "large_label": _("Large letters"),
        "loading": _("Unpacking the charts…"),
        "old_browser": _("This browser cannot unpack the page's charts (it needs Chrome or Edge 80, Firefox 113, "
                         "Safari 16.4 or newer)."),
        "no_script": _("This page draws its charts with JavaScript: please allow it for this file."),
        "translation": _("Translation"), "source_label": _("Source"), "output_label": _("Translation"),
        "attention": _("Attention: every layer and head"), "kind_label": _("Attention kind"), "layer": _("Layer"),
        "head": _("Head"), "decoding": _("Decoding, step by step"), "method_label": _("Search method"),
        "beam": _("Beam search"), "greedy": _("Greedy"), "reset": _("Reset"), "prev": _("Prev"), "next": _("Next"),
        "step": _("Step"), "keys": _("Keyboard: ← and → step."), "attribution": _("What the model used"),
        "positional": _("Positional encoding"), "masks": _("Masks"), "model": _("The model"),
        "in_app": _("Open this in the app"), "step_in_app": _("Open this step in the app"),
        "padding": _("Padding mask: a batch of two sentences"),
        "causal": _("Causal and cross-attention masks of this translation"),
        "softmax": _("Before and after the softmax (decoder self-attention, layer 0, head 0)"),
        "scores_heading": _("Test scores (BLEU, chrF)"), "trained_on": _("Trained on"),
        "offline": _("This file works offline: nothing is fetched, everything it shows is inside it."),
    }
