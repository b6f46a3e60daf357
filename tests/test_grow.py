"""model.grow: a deeper model from a trained one, its trained layers kept and its new ones near the identity."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from model.storage.checkpoint import load_checkpoint
from model.training.grow import grow, placement
from tests.support import ROOT, make_checkpoint, random_batch, tiny_model


@pytest.mark.parametrize("old,new", [(1, 1), (1, 4), (2, 3), (3, 4), (3, 6), (3, 7), (4, 5)])
def test_placement_keeps_every_trained_layer_in_order_and_starts_with_one(old, new):
    where = placement(old, new)
    assert len(where) == new and where[0] == 0
    assert [i for i in where if i is not None] == list(range(old))


def test_placement_refuses_to_shrink():
    with pytest.raises(ValueError, match="fewer layers"):
        placement(3, 2)


def _logits(model, src, tgt):
    with torch.no_grad():
        return model(src, tgt)


def trained_looking(model):
    """Move every LayerNorm off (1, 0), as training does, so the post-norm case is not trivially exact."""
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.05 * torch.randn(p.shape, generator=g))
    return model


def test_a_grown_pre_norm_model_computes_exactly_what_the_trained_one_did():
    model = trained_looking(tiny_model(40, seed=3, norm_first=True))
    src, tgt = random_batch(40, [7, 5]), random_batch(40, [6, 4], seed=1, bos=True)
    grown = grow(model, 4, 3).eval()
    assert (grown.cfg.n_encoder_layers, grown.cfg.n_decoder_layers) == (4, 3)
    torch.testing.assert_close(_logits(grown, src, tgt), _logits(model, src, tgt), atol=1e-5, rtol=1e-5)


def test_a_grown_post_norm_model_starts_close_to_the_trained_one_and_keeps_its_layers():
    src, tgt = random_batch(40, [7, 5]), random_batch(40, [6, 4], seed=1, bos=True)
    fresh = tiny_model(40, seed=3)                     # LayerNorms at (1, 0): LN(LN(x)) = LN(x), exact
    torch.testing.assert_close(_logits(grow(fresh, 4, 3).eval(), src, tgt), _logits(fresh, src, tgt),
                               atol=1e-4, rtol=1e-4)
    model = trained_looking(tiny_model(40, seed=3))
    grown = grow(model, 4, 3).eval()
    before, after = _logits(model, src, tgt).softmax(-1), _logits(grown, src, tgt).softmax(-1)
    assert (after - before).abs().max() < 0.05                              # close ...
    assert not torch.equal(after, before)                                   # ... not exact (LN renormalises)
    old_layers = dict(model.encoder.layers.named_parameters())
    for name, p in grown.encoder.layers.named_parameters():                 # layers 0, 1 of 2 -> 0, 2 of 4
        i, rest = name.split(".", 1)
        source = placement(len(model.encoder.layers), 4)[int(i)]
        if source is not None:
            assert torch.equal(p, old_layers[f"{source}.{rest}"]), name
        elif rest.startswith(("self_attn.w_o", "feed_forward.w_2")):
            assert not p.any(), name                                           # adds nothing to the residual
    assert torch.equal(grown.src_embed.lut.weight, model.src_embed.lut.weight)


def test_growing_leaves_the_trained_model_alone_and_the_grown_one_learns():
    model = tiny_model(40, seed=3)
    snapshot = {k: v.clone() for k, v in model.state_dict().items()}
    grown = grow(model, 3, 3).train()
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in snapshot.items())
    src, tgt = random_batch(40, [7, 5]), random_batch(40, [6, 4], seed=1, bos=True)
    loss = torch.nn.functional.cross_entropy(grown(src, tgt[:, :-1]).flatten(0, 1), tgt[:, 1:].flatten())
    loss.backward()
    new = grown.encoder.layers[1]                                             # a new layer
    assert new.self_attn.w_o.weight.grad.abs().sum() > 0 and new.feed_forward.w_2.weight.grad.abs().sum() > 0


def test_the_command_writes_a_checkpoint_that_loads_deeper(tokenizer, tmp_path):
    make_checkpoint(tokenizer, tmp_path / "small")
    run = subprocess.run([sys.executable, "-m", "model.grow", "--checkpoint", str(tmp_path / "small"),
                          "--encoder-layers", "3", "--decoder-layers", "2", "--out", str(tmp_path / "deep")],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr
    deep = load_checkpoint(tmp_path / "deep")
    assert (deep.model.cfg.n_encoder_layers, deep.model.cfg.n_decoder_layers) == (3, 2)
    assert "grown from" in deep.meta["grown_from"]
    again = subprocess.run([sys.executable, "-m", "model.grow", "--checkpoint", str(tmp_path / "small"),
                            "--encoder-layers", "1", "--decoder-layers", "1", "--out", str(tmp_path / "less")],
                           capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert again.returncode == 2 and "fewer layers" in again.stderr and "Traceback" not in again.stderr
