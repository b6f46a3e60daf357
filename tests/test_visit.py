"""The GPU visit's script (model/commands/visit.py) end to end on the CPU with tiny settings: the same
stages and files as on the lent GPU, in a Python that cannot import what that machine lacks (Streamlit,
plotly, Redis, Playwright, Babel). Also its pieces: the lexicon filter, the split parts, the time-set
learning-rate cooldown, the batched beam search the distillation decodes with."""
from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest
import torch

from model.commands.visit import Log
from model.inference.bulk import beam_batch
from model.inference.decoding import decode
from model.inference.options import DecodeOptions
from model.network.batch import Example, collate
from model.storage.checkpoint import load_checkpoint, save_checkpoint
from model.training.distillation import (
    DIRECTIONS,
    MONO,
    PAIRS,
    lexicon_entries,
    read_compact,
    split_file,
    unpack_distilled,
)
from tests.support import ROOT, tiny_model

WORDS = {"the": "die", "cat": "katze", "dog": "hund", "sees": "sieht", "eats": "isst", "a": "eine", "big": "große",
         "small": "kleine", "fish": "fisch", "bird": "vogel", "today": "heute", "now": "jetzt"}
MISSING_THERE = ("streamlit", "plotly", "redis", "playwright", "babel", "websockets")


def _pairs(n: int, seed: int) -> tuple[list[str], list[str]]:
    import random
    rng = random.Random(seed)
    en, de = [], []
    for _ in range(n):
        words = rng.choices(list(WORDS), k=rng.randint(2, 6))
        en.append(" ".join(words) + ".")
        de.append(" ".join(WORDS[w] for w in words) + ".")
    return en, de


def _write(path: Path, lines: list[str]) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def tiny_bundle(root: Path, tokenizer) -> tuple[Path, Path]:
    """A bundle of the visit's layout from made-up pairs, and tiny shipped-alike checkpoints."""
    bundle, ckpts = root / "bundle", root / "checkpoints"
    bundle.mkdir()
    for i, (name, (_, splits)) in enumerate(PAIRS.items()):
        for j, split in enumerate(splits):
            en, de = _pairs(40 if split == "train" else 6, seed=10 * i + j)
            _write(bundle / f"{name}.{split}.en.gz", en)
            _write(bundle / f"{name}.{split}.de.gz", de)
    for k, name in enumerate(MONO):
        en, de = _pairs(8, seed=100 + k)
        en[3], de[3] = en[3].replace(" ", "\t", 1), de[3].replace(" ", "\t", 1)   # a tab inside a sentence
        _write(bundle / f"{name}.gz", en if name.endswith(".en") else de)
    _write(bundle / "lexicon.tsv.gz", [f"{e}\t{d}" for e, d in WORDS.items()])
    (bundle / "MANIFEST.json").write_text("{}")
    for s, t in DIRECTIONS:
        save_checkpoint(ckpts / f"multi30k-{s}-{t}", tiny_model(tokenizer.vocab_size, seed=3), tokenizer, tokenizer)
    return bundle, ckpts


def visit(args: list[str], pythonpath: list[Path]) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(p) for p in pythonpath))
    return subprocess.run([sys.executable, "-m", "model.commands.visit", "run", "--device", "cpu", "--tiny", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=280)


def blocker(root: Path) -> Path:
    """A sitecustomize that makes what the lent GPU machine lacks unimportable."""
    folder = root / "blocker"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(textwrap.dedent(f"""
        import sys
        class _NotThere:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {MISSING_THERE!r}:
                    raise ImportError(name + " is not on the lent GPU machine")
        sys.meta_path.insert(0, _NotThere())
    """))
    return folder


@pytest.mark.early
def test_a_whole_visit_on_the_cpu_packs_what_a_later_visit_can_train_on(tmp_path):
    """One test, so that one worker runs the visit (a module fixture would run in each worker that takes one
    of its tests: two visits at once on two cores)."""
    from model.network.tokenizer import Tokenizer
    en, de = _pairs(300, seed=0)
    bundle, ckpts = tiny_bundle(tmp_path, Tokenizer.train(en + de, vocab_size=60))
    out, work = tmp_path / "out", tmp_path / "work"
    proc = visit(["--bundle", str(bundle), "--out", str(out), "--work", str(work), "--minutes", "4",
                  "--students-from", str(ckpts), "--skip-tests"], [blocker(tmp_path), ROOT])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    # what comes back: at most 8 files under 16 MB, the report first
    names = sorted(p.name for p in out.iterdir())
    assert len(names) <= 8 and all(p.stat().st_size < 16 * 2 ** 20 for p in out.iterdir())
    assert {"report.tar.gz", "distill-en-de.txt.xz", "distill-de-en.txt.xz"} <= set(names)
    with tarfile.open(out / "report.tar.gz") as tar:
        results = json.load(tar.extractfile("report/results.json"))
        members = tar.getnames()
    assert results["speed"]["ours_tokens_per_s"] > 0 and results["speed"]["nn_transformer_tokens_per_s"] > 0
    assert results["loop"]["default"]["real_tokens_per_s"] > 0
    for direction in ("en-de", "de-en"):
        assert results["teachers"][direction]["exit"] == 0
        assert results["teachers"][direction]["val_bleu"] is not None
        assert "report/teacher-" + direction + "/config.json" in members
        assert "tatoeba:test-long" in results["distill"][direction]
        assert results["students"][direction]["exit"] == 0
        assert results["students"][direction]["pairs"]["forward"] > 0
    assert results["students"]["en-de"]["pairs"]["back"] > 0          # German monolingual, back-translated

    # the distillation comes back compact, and its sources are put back from the bundle (a tab included)
    with gzip.open(work / "distill-en-de.tsv.gz", "rt") as f:
        full = [tuple(line.rstrip("\n").split("\t")) for line in f]
    back = read_compact(out / "distill-en-de.txt.xz", bundle, "en")
    assert [(c, src.replace("\t", " "), t) for c, src, t in back] == [r for r in full if r[2].strip()]
    assert {r[0] for r in back} >= {"tatoeba", "sgd"} and any("\t" in r[1] for r in back)

    # the students come back in parts that load as checkpoints, trained on (not copied), in float16
    parts = sorted(out.glob("students.tar.part-*"))
    assert parts
    with tarfile.open(fileobj=io.BytesIO(b"".join(p.read_bytes() for p in parts))) as tar:
        tar.extractall(tmp_path / "students", filter="data")
    for s, t in DIRECTIONS:
        student = load_checkpoint(tmp_path / "students" / f"multi30k-{s}-{t}")
        start = load_checkpoint(ckpts / f"multi30k-{s}-{t}")
        with torch.no_grad():
            moved = sum(float((a - b).abs().sum()) for a, b in zip(student.model.parameters(),
                                                                   start.model.parameters()))
        assert moved > 0
        config = json.loads((tmp_path / "students" / f"multi30k-{s}-{t}" / "config.json").read_text())
        assert config["weights_dtype"] == "float16"

    # a later visit (`--stages students --distilled DIR`) finds the translations as the distill stage left them
    unpacked = unpack_distilled(out, bundle, tmp_path / "later", Log(tmp_path / "later.log"))
    assert unpacked["en-de"] == len(back) > 0
    with gzip.open(tmp_path / "later" / "distill-en-de.tsv.gz", "rt") as f:
        assert [tuple(line.rstrip("\n").split("\t")) for line in f] == [r for r in full if r[2].strip()]


def test_split_parts_join_back_to_the_whole(tmp_path):
    data = os.urandom(2500)
    whole = tmp_path / "x.tar"
    whole.write_bytes(data)
    parts = split_file(whole, part_bytes=1000)
    assert [p.stat().st_size for p in parts] == [1000, 1000, 500] and not whole.exists()
    assert b"".join(p.read_bytes() for p in parts) == data


def test_the_lexicon_keeps_plain_typed_words_and_their_commonest_sense():
    from collections import Counter
    english = Counter({"the": 900, "cat": 9, "train": 5, "station": 5, "xylograph": 1})
    english.update({f"w{i}": 1000 for i in range(300)})            # the 300 commonest words
    german = Counter({"katze": 7, "bahnhof": 4, "zug": 8, "schleppe": 3, "xylograf": 1})
    lines = ["cat\tKatze {f}", "cat\tKatze", "train\tSchleppe", "train\tZug", "train station\tBahnhof",
             "xylograph\tXylograf", "w1\tKatze", "to cat sb.\tKatze"]
    assert lexicon_entries(lines, english, german) == [("cat", "Katze"), ("train", "Zug"),
                                                       ("train station", "Bahnhof")]


def test_bulk_beam_search_makes_the_choices_of_the_step_by_step_search():
    model = tiny_model(40, seed=5)
    with torch.no_grad():
        model.generator.weight[3] *= 4                                 # EOS likely: lengths differ
    g = torch.Generator().manual_seed(5)
    lengths = torch.randint(1, 12, (20,), generator=g)
    ids = [torch.randint(4, 40, (int(n),), generator=g).tolist() + [3] for n in lengths]
    src = collate([Example(i, [2]) for i in ids], 0)[0]
    for opts in (DecodeOptions("beam", beam_size=1), DecodeOptions("beam", beam_size=4, alpha=1.0),
                 DecodeOptions("beam", beam_size=3, length_penalty="average"),
                 DecodeOptions("beam", beam_size=5, length_penalty="none", max_len_a=0.5, max_len_b=2)):
        expected = [r.tokens for r in decode(model, src, opts)]
        assert beam_batch(model, src, opts) == expected
    greedy = [r.tokens for r in decode(model, src, DecodeOptions("greedy"))]
    assert beam_batch(model, src, DecodeOptions("beam", beam_size=1)) == greedy
    assert len({len(t) for t in greedy}) > 2
