"""Checkpoint directories: round trip, half precision, and one-line errors naming the file."""
from __future__ import annotations

import json

import pytest
import torch

from model.storage.checkpoint import CheckpointError, load_checkpoint
from model.storage.places import find_checkpoints
from tests.support import make_checkpoint, random_batch


def logits_of(m, vocab):
    src, tgt = random_batch(vocab, [6, 4], 1), random_batch(vocab, [5, 3], 2, bos=True)
    with torch.no_grad():
        return m(src, tgt)


def test_round_trip_gives_identical_logits(tokenizer, tmp_path):
    m = make_checkpoint(tokenizer, tmp_path / "ck")
    loaded = load_checkpoint(tmp_path / "ck")
    assert torch.equal(logits_of(m, tokenizer.vocab_size), logits_of(loaded.model, tokenizer.vocab_size))
    assert loaded.model.generator.weight is loaded.model.src_embed.lut.weight      # tie kept
    assert loaded.src_lang == "en" and loaded.tgt_lang == "de" and not loaded.model.training
    assert loaded.src_tokenizer.encode("the dog runs") == tokenizer.encode("the dog runs")
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) == [
        "README.md", "config.json", "model.safetensors", "spm.model", "training_log.jsonl"]
    assert find_checkpoints(tmp_path) == [tmp_path / "ck"]


def test_half_precision_weights_load_back_close(tokenizer, tmp_path):
    m = make_checkpoint(tokenizer, tmp_path / "ck", half=True)
    loaded = load_checkpoint(tmp_path / "ck")
    assert loaded.model.src_embed.lut.weight.dtype == torch.float32
    assert torch.allclose(logits_of(m, tokenizer.vocab_size), logits_of(loaded.model, tokenizer.vocab_size), atol=2e-2)


def test_saving_over_a_checkpoint_replaces_it(tokenizer, tmp_path):
    make_checkpoint(tokenizer, tmp_path / "ck", seed=0)
    m2 = make_checkpoint(tokenizer, tmp_path / "ck", seed=1)
    assert torch.equal(logits_of(load_checkpoint(tmp_path / "ck").model, tokenizer.vocab_size),
                       logits_of(m2, tokenizer.vocab_size))
    assert [p.name for p in tmp_path.iterdir()] == ["ck"]                 # no temporary left behind


def corrupt_weights(path):
    data = (path / "model.safetensors").read_bytes()
    (path / "model.safetensors").write_bytes(data[: len(data) // 2])


def garbage_weights(path):
    (path / "model.safetensors").write_bytes(b"not a safetensors file at all")


def drop(name):
    return lambda path: (path / name).unlink()


def wrong_vocab(path):
    cfg = json.loads((path / "config.json").read_text())
    cfg["model"]["src_vocab_size"] = cfg["model"]["tgt_vocab_size"] = 99
    (path / "config.json").write_text(json.dumps(cfg))


def bad_json(path):
    (path / "config.json").write_text("{ not json")


@pytest.mark.parametrize("damage,file", [
    (corrupt_weights, "model.safetensors"), (garbage_weights, "model.safetensors"),
    (drop("model.safetensors"), "model.safetensors"), (drop("config.json"), "config.json"),
    (drop("spm.model"), "spm.model"), (wrong_vocab, "spm.model"), (bad_json, "config.json"),
])
def test_damaged_checkpoint_gives_one_line_naming_the_file(tokenizer, tmp_path, damage, file):
    make_checkpoint(tokenizer, tmp_path / "ck")
    damage(tmp_path / "ck")
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(tmp_path / "ck")
    message = str(info.value)
    assert file in message and "\n" not in message


def test_missing_directory(tmp_path):
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        load_checkpoint(tmp_path / "nothing")


def test_weights_of_another_shape_are_refused(tokenizer, tmp_path):
    make_checkpoint(tokenizer, tmp_path / "ck")
    cfg = json.loads((tmp_path / "ck" / "config.json").read_text())
    cfg["model"]["d_ff"] = 48
    (tmp_path / "ck" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="model.safetensors"):
        load_checkpoint(tmp_path / "ck")


def test_a_save_that_fails_half_way_leaves_nothing_behind_and_says_why(tokenizer, tmp_path, monkeypatch):
    """A full disk while the weights are written (safetensors' own error): an OSError saying so, and no
    temporary directory left beside the checkpoints; the checkpoint that was there stays whole."""
    import errno

    from safetensors import SafetensorError

    from model.storage import checkpoint as module
    from tests.support import make_checkpoint
    make_checkpoint(tokenizer, tmp_path / "kept")
    before = sorted(p.name for p in tmp_path.iterdir())

    def full(*args, **kwargs):
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
    monkeypatch.setattr(module, "save_model", full)
    model = module.load_checkpoint(tmp_path / "kept").model
    tok = module.load_checkpoint(tmp_path / "kept").src_tokenizer
    for target in ("kept", "new"):
        with pytest.raises(OSError) as caught:
            module.save_checkpoint(tmp_path / target, model, tok, tok)
        assert caught.value.errno == errno.ENOSPC and "No space left" in caught.value.strerror
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert module.load_checkpoint(tmp_path / "kept").model is not None
