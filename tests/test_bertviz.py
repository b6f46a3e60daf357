"""bertviz draws the shipped models (issue 56): the snippet of docs/trace-format.md, for both shipped
checkpoints, with bertviz's own head_view and model_view (the `dev` extra; skipped where it is not
installed). What bertviz renders is read back from the page it returns: every layer of every part."""
from __future__ import annotations

import json

import pytest

from model.inference.pipeline import explain
from model.network.trace import Recording
from model.storage.checkpoint import load_checkpoint
from tests.support import ROOT

bertviz = pytest.importorskip("bertviz", reason="bertviz is in the dev extra: pip install -e '.[dev]'")
SHIPPED = ("multi30k-en-de", "multi30k-de-en")
SENTENCE = {"multi30k-en-de": "A dog runs through the snow.", "multi30k-de-en": "Ein Hund läuft durch den Schnee."}


def drawn(html: str) -> dict[str, dict]:
    """The attention bertviz put into its page: name -> {"layers": n, "heads": h, "rows": q, "cols": k}."""
    start = html.index("const params = ") + len("const params = ")
    params, _ = json.JSONDecoder().raw_decode(html, start)
    return {a["name"]: {"layers": len(a["attn"]), "heads": len(a["attn"][0]), "rows": len(a["attn"][0][0]),
                        "cols": len(a["attn"][0][0][0])} for a in params["attention"]}


@pytest.fixture(scope="module", params=SHIPPED)
def shipped(request):
    ckpt = load_checkpoint(ROOT / "checkpoints" / request.param)
    return ckpt, explain(ckpt, SENTENCE[request.param], recording=Recording())


@pytest.mark.parametrize("view", ["head_view", "model_view"])
def test_the_documented_snippet_draws_every_layer_of_each_part(shipped, view):
    ckpt, ex = shipped
    cfg, draw = ckpt.config, getattr(bertviz, view)
    s, t = len(ex.trace.source_tokens[0]), len(ex.trace.target_tokens[0])
    encoder = drawn(draw(**ex.trace.to_bertviz(0, part="encoder"), html_action="return").data)
    decoder = drawn(draw(**ex.trace.to_bertviz(0, part="decoder"), html_action="return").data)
    assert encoder == {"Encoder": {"layers": cfg.n_encoder_layers, "heads": cfg.n_heads, "rows": s, "cols": s}}
    assert decoder == {"Decoder": {"layers": cfg.n_decoder_layers, "heads": cfg.n_heads, "rows": t, "cols": t},
                       "Cross": {"layers": cfg.n_decoder_layers, "heads": cfg.n_heads, "rows": t, "cols": s}}


def test_all_parts_at_once_say_what_to_do_where_the_depths_differ(shipped):
    ckpt, ex = shipped
    assert ckpt.config.n_encoder_layers != ckpt.config.n_decoder_layers
    with pytest.raises(ValueError, match="part='encoder'"):
        ex.trace.to_bertviz(0)
    with pytest.raises(ValueError, match="part must be one of"):
        ex.trace.to_bertviz(0, part="cross")
