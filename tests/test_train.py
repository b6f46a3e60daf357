"""train.py end to end on a synthetic reversal task made here, resume, torchrun, data errors."""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from model.commands import train
from model.inference.options import DecodeOptions
from model.inference.pipeline import translate
from model.storage.checkpoint import load_checkpoint
from model.training import loop as training
from model.training import run, setup
from tests.support import MULTI30K, ROOT, base_args, write_reverse_task
from tests.support import REVERSE_WORDS as WORDS


@pytest.mark.early
def test_learns_to_reverse_and_writes_a_checkpoint(tmp_path):
    data = tmp_path / "data"
    write_reverse_task(data)
    out = tmp_path / "ck"
    assert train.main(base_args(data, out, "--epochs", "9", "--dropout", "0.0", "--average-last", "3")) == 0
    ckpt = load_checkpoint(out)
    log = [line for line in (out / "training_log.jsonl").read_text().splitlines() if line]
    assert len(log) == 9
    records = [json.loads(line) for line in log]
    assert records[-1]["train_loss"] < 1.2          # label smoothing 0.1 keeps it above ~0.6
    assert records[-1]["val_loss"] < records[0]["val_loss"]
    assert {"step", "epoch", "val_bleu", "val_chrf", "tokens_per_s", "lr", "wall_time_s"} <= set(records[-1])
    # held-out examples (a different seed): mostly exactly reversed
    rng = random.Random(100)                        # not the training seed
    held_out = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6))) for _ in range(30)]
    outputs = translate(ckpt, held_out, DecodeOptions("greedy"))
    correct = sum(o == " ".join(h.split()[::-1]) for o, h in zip(outputs, held_out))
    assert correct >= 27, list(zip(held_out, outputs))[:5]
    snapshots = json.loads((out / "attention_snapshots.json").read_text())
    assert [s["epoch"] for s in snapshots] == list(range(1, 10))
    assert ckpt.meta["selected"] in ("best epoch", "average of last 3 epochs")
    card = (out / "README.md").read_text()
    assert "| 9 |" in card and "parameters" in card and "Not evaluated" in card


def test_resume_ends_where_an_uninterrupted_run_ends(tmp_path):
    data = tmp_path / "data"
    write_reverse_task(data, n_train=800)
    common = ["--epochs", "3", "--dropout", "0.1", "--cooldown-epochs", "2.5"]   # lr depends on the epoch position
    assert train.main(base_args(data, tmp_path / "a", *common, "--max-steps", "14")) == 0
    assert train.main(base_args(data, tmp_path / "b", *common, "--max-steps", "5")) == 0
    assert train.main(["--resume", str(tmp_path / "b"), "--max-steps", "14", "--no-progress"]) == 0
    first = json.loads((tmp_path / "a" / "training_log.jsonl").read_text().splitlines()[0])
    assert first["epoch"] == 1 and first["step"] < 14       # the cooldown was on: 1 of 3 epochs done, 2 of 2.5 left
    assert first["lr"] == pytest.approx(training.learning_rate(first["step"], 3e-3, 60) * 0.8)
    a = load_file(str(tmp_path / "a.work" / "last" / "model.safetensors"))
    b = load_file(str(tmp_path / "b.work" / "last" / "model.safetensors"))
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_a_killed_run_resumes_from_its_last_periodic_save(tmp_path, monkeypatch, capsys):
    """--save-every writes the full state within an epoch: a run that dies between two saves
    (here: its state copied aside at step 6, as a machine restart would leave it) resumes from
    that save and ends with the weights of a run that was never stopped."""
    data = tmp_path / "data"
    write_reverse_task(data, n_train=800)
    common = ["--epochs", "2", "--dropout", "0.1", "--cooldown-epochs", "1.5"]
    assert train.main(base_args(data, tmp_path / "a", *common, "--max-steps", "12")) == 0
    saved_at: list[int] = []
    real_save = run.Trainer.save_state

    def save_and_copy(self: run.Trainer, start: float) -> None:
        real_save(self, start)
        saved_at.append(self.progress.step)
        if self.progress.step == 6:                  # what a kill after step 6 leaves on disk
            shutil.copytree(self.work / "last", tmp_path / "at-6")
    monkeypatch.setattr(run.Trainer, "save_state", save_and_copy)
    monkeypatch.setattr(run.time, "time", _ticking_clock())     # one minute per call: a save every step
    assert train.main(base_args(data, tmp_path / "b", *common, "--max-steps", "9", "--save-every", "0.5",
                                "--log-every", "0.5")) == 0
    assert 6 in saved_at and len(saved_at) >= 6, saved_at          # saved within the epoch, step after step
    assert "epoch 1/2 batch" in capsys.readouterr().err               # the progress line for a log file
    monkeypatch.undo()
    killed = tmp_path / "b.work" / "last"
    shutil.rmtree(killed)
    shutil.copytree(tmp_path / "at-6", killed)
    assert json.loads((killed / "progress.json").read_text())["step"] == 6
    assert train.main(["--resume", str(tmp_path / "b"), "--max-steps", "12", "--no-progress"]) == 0
    a = load_file(str(tmp_path / "a.work" / "last" / "model.safetensors"))
    b = load_file(str(tmp_path / "b.work" / "last" / "model.safetensors"))
    for k in a:
        assert torch.equal(a[k], b[k]), k


def _ticking_clock():
    now = [1_000_000.0]

    def tick() -> float:
        now[0] += 60.0
        return now[0]
    return tick


def test_init_from_continues_a_finished_model_with_its_counts_log_and_a_new_ramp(tmp_path):
    data = tmp_path / "data"
    write_reverse_task(data, n_train=800)
    first = tmp_path / "first"
    assert train.main(base_args(data, first, "--epochs", "2", "--half")) == 0
    before = load_checkpoint(first)
    out = tmp_path / "more"
    assert train.main(["--data", str(data), "--src", "src", "--tgt", "tgt", "--init-from", str(first),
                       "--epochs", "3", "--lr", "3e-3", "--warmup", "60", "--rewarm", "10", "--out", str(out),
                       "--no-progress", "--threads", "1"]) == 0
    log = [json.loads(line) for line in (out / "training_log.jsonl").read_text().splitlines() if line]
    assert [r["epoch"] for r in log] == [1, 2, 3]                 # the first run's two epochs, then one more
    steps_before = before.meta["steps"]
    assert log[2]["step"] > steps_before == log[1]["step"]
    assert log[2]["wall_time_s"] > log[1]["wall_time_s"]          # time counts on from the first run
    after = load_checkpoint(out)
    assert after.config == before.config and after.src_tokenizer.proto == before.src_tokenizer.proto
    assert not torch.equal(after.model.src_embed.lut.weight, before.model.src_embed.lut.weight)   # it trained
    assert after.meta["epochs"] == 3
    card = (out / "README.md").read_text()
    assert "in two parts: epochs 1-2" in card and "epochs 3-3: continued from those weights with `--init-from" in card
    assert "trained on `--data" not in card                      # the same data as the first part
    s = training.Schedule(peak=3e-3, warmup=60, restart=steps_before, rewarm=10)
    assert s.lr(steps_before + 5) == pytest.approx(0.5 * training.learning_rate(steps_before + 5, 3e-3, 60))
    assert s.lr(steps_before + 10) == pytest.approx(training.learning_rate(steps_before + 10, 3e-3, 60))


def test_init_from_may_change_the_dropout_rate_and_nothing_else_of_the_shape(tmp_path):
    data = tmp_path / "data"
    write_reverse_task(data, n_train=300)
    first = tmp_path / "first"
    assert train.main(base_args(data, first, "--epochs", "1")) == 0
    before = load_checkpoint(first)
    out, other = tmp_path / "more", tmp_path / "other-data"
    write_reverse_task(other, n_train=300, seed=1)
    assert train.main(["--data", str(other), "--data-note", "another draw of the task", "--src", "src",
                       "--tgt", "tgt", "--init-from", str(first), "--dropout", "0.3", "--d-model", "64",
                       "--epochs", "2", "--out", str(out), "--no-progress", "--threads", "1"]) == 0
    assert f"trained on `--data {other}`: another draw of the task" in (out / "README.md").read_text()
    after = load_checkpoint(out)
    assert after.config.dropout == 0.3 != before.config.dropout
    assert replace(after.config, dropout=before.config.dropout) == before.config     # --d-model ignored
    dropouts = {m.p for m in after.model.modules() if isinstance(m, torch.nn.Dropout)}
    assert dropouts == {0.3} and {m.dropout for m in after.model.modules() if hasattr(m, "n_heads")} == {0.3}
    same = setup.with_dropout(before.model, before.config.dropout)
    assert same is before.model
    changed = setup.with_dropout(before.model, 0.5)
    assert all(torch.equal(a, b) for a, b in zip(changed.state_dict().values(), before.model.state_dict().values()))


@pytest.mark.early
def test_torchrun_two_processes_keep_identical_replicas(tmp_path):
    data = tmp_path / "data"
    write_reverse_task(data, n_train=400)
    torchrun = Path(sys.executable).with_name("torchrun")
    cmd = [str(torchrun), "--nproc_per_node=2", "--master_port", str(29500 + os.getpid() % 1000),
           str(ROOT / "train.py"), *base_args(data, tmp_path / "ddp", "--max-steps", "4")]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=240)
    # both ends of what the ranks said: once in a full run here (session 30) rank 1 aborted ("terminate called
    # without an active exception", SIGABRT) and the tail alone did not show when
    said = [line for line in done.stderr.splitlines() if "Traceback" in line or "terminate" in line or "step" in line]
    assert done.returncode == 0, "\n".join(said[:20]) + "\n...\n" + done.stderr[-2500:]
    assert "replica check: 2 processes hold identical weights" in done.stderr


def test_mismatched_line_counts_are_named(tmp_path, capsys):
    data = tmp_path / "data"
    write_reverse_task(data, n_train=50)
    (data / "train.tgt").write_text("only one line\n")
    assert train.main(base_args(data, tmp_path / "x")) == 2
    err = capsys.readouterr().err
    assert "train.src has 50 lines but" in err and "train.tgt has 1" in err


def test_missing_split_is_named(tmp_path, capsys):
    data = tmp_path / "data"
    write_reverse_task(data, n_train=50)
    (data / "val.src").unlink()
    assert train.main(base_args(data, tmp_path / "x")) == 2
    assert "val.src" in capsys.readouterr().err


def test_native_bf16_is_read_from_the_cpu_flags(tmp_path):
    (tmp_path / "amd").write_text("flags\t\t: fpu avx f16c avx2\n")
    (tmp_path / "xeon").write_text("flags\t\t: fpu avx2 avx512f avx512_bf16 amx_tile\n")
    assert setup.cpu_has_native_bf16(tmp_path / "amd") is False
    assert setup.cpu_has_native_bf16(tmp_path / "xeon") is True
    assert setup.cpu_has_native_bf16(tmp_path / "missing") is None


def test_learning_rate_schedule():
    assert training.learning_rate(300, 1e-3, 600) == pytest.approx(5e-4)
    assert training.learning_rate(600, 1e-3, 600) == pytest.approx(1e-3)
    assert training.learning_rate(2400, 1e-3, 600) == pytest.approx(5e-4)


def test_cooldown_factor():
    assert training.cooldown_factor(3.0, 10, 0) == 1.0            # off: the paper's schedule alone
    assert training.cooldown_factor(7.0, 10, 2) == 1.0            # before the last 2 epochs
    assert training.cooldown_factor(8.0, 10, 2) == 1.0
    assert training.cooldown_factor(9.0, 10, 2) == pytest.approx(0.5)
    assert training.cooldown_factor(9.9, 10, 2) == pytest.approx(0.05)
    assert training.cooldown_factor(10.0, 10, 2) == 0.0


@pytest.mark.skipif(not MULTI30K.is_dir(), reason=f"Multi30K not found at {MULTI30K}")
def test_reads_multi30k_gz():
    from model.training.data import read_parallel
    src, tgt = read_parallel(MULTI30K, "val", "en", "de")
    assert len(src) == len(tgt) == 1014 and src[0] and tgt[0]
