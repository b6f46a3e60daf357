"""The command-line tools: translate (N lines in, N out), trace (the documented JSON), evaluate."""
from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import subprocess
import sys
import warnings
from unittest import mock

import pytest

from tests.support import ROOT, make_checkpoint


@pytest.fixture(scope="module")
def ckpt_dir(tokenizer, tmp_path_factory):
    path = tmp_path_factory.mktemp("ck") / "tiny"
    make_checkpoint(tokenizer, path)
    return path


def run(module: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    """`python -m module args` as its user runs it, in this process: the command's main(argv) with standard
    input, output and error of its own, its warnings written to that error as Python writes them, its exit
    code (a process per call would cost a second of imports; `test_python_m_runs_each_command` runs them as
    processes)."""
    from model.commands.registry import COMMANDS
    main = importlib.import_module(next(c.module for c in COMMANDS.values() if c.shortcut == module)).main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            mock.patch.object(sys, "stdin", io.StringIO(stdin)), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        try:
            code = main(list(args)) or 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    said = "".join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in caught)
    return subprocess.CompletedProcess([module, *args], code, out.getvalue(), err.getvalue() + said)


def test_translate_keeps_one_line_per_line(ckpt_dir):
    lines = ["the dog runs", "", "   ", "a red ball " * 200, "😀", "the cat\x0csits\u2028on a blue ball"]
    done = run("model.translate", "--checkpoint", str(ckpt_dir), "--beam-size", "2", "--batch-size", "2",
               stdin="\n".join(lines) + "\n")
    assert done.returncode == 0, done.stderr
    out = done.stdout.split("\n")
    assert out[-1] == "" and len(out) - 1 == len(lines)
    assert out[1] == out[2] == out[3] == ""                         # empty, blank, over-long
    assert "line 2" in done.stderr and "line 3" in done.stderr and "line 4" in done.stderr
    assert "limit is 255" in done.stderr


def test_translate_reads_a_gzipped_input_file(ckpt_dir, tmp_path):
    import gzip
    lines = ["the dog runs", "a red ball"]
    (tmp_path / "in.txt.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    zipped = run("model.translate", "--checkpoint", str(ckpt_dir), "--input", str(tmp_path / "in.txt.gz"))
    plain = run("model.translate", "--checkpoint", str(ckpt_dir), stdin="\n".join(lines) + "\n")
    assert zipped.returncode == 0, zipped.stderr
    assert zipped.stdout == plain.stdout and len(zipped.stdout.split("\n")) == 3


def test_translate_batched_equals_one_by_one(ckpt_dir):
    lines = ["the dog runs", "a man in the street plays with a big ball", "the cat"]
    together = run("model.translate", "--checkpoint", str(ckpt_dir), "--batch-size", "3",
                   stdin="\n".join(lines) + "\n").stdout
    alone = "".join(run("model.translate", "--checkpoint", str(ckpt_dir), stdin=line + "\n").stdout
                    for line in lines)
    assert together == alone


def test_trace_json_has_the_documented_shape(ckpt_dir, tmp_path):
    out = tmp_path / "t.json"
    # the untrained model may say nothing; a reference fixes the target axis
    done = run("model.trace", "--checkpoint", str(ckpt_dir), "--text", "the dog runs in the park",
               "--decode", "beam", "--beam-size", "3", "--reference", "a cat sits", "--out", str(out))
    assert done.returncode == 0, done.stderr
    t = json.loads(out.read_text())
    S, T = len(t["source"]["tokens"]), len(t["target"]["tokens"])
    L, H = 2, 4
    assert t["target"]["tokens"][0] == "<s>" and t["source"]["tokens"][-1] == "</s>"
    assert _shape(t["attention"]["encoder_self"]) == (L, H, S, S)
    assert _shape(t["attention"]["decoder_self"]) == (L, H, T, T)
    assert _shape(t["attention"]["cross"]) == (L, H, T, S)
    assert _shape(t["positional_encoding"]["source"]) == (S, 32)
    assert _shape(t["positional_encoding"]["target"]) == (T, 32)
    assert _shape(t["masks"]["decoder_self"]) == (T, T) and t["masks"]["decoder_self"][0][1] == 0
    assert _shape(t["masks"]["cross"]) == (T, S)
    assert isinstance(t["output"]["text"], str)
    assert T == len(t["reference"]["tokens"]) >= 2 and "RuntimeWarning" not in done.stderr
    steps = t["decoding"]["steps"]
    assert len(steps) >= 2 and len(steps[0]["hypotheses"]) == 1 and steps[0]["hypotheses"][0]["parent"] is None
    h = steps[1]["hypotheses"][0]
    assert {"tokens", "log_prob", "score", "parent", "top_k", "self_attn", "cross_attn"} <= set(h)
    assert _shape(h["cross_attn"]) == (L, H, S) and _shape(h["self_attn"]) == (L, H, 2)
    assert {c["status"] for c in steps[0]["candidates"]} <= {"kept", "finished", "pruned"}


def test_trace_with_reference_gives_probabilities_and_ranks(ckpt_dir):
    done = run("model.trace", "--checkpoint", str(ckpt_dir), "--text", "the dog", "--reference", "the cat runs",
               "--out", "-")
    assert done.returncode == 0, done.stderr
    t = json.loads(done.stdout)
    n = len(t["reference"]["tokens"])
    assert len(t["reference"]["probs"]) == len(t["reference"]["ranks"]) == n
    assert len(t["target"]["tokens"]) == n                          # <s> + reference pieces
    assert t["target"]["source_of_tokens"] == "reference"


@pytest.mark.parametrize("args,needle", [
    (["--text", ""], "empty"),
    (["--text", "   "], "empty"),
    (["--text", "ball " * 400], "limit is 255"),
    (["--text", "x", "--checkpoint", "/nonexistent"], "no such checkpoint"),
    (["--text", "x", "--beam-size", "40", "--decode", "beam"], "beam size"),
])
def test_trace_refuses_bad_input_with_one_line(ckpt_dir, tmp_path, args, needle):
    cmd = ["--checkpoint", str(ckpt_dir), "--out", str(tmp_path / "x.json"), *args]
    done = run("model.trace", *cmd)
    assert done.returncode == 2
    assert needle in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("references, sentences, count", [("all", 3, 4), ("line", 5, 5)])
def test_evaluate_scores_each_sentence_once_against_all_its_references(ckpt_dir, tmp_path, references,
                                                                       sentences, count):
    en = ["the dog runs", "a red ball", "the dog runs", "the cat", "the dog runs"]
    de = ["der Hund rennt", "ein roter Ball", "der Hund läuft", "die Katze", "der Hund rennt"]
    (tmp_path / "test.en").write_text("\n".join(en) + "\n")
    (tmp_path / "test.de").write_text("\n".join(de) + "\n")
    out = tmp_path / "scores.json"
    done = run("model.evaluate", "--checkpoint", str(ckpt_dir), "--data", str(tmp_path), "--split", "test",
               "--beam-size", "2", "--references", references, "--json", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert (report["sentences"], report["reference_count"]) == (sentences, count)
    for row in report["results"].values():
        assert 0 <= row["bleu"] <= row["bleu_lowercase"] <= 100 and row["sentences_per_second"] > 0
        assert [(r["words"], r["sentences"]) for r in row["by_length"]] == [("1-5", sentences), ("6-10", 0),
                                                                          ("11-15", 0), ("16+", 0)]
    assert f"{sentences} sentences, {count} references" in done.stderr
    assert "BLEU by source length: 1-5 words" in done.stdout


@pytest.mark.parametrize("module", ["model.translate", "model.trace", "model.evaluate", "model.tune", "model.convert",
                                    "train"])
def test_help_explains(module):
    done = run(module, "--help") if module != "train" else _process("train", "--help")
    assert done.returncode == 0 and "usage:" in done.stdout
    assert "python " in done.stdout.split("usage:", 1)[1]          # the description shows an example


def _process(module: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], input=stdin, capture_output=True, text=True,
                          cwd=ROOT, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})


def test_python_m_runs_each_command(ckpt_dir):
    """The documented `python -m model.NAME` shortcuts, as processes: a translation on standard output, the
    same as in this process; a refusal in one line on standard error with exit code 2."""
    done = _process("model.translate", "--checkpoint", str(ckpt_dir), "--no-progress", stdin="the dog runs\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == run("model.translate", "--checkpoint", str(ckpt_dir), "--no-progress",
                              stdin="the dog runs\n").stdout
    refused = _process("model.trace", "--checkpoint", str(ckpt_dir), "--text", "", "--out", "-")
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1 and "empty" in refused.stderr
    for module in ("model.evaluate", "model.tune", "model.convert"):
        assert _process(module, "--help").returncode == 0, module


def _shape(x) -> tuple:
    shape = []
    while isinstance(x, list):
        shape.append(len(x))
        x = x[0]
    return tuple(shape)


# ---- the length penalty chosen on val (model.tune) -----------------------------------------------
def test_tune_stores_the_best_alpha_that_the_clis_then_use(tokenizer, tmp_path):
    import argparse

    from model.commands.shared import add_decode_args, decode_options
    from model.storage.card import render_card
    from model.storage.checkpoint import load_checkpoint
    from tests.support import sentences
    ck, data = tmp_path / "ck", tmp_path / "data"
    make_checkpoint(tokenizer, ck)
    data.mkdir()
    lines = sentences(12, seed=3)
    for lang in ("en", "de"):
        (data / f"val.{lang}").write_text("\n".join(lines) + "\n")
    done = run("model.tune", "--checkpoint", str(ck), "--data", str(data), "--alphas", "0,2.5", "--write")
    assert done.returncode == 0, done.stderr
    rows = {float(r.split()[0]): float(r.split()[1]) for r in done.stdout.splitlines()[2:4]}
    assert set(rows) == {0.0, 2.5}
    chosen = max(rows, key=lambda a: (rows[a], -a))
    assert load_checkpoint(ck).beam_alpha == chosen and f"best: alpha {chosen}" in done.stdout
    assert f"α = {chosen:g}" in render_card(ck) and "| 2.5 |" in render_card(ck)
    assert "edge of the alphas tried" in done.stderr                  # of two, the best is always at an edge

    p = argparse.ArgumentParser()
    add_decode_args(p)
    ckpt = load_checkpoint(ck)
    assert decode_options(p.parse_args([]), ckpt).alpha == chosen           # no --alpha: the checkpoint's
    assert decode_options(p.parse_args(["--alpha", "0.3"]), ckpt).alpha == 0.3


def test_tune_refuses_to_choose_on_a_test_split(ckpt_dir):
    done = run("model.tune", "--checkpoint", str(ckpt_dir), "--split", "test_2016_flickr", "--write")
    assert done.returncode == 2 and "validation split" in done.stderr and "Traceback" not in done.stderr
    from model.commands.tune import _alphas  # argparse turns this into a usage error
    with pytest.raises(argparse.ArgumentTypeError, match="from 0 to 5"):
        _alphas("1,6")


def test_tune_picks_the_highest_bleu_and_the_smaller_alpha_on_a_tie():
    from model.commands.tune import Trial, best
    trials = [Trial(a, b, 1.0, 1.0, "") for a, b in ((0.6, 30.0), (1.0, 31.0), (1.4, 31.0), (2.0, 29.0))]
    assert best(trials).alpha == 1.0
