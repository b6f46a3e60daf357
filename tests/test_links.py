"""A link is text anyone can type: whatever string any parameter the app reads holds, of any length, in
any script, with any control character, the page opens with a message for what did not fit, never an
exception and never a silent fallback (issue 42). Property-based (Hypothesis) on the link reader itself,
and a handful of hostile links through the whole app."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from app.links import STEP, check
from app.pages import SITE
from app.settings import MAX_TEXT_CHARS
from tests.support import APP

CHECKPOINTS = ["multi30k-en-de", "multi30k-de-en"]
KEYS = sorted(SITE.linked) + [STEP]
ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=("Cs",)), max_size=300)   # control chars too


@settings(max_examples=400, deadline=None)
@given(key=st.sampled_from(KEYS), raw=ANY_TEXT)
def test_any_string_for_any_key_is_taken_or_said(key, raw):
    values, problems = check({key: raw}, CHECKPOINTS, SITE.linked)
    spec = SITE.linked.get(key)
    taken = spec is not None and spec.name in values
    if key == STEP:
        taken = raw.strip().lstrip("+-").isdigit() and not problems
    assert taken != bool(problems), (key, raw, values, problems)       # taken, or said: never both, never neither
    assert all(str(p) for p in problems)
    assert not any("(index)" in str(p) or "(flag)" in str(p) for p in problems)     # what it takes, for a reader


def test_a_flag_is_on_or_off_never_read_as_off():
    values, problems = check({"ig": "maybe", "projector": "TRUE", "used_chart": " 0 "}, CHECKPOINTS, SITE.linked)
    assert values == {"projector": True, "step_used_chart": False} and len(problems) == 1
    assert "“ig”" in str(problems[0]) and "0 | 1" in str(problems[0])


@settings(max_examples=60, deadline=None)
@given(n=st.integers(MAX_TEXT_CHARS + 1, 2_000_000), tail=ANY_TEXT)
def test_an_over_long_sentence_says_so_whatever_its_length(n, tail):
    raw = ("a" * n + tail)[:n]
    values, problems = check({"text": raw}, CHECKPOINTS, SITE.linked)
    assert "text" not in values and len(problems) == 1
    assert f"{n} characters" in str(problems[0]).replace(",", "")


@settings(max_examples=200, deadline=None)
@given(raw=ANY_TEXT.filter(lambda s: s not in CHECKPOINTS))
def test_a_model_the_server_does_not_have_is_said(raw):
    values, problems = check({"checkpoint": raw}, CHECKPOINTS, SITE.linked)
    assert "checkpoint" not in values and len(problems) == 1


HOSTILE = [
    {"text": "x" * 5000},
    {"text": "\u202eevil\u0000 <script>alert(1)</script>", "beam": "\u0000\u202e99"},
    {"checkpoint": "../../../../etc/passwd", "layer": "-1", "head": "1e309"},
    {"view": "<img src=x onerror=alert(1)>", "step": "99999999999999999999"},
    {"method": "[click](javascript:alert(1))", "kind": "*" * 3000, "lang": "\n\n# heading"},
]


@pytest.mark.parametrize("link", HOSTILE, ids=[f"hostile-{i}" for i in range(len(HOSTILE))])
def test_a_hostile_link_opens_the_page_with_its_message(app_checkpoints, monkeypatch, link):
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params.update(link)
    at.run()
    assert not at.exception, at.exception
    said = [w.value for w in at.warning]
    expected = [str(p) for p in check(link, [c.name for c in app_checkpoints.iterdir()], SITE.linked)[1]]
    expected += ["The link names a page this app does not have; here is the first page."] * ("view" in link)
    assert expected and all(e in said for e in expected), (said, expected)     # every misfit said, once each
    assert not any(bad in " ".join(said) for bad in ("<script>", "javascript:", "passwd", "onerror"))  # not echoed
