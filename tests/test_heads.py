"""Every head across a set (model/analysis/heads): the measures on attention built by hand, a one-sentence
set against that sentence's own trace, the knockout cost against the knockout page's number, the
file's versioning, the query/key map's invariances, bad input, and the command-line tool."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from model.analysis import heads
from model.analysis.heads import StatisticsError, compute, fingerprint, read_set, sentence_set
from model.analysis.heads.measures import MEASURES, Rows, Totals, is_punctuation
from model.analysis.heads.qkmap import joint_map
from model.analysis.heads.roles import RULES, role
from model.analysis.heads.store import current, from_json, load, load_or_compute, save, to_json
from model.commands.heads import main as cli_main
from model.inference.options import DecodeOptions
from model.inference.pipeline import explain, knockout_effects
from model.network.kinds import kind as attention_kind
from model.storage.checkpoint import load_checkpoint
from tests.support import make_checkpoint, sentences

GREEDY = DecodeOptions("greedy", record_steps=True)


def layout(n_q: int, n_k: int, allowed: np.ndarray, diagonal: bool = False, sink: int | None = None,
           punct: tuple[int, ...] = ()) -> Rows:
    sinks = np.zeros((1, n_k), dtype=bool)
    sinks[0, n_k - 1 if sink is None else sink] = True
    p = np.zeros((1, n_k), dtype=bool)
    p[0, list(punct)] = True
    return Rows(np.array([n_q]), np.array([n_k]), allowed[None], diagonal, sinks, p)


def means_of(attn: np.ndarray, rows: Rows) -> dict[str, float]:
    t = Totals()
    t.add(attn[None, None, None], rows)                           # one layer, one sentence, one head
    return {m: float(v[0, 0]) for m, v in t.means().items()}


# ---- the measures on attention built by hand ---------------------------------------------------
def test_a_previous_token_head_puts_all_its_mass_on_the_previous_token():
    n = 6
    causal = np.tril(np.ones((n, n), dtype=bool))
    attn = np.zeros((n, n))
    attn[0, 0] = 1.0
    attn[np.arange(1, n), np.arange(n - 1)] = 1.0                  # row i: all on i - 1
    m = means_of(attn, layout(n, n, causal, sink=0))
    assert m["previous"] == 1.0 and m["same"] == m["next"] == m["left"] == m["right"] == 0.0
    assert m["entropy"] == 0.0 and m["max_weight"] == 1.0 and m["distance"] == 1.0
    assert Totals().rows == 0
    t = Totals()
    t.add(attn[None, None, None], layout(n, n, causal, sink=0))
    assert t.rows == n - 1                                         # row 0 (one key, no choice) is not counted


def test_a_uniform_head_has_the_entropy_of_the_uniform_distribution():
    n = 7
    attn = np.full((n, n), 1.0 / n)
    m = means_of(attn, layout(n, n, np.ones((n, n), dtype=bool)))
    assert m["entropy"] == pytest.approx(math.log(n), abs=1e-12)
    assert m["entropy_norm"] == pytest.approx(1.0, abs=1e-12)
    assert m["max_weight"] == pytest.approx(1.0 / n)
    profile = sum(m[k] for k in ("left", "previous", "same", "next", "right"))
    assert profile == pytest.approx(1.0)                             # the offset profile is a distribution
    assert m["sink"] == pytest.approx(1.0 / n)


@pytest.mark.parametrize("t, s", [(5, 5), (3, 5), (6, 4)])
def test_a_diagonal_cross_attention_head_has_diagonal_share_one(t, s):
    attn = np.zeros((t, s))
    for i in range(t):                                             # first to first, last to last, in between rounded
        attn[i, int(math.floor(i * (s - 1) / (t - 1) + 0.5))] = 1.0
    m = means_of(attn, layout(t, s, np.ones((t, s), dtype=bool), diagonal=True))
    assert m["same"] == 1.0 and m["distance"] == 0.0
    assert role("cross", m).role == "diagonal / alignment"


def test_sink_and_punctuation_shares_and_padding_rows():
    allowed = np.zeros((4, 5), dtype=bool)
    allowed[:3, :4] = True                                         # a sentence of 3 queries, 4 keys, padded
    attn = np.zeros((4, 5))
    attn[:3, 3] = 0.5                                              # the end-of-sentence key
    attn[:3, 1] = 0.5                                              # a comma
    attn[3] = 0.2                                                  # a padding row: not counted
    m = means_of(attn, Rows(np.array([3]), np.array([4]), allowed[None], False,
                            np.eye(5, dtype=bool)[[3]], np.eye(5, dtype=bool)[[1]]))
    assert m["sink"] == 0.5 and m["punctuation"] == 0.5
    assert m["entropy"] == pytest.approx(math.log(2))


def test_punctuation_pieces():
    assert all(is_punctuation(p) for p in ("▁.", ",", "?!", "▁«"))
    assert not any(is_punctuation(p) for p in ("▁", "▁dog", "a.", ""))


def test_roles_follow_their_rules_in_order():
    base = {m: 0.0 for m in MEASURES}
    assert role("decoder_self", base | {"sink": 0.6, "previous": 0.6}).role == "start-symbol sink"
    assert role("encoder_self", base | {"previous": 0.45}).role == "previous token"
    assert role("cross", base | {"previous": 0.45}).role != "previous token"      # not a rule of cross-attention
    assert role("cross", base | {"entropy_norm": 0.9}).role == "broad / averaging"
    assert role("encoder_self", base).role == "mixed"
    assert all(any(k in r.kinds for r in RULES if r.role == "mixed") for k in ("cross", "encoder_self"))


# ---- the query/key map ---------------------------------------------------------------------------
def test_the_joint_map_ignores_what_the_softmax_ignores():
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(30, 8)), rng.normal(size=(40, 8)) * 3
    qa, ka, shown = joint_map(q, k)
    qb, kb, _ = joint_map(q * 5.0, (k + rng.normal(size=8)) / 5.0)   # keys moved, q scaled up and k down
    assert np.allclose(qa, qb) and np.allclose(ka, kb)
    assert 0 < shown <= 1 and qa.shape == (30, 2) and ka.shape == (40, 2)


# ---- a real (tiny) checkpoint ------------------------------------------------------------------
@pytest.fixture(scope="module")
def ckpt(tokenizer, tmp_path_factory):
    path = tmp_path_factory.mktemp("heads") / "tiny-en-de"
    make_checkpoint(tokenizer, path, seed=2)
    return load_checkpoint(path)


def row_means_by_hand(attn: np.ndarray, allowed: np.ndarray, sink: int) -> dict[str, np.ndarray]:
    """Entropy, max weight and sink share of one sentence's attention (L, H, Tq, Tk), by loops."""
    n_layers, n_heads, tq, _ = attn.shape
    out = {k: np.zeros((n_layers, n_heads)) for k in ("entropy", "max_weight", "sink")}
    rows = [i for i in range(tq) if allowed[i].sum() >= 2]
    for layer in range(n_layers):
        for h in range(n_heads):
            for i in rows:
                p = attn[layer, h, i][allowed[i]]
                out["entropy"][layer, h] += -sum(x * math.log(x) for x in p if x > 0) / len(rows)
                out["max_weight"][layer, h] += p.max() / len(rows)
                out["sink"][layer, h] += attn[layer, h, i, sink] / len(rows)
    return out


def test_one_sentence_set_equals_its_own_trace(ckpt):
    text = "the dog runs in the park"
    stats = compute(ckpt, sentence_set(ckpt, [text], "one"), GREEDY, knockout_sentences=0, agreement_sentences=0)
    trace = explain(ckpt, text, GREEDY).trace
    s, t = trace.source_length(), trace.target_length()
    for kind, sink in (("encoder_self", s - 1), ("decoder_self", 0), ("cross", s - 1)):
        attn = trace.attention(kind)[:, 0].double().numpy()
        allowed = trace.mask(kind)[0].numpy()
        expected = row_means_by_hand(attn, allowed, sink)
        for measure, value in expected.items():
            assert np.allclose(stats.kinds[kind].means[measure], value, atol=1e-5), (kind, measure)
    assert stats.kinds["decoder_self"].rows == (t - 1) * 1                # the first position has one key
    assert stats.translations == [explain(ckpt, text, GREEDY).output]


def test_a_set_of_two_is_the_row_weighted_mean_of_each_padding_left_out(ckpt):
    a, b = "a dog", "the woman sits on a big blue ball and a child plays"
    both = compute(ckpt, sentence_set(ckpt, [a, b], "two"), GREEDY, knockout_sentences=0, agreement_sentences=0)
    one = [compute(ckpt, sentence_set(ckpt, [x], "one"), GREEDY, knockout_sentences=0, agreement_sentences=0)
           for x in (a, b)]
    for kind in both.kinds:
        rows = [o.kinds[kind].rows for o in one]
        assert both.kinds[kind].rows == sum(rows)
        for m in MEASURES:
            mixed = sum(o.kinds[kind].means[m] * r for o, r in zip(one, rows)) / sum(rows)
            assert np.allclose(both.kinds[kind].means[m], mixed, atol=1e-5), (kind, m)


def test_the_knockout_cost_of_one_sentence_is_the_knockout_pages_number(ckpt):
    text = "the woman sits on a big blue ball"
    stats = compute(ckpt, sentence_set(ckpt, [text], "one"), GREEDY, knockout_sentences=1, agreement_sentences=0)
    ex = explain(ckpt, text, GREEDY)
    page = knockout_effects(ckpt, ex.source_ids, ex.result.tokens)
    for kind, k in stats.kinds.items():
        for layer in range(k.knockout.shape[0]):
            for h in range(k.knockout.shape[1]):
                name = f"{attention_kind(kind).layer_name(layer)}.{h}"
                assert k.knockout[layer, h] == pytest.approx(page[name], abs=1e-4), name
    assert np.abs(stats.kinds["cross"].knockout).max() > 1e-3                  # the heads do matter


def test_typical_sentences_and_agreement(ckpt):
    stats = compute(ckpt, sentence_set(ckpt, sentences(12, seed=4), "twelve"), GREEDY, knockout_sentences=2,
                    agreement_sentences=3)
    cross = stats.kinds["cross"]
    assert cross.typical.shape == cross.atypical.shape == (2, 4, 5)
    assert cross.typical[0, 0, 0] != cross.atypical[0, 0, 0]             # nearest and farthest differ
    assert set(cross.typical.ravel()) <= set(range(12))
    assert stats.agreement_sentences == 3 and cross.agreement.shape == (2, 4)
    assert np.nanmax(np.abs(cross.agreement)) <= 1.0
    assert stats.kinds["encoder_self"].agreement is None
    assert cross.queries.shape[:2] == (2, 4) and len(cross.query_tokens) == cross.queries.shape[2]
    for sentence, position in cross.query_tokens:                         # queries of cross-attention: target side
        assert position < len(stats.target_tokens[sentence])


# ---- the file ------------------------------------------------------------------------------------
def test_the_file_round_trips_and_a_stale_one_is_detected(ckpt, tmp_path):
    stats = compute(ckpt, sentence_set(ckpt, sentences(5), "five"), GREEDY, knockout_sentences=1,
                    agreement_sentences=1)
    path = save(stats, tmp_path / heads.FILE)
    back = load(path)
    for kind in stats.kinds:
        for m in MEASURES:
            assert np.allclose(back.kinds[kind].means[m], stats.kinds[kind].means[m], atol=1e-6)
        assert back.kinds[kind].roles == stats.kinds[kind].roles
    assert current(path, fingerprint(ckpt.model))[0] is not None
    changed = fingerprint_after(ckpt, lambda m: m.decoder.layers[0].cross_attn.w_q.weight.add_(1e-3))
    stale, why = current(path, changed)
    assert stale is None and "other weights" in why
    old = json.loads(path.read_text()) | {"format": "transformer-head-statistics/0"}
    path.write_text(json.dumps(old))
    assert current(path, fingerprint(ckpt.model))[0] is None
    with pytest.raises(StatisticsError):
        from_json(old)


def fingerprint_after(ckpt, change) -> str:
    import copy
    model = copy.deepcopy(ckpt.model)
    with torch.no_grad():
        change(model)
    return fingerprint(model)


def test_a_stale_file_is_recomputed(ckpt, tmp_path):
    path = tmp_path / heads.FILE
    sentences_in = sentence_set(ckpt, sentences(3), "three")
    first = load_or_compute(ckpt, lambda: sentences_in, path, GREEDY, knockout_sentences=0)
    data = to_json(first) | {"fingerprint": "0" * 64}
    path.write_text(json.dumps(data))
    again = load_or_compute(ckpt, lambda: sentences_in, path, GREEDY, knockout_sentences=0)
    assert again.fingerprint == fingerprint(ckpt.model) == load(path).fingerprint


# ---- bad input -----------------------------------------------------------------------------------
def test_bad_input_is_said_and_the_rest_is_used(ckpt, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(StatisticsError, match="no sentence"):
        read_set(ckpt, empty)
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n\n")
    with pytest.raises(StatisticsError, match="3 blank"):
        read_set(ckpt, blank)
    mixed = tmp_path / "mixed.txt"
    mixed.write_text("the dog runs\n\n" + "the dog " * 200 + "\na red ball\n")
    s = read_set(ckpt, mixed)
    assert s.texts == ["the dog runs", "a red ball"] and s.line_numbers == [1, 4]
    assert s.skipped_summary() == "1 blank, 1 over the token limit"
    with pytest.raises(StatisticsError, match="not in"):
        read_set(ckpt, None, data=tmp_path / "nowhere")


def test_the_command_line_tool(ckpt, tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_text("the dog runs\n\na red ball on the street\n")
    out = tmp_path / "stats.json"
    cli_main(["--checkpoint", str(ckpt.path), "--input", str(text), "--out", str(out), "--decode", "greedy",
              "--knockout-sentences", "1", "--agreement-sentences", "1"])
    err = capsys.readouterr().err
    assert "skipped 1 of 3 lines: 1 blank" in err and f"wrote {out}" in err
    stats = load(out)
    assert len(stats.sentences) == 2 and stats.knockout_sentences == 1 and stats.input["lines"] == 3
    with pytest.raises(SystemExit):
        cli_main(["--checkpoint", str(ckpt.path), "--input", str(tmp_path / "missing.txt")])
    assert "cannot be read" in capsys.readouterr().err
