"""model/training/loop.py (the one training step and loop) and the weight files train.py writes."""
from __future__ import annotations

import copy

import pytest
import torch

from model.network.batch import Example, collate
from model.storage.checkpoint import CheckpointError, load_weights, save_weights
from model.training import choice
from model.training.loop import NonFiniteLoss, Progress, Schedule, StepSettings, train_epoch, train_step
from tests.support import tiny_model

PAD = 0


def examples(n: int, seed: int = 0) -> list[Example]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        s, t = int(torch.randint(2, 7, (1,), generator=g)), int(torch.randint(2, 7, (1,), generator=g))
        out.append(Example(torch.randint(4, 40, (s,), generator=g).tolist() + [3],
                           [2] + torch.randint(4, 40, (t,), generator=g).tolist() + [3]))
    return out


def sgd(model: torch.nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=0.1)


def test_accumulating_two_halves_is_one_step_over_the_whole_batch():
    data = examples(8)
    a, b = tiny_model(), tiny_model()
    settings = StepSettings(label_smoothing=0.1, clip=0.0)
    loss_a, tok_a = train_step(a, sgd(a), [collate(data, PAD)], 0.1, settings, PAD)
    loss_b, tok_b = train_step(b, sgd(b), [collate(data[:3], PAD), collate(data[3:], PAD)], 0.1, settings, PAD)
    assert tok_a == tok_b == sum(len(e.tgt) - 1 for e in data)
    assert loss_a == pytest.approx(loss_b, rel=1e-5)
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.allclose(p, q, atol=1e-6), name


def test_with_the_host_running_ahead_the_loss_stays_an_unread_tensor_and_the_step_is_the_same():
    """sync=False (train.py on a GPU): the same step, its loss a 0-dim tensor equal to the read one."""
    data = examples(8, seed=3)
    a, b = tiny_model(), tiny_model()
    batches = [collate(data[:5], PAD), collate(data[5:], PAD)]
    read, tok_a = train_step(a, sgd(a), batches, 0.1, StepSettings(), PAD)
    unread, tok_b = train_step(b, sgd(b), batches, 0.1, StepSettings(), PAD, sync=False)
    assert isinstance(read, float) and isinstance(unread, torch.Tensor) and unread.dim() == 0
    assert tok_a == tok_b and float(unread) == pytest.approx(read, rel=1e-6)
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)


def test_a_non_finite_loss_takes_no_step():
    model = tiny_model()
    with torch.no_grad():
        model.src_embed.lut.weight[5] = float("nan")
    before = copy.deepcopy(model.state_dict())
    batch = collate([Example([5, 3], [2, 6, 3])], PAD)
    with pytest.raises(NonFiniteLoss):
        train_step(model, sgd(model), [batch], 0.1, StepSettings(), PAD)
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) or before[k].isnan().any() for k in before)
    assert all(p.grad is None for p in model.parameters())


def test_the_epoch_loop_counts_steps_and_stops_when_told():
    seen: list[list[list[int]]] = []

    def take_step(group):
        seen.append(list(group))
        return 1.0, 10

    batches = [[0], [1], [2], [3], [4]]
    p = Progress()
    assert train_epoch(batches, p, take_step, accum=2, should_stop=lambda: p.step >= 2) is True
    assert (p.step, p.batch_in_epoch) == (2, 4) and seen == [[[0], [1]], [[2], [3]]]
    assert train_epoch(batches, p, take_step, accum=2) is False     # resumes where it stopped
    assert (p.step, p.batch_in_epoch) == (3, 0) and seen[-1] == [[4]]


def test_the_schedule_is_warmup_then_inverse_sqrt_then_cooldown():
    s = Schedule(peak=1e-3, warmup=100, epochs=10, cooldown=2)
    assert s.lr(50) == pytest.approx(5e-4) and s.lr(100) == pytest.approx(1e-3) and s.lr(400) == pytest.approx(5e-4)
    assert s.lr(400, epochs_done=9.0) == pytest.approx(2.5e-4) and s.lr(400, epochs_done=10) == 0


def test_epoch_weights_average_strictly_and_keep_the_tie(tmp_path):
    a, b = tiny_model(seed=1), tiny_model(seed=2)
    save_weights(tmp_path / "epoch-1.safetensors", a)
    save_weights(tmp_path / "epoch-2.safetensors", b)
    avg = choice.average_epochs(a.cfg, tmp_path, 2, 2)
    for (name, p), q, r in zip(avg.named_parameters(), a.parameters(), b.parameters()):
        assert torch.allclose(p, (q + r) / 2, atol=1e-7), name
    assert avg.generator.weight is avg.src_embed.lut.weight              # still one tensor
    with pytest.raises(CheckpointError, match="epoch-1.safetensors"):
        load_weights(tmp_path / "epoch-1.safetensors", a.cfg.replace(d_ff=a.cfg.d_ff * 2))


def test_special_ids_come_from_the_tokenizer_once(tokenizer):
    assert tokenizer.special_ids == {"pad_id": 0, "unk_id": 1, "bos_id": 2, "eos_id": 3}
