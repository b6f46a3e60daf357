"""The training lab: task generators, the paper's parts as switches, LabRun, the scheduler."""
from __future__ import annotations

import datetime
import multiprocessing
import random
import shutil
import subprocess
import sys
import threading
import time

import pytest
import torch

from model.inference.decoding import greedy_batch
from model.network.config import ModelConfig
from model.network.layers import EncoderLayer
from model.network.trace import Recording, Trace
from model.storage.checkpoint import load_checkpoint
from model.training import tasks
from model.training.lab import LabRun, LabSettings
from model.training.loop import Schedule, StepSettings, loss_and_tokens, own_predictions, train_step
from model.training.tasks import TaskSpec
from serving.lab_jobs import Scheduler
from tests.support import ROOT, random_batch, tiny_model

# A small reverse task that a 1+1-layer model learns in a few hundred steps (~3 s on one core).
SMALL = LabSettings(task=TaskSpec("reverse", 3, 5, 6), d_model=32, n_heads=2, n_layers=1, d_ff=64,
                    max_steps=400, eval_every=50, heldout=200, peak_lr=3e-3, warmup_steps=100, seed=0)


# ---- tasks --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["copy", "reverse", "sort"])
def test_letter_tasks_do_what_they_say(name):
    spec = TaskSpec(name, 2, 9, 7)
    pairs = tasks.sample(spec, 300, seed=1)
    assert len(pairs) == 300
    expected = {"copy": lambda s: s, "reverse": lambda s: s[::-1], "sort": sorted}[name]
    for src, tgt in pairs:
        assert 2 <= len(src) <= 9 and set(src) <= set("abcdefg")
        assert tgt == list(expected(src))
    assert len({len(s) for s, _ in pairs}) == 8           # every length occurs


def test_dates_convert_to_iso():
    for src, tgt in tasks.sample(TaskSpec("dates"), 300, seed=2):
        day = datetime.datetime.strptime(" ".join(src), "%B %d , %Y").date()
        assert "".join(tgt) == day.isoformat()
        assert 1950 <= day.year <= 2049
    assert tasks.date_words(datetime.date(2021, 3, 5)) == (["March", "5", ",", "2021"],
                                                          ["2021", "-", "03", "-", "05"])


@pytest.mark.parametrize("name", list(tasks.TASKS))
def test_the_task_tokenizer_knows_every_word(name):
    spec = TaskSpec(name)
    tok = tasks.tokenizer_for(spec)
    assert tok.special_ids == {"pad_id": 0, "unk_id": 1, "bos_id": 2, "eos_id": 3}
    assert tok.vocab_size == 4 + len(tasks.vocabulary(spec))
    for src, tgt in tasks.sample(spec, 100, seed=3):
        for words in (src, tgt):
            ids = tok.encode(tasks.text(words))
            assert len(ids) == len(words) and 1 not in ids
            assert tok.decode(ids) == tasks.text(words)
    assert tok.encode("zzz") == [1]


def test_held_out_sources_never_reach_training():
    run = LabRun(SMALL.changed(heldout=100))
    held = {tuple(p[0]) for p in run.heldout}
    batches = run.training_batches()
    for _ in range(20):
        src, _ = next(batches)
        for row in src.tolist():
            words = run.tokenizer.decode(row).split()
            assert tuple(words) not in held


def test_typed_dates_are_spaced_into_words():
    assert tasks.normalise(TaskSpec("dates"), "March 5, 2021") == "March 5 , 2021"
    assert tasks.normalise(TaskSpec("reverse"), " a  b c ") == "a b c"


# ---- the paper's parts as switches ---------------------------------------------------------------
def _encode(model, src):
    return model.encode(src)                                          # (B, S, D)


def test_without_positional_encoding_permuting_the_source_permutes_the_encoder_output():
    src = torch.tensor([[5, 9, 12, 7, 20, 3]])
    perm = torch.tensor([3, 0, 4, 2, 1, 5])
    for pe, equivariant in ((False, True), (True, False)):
        model = tiny_model(40, positional_encoding=pe)
        out, out_perm = _encode(model, src), _encode(model, src[:, perm])
        assert torch.allclose(out[:, perm], out_perm, atol=1e-5) == equivariant


def test_without_the_causal_mask_a_position_sees_later_target_tokens():
    src, tgt = random_batch(40, [6], seed=1), random_batch(40, [7], seed=2, bos=True)
    changed = tgt.clone()
    changed[0, -1] = 4 if tgt[0, -1] != 4 else 5
    for causal in (True, False):
        model = tiny_model(40, causal_mask=causal)
        first, second = model(src, tgt), model(src, changed)
        depends = not torch.allclose(first[:, :-1], second[:, :-1], atol=1e-6)
        assert depends == (not causal)


def test_without_scaling_scores_are_plain_dot_products_and_the_fast_path_agrees():
    src, tgt = random_batch(40, [6, 4], seed=3), random_batch(40, [5, 3], seed=4, bos=True)
    model = tiny_model(40, scale_attention=False)
    trace = Trace(Recording(scores=True, qkv=True))
    traced = model(src, tgt, trace)
    q, k = trace["encoder.0.self_attn.q"], trace["encoder.0.self_attn.k"]
    scores = trace["encoder.0.self_attn.scores"]
    visible = torch.isfinite(scores)
    assert torch.allclose(scores[visible], (q @ k.transpose(-2, -1))[visible], atol=1e-5)
    assert torch.allclose(model(src, tgt), traced, atol=1e-5)          # recording changes nothing
    scaled = tiny_model(40)
    assert not torch.allclose(scaled(src, tgt), traced, atol=1e-3)      # the switch changes the model


def test_without_residuals_a_layer_is_layernorm_of_its_sublayer_alone():
    cfg = ModelConfig(src_vocab_size=40, tgt_vocab_size=40, d_model=32, n_heads=4, d_ff=64, dropout=0.0,
                      residual=False)
    torch.manual_seed(0)
    layer = EncoderLayer(cfg).eval()
    x, mask = torch.randn(2, 5, 32), torch.ones(2, 1, 1, 5, dtype=torch.bool)
    h = layer.norm1(layer.self_attn(x, x, mask))
    assert torch.allclose(layer(x, mask, None, "encoder.0"), layer.norm2(layer.feed_forward(h)), atol=1e-6)
    layer.add.on = True
    assert not torch.allclose(layer(x, mask, None, "encoder.0"), layer.norm2(layer.feed_forward(h)), atol=1e-3)


def test_warm_up_off_starts_at_the_peak_and_decays_the_same():
    on, off = Schedule(peak=1e-3, warmup=100), Schedule(peak=1e-3, warmup=100, ramp=False)
    assert on.lr(1) == pytest.approx(1e-5) and off.lr(1) == pytest.approx(1e-3)
    for step in (100, 400, 2500):
        assert on.lr(step) == pytest.approx(off.lr(step))


def test_own_predictions_are_the_models_greedy_choices():
    model = tiny_model(40)
    src = random_batch(40, [6, 4, 5], seed=5)
    reference = random_batch(40, [6, 3, 5], seed=6, bos=True)           # (B, 6); row 1 padded after 3
    fed = own_predictions(model, src, reference, pad_id=0)
    greedy = greedy_batch(model, src, 5)
    for row, out, n in zip(fed.tolist(), greedy, (6, 3, 5)):
        assert row[0] == 2
        made = min(n - 1, len(out) + 1)                                  # greedy's tokens up to its EOS
        assert row[1:1 + made] == (out + [3])[:made]
        assert row[n:] == [0] * (6 - n)


def test_without_teacher_forcing_the_step_trains_on_the_models_own_input():
    torch.manual_seed(0)
    src, tgt = random_batch(40, [6, 5], seed=7), random_batch(40, [6, 6], seed=8, bos=True)
    losses = {}
    for teacher in (True, False):
        model = tiny_model(40)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        expect_input = None if teacher else own_predictions(model, src, tgt[:, :-1], 0)
        model.train()
        expected = float(loss_and_tokens(model, src, tgt, 0.0, 0, expect_input)[0].detach())
        losses[teacher], _ = train_step(model, opt, [(src, tgt)], 1e-3, StepSettings(0.0, teacher_forcing=teacher), 0)
        assert losses[teacher] == pytest.approx(expected, rel=1e-5)
    assert losses[True] != pytest.approx(losses[False])


def test_a_models_switches_survive_saving(tmp_path):
    run = LabRun(SMALL.changed(positional_encoding=False, causal_mask=False, max_steps=5))
    run.train()
    run.save(tmp_path / "lab")
    ckpt = load_checkpoint(tmp_path / "lab")
    assert ckpt.config.ablations == ["positional encoding", "causal mask"]
    src = torch.tensor([run.encode(run.example).src])
    tgt = torch.tensor([run.encode(run.example).tgt])
    assert torch.allclose(ckpt.model(src, tgt), run.checkpoint().model(src, tgt), atol=1e-5)
    assert "built without: positional encoding, causal mask" in (tmp_path / "lab" / "README.md").read_text()


# ---- LabRun -------------------------------------------------------------------------------------
def test_a_short_seeded_reverse_run_learns_the_task():
    """Seen here: 100 % of 200 held-out sequences after 300 steps (seed 0) and 250 (seed 1);
    asserted with a margin for other CPUs' arithmetic: 97 % within 400 steps."""
    run = LabRun(SMALL)
    run.train()
    assert max(p.seq_acc for p in run.history) >= 0.97, [(p.step, p.seq_acc) for p in run.history]
    assert run.step <= 400
    assert run.history[0].seq_acc < 0.05                                # it really learned it
    cross = run.snapshots[-1].attention["decoder.cross_attn"][-1].mean(axis=0)   # (T, S)
    n = len(run.example[0])
    # the reverse alignment: output position i (reading decoder input i) looks at source n-1-i
    assert [int(cross[i, :n].argmax()) for i in range(n)] == list(range(n - 1, -1, -1))


def test_stopping_ends_a_run_after_the_current_step():
    run = LabRun(SMALL.changed(max_steps=10_000))
    why = run.train(should_stop=lambda: run.step >= 7)
    assert (why, run.step, run.status) == ("stopped", 7, "stopped")
    assert run.history[-1].step == 7                                     # the last steps are measured


def test_every_run_has_a_time_cap():
    run = LabRun(SMALL.changed(max_steps=100_000, time_cap_s=1.0, stop_at=2.0))
    start = time.monotonic()
    assert run.train() == "time"
    assert 1.0 <= run.seconds and time.monotonic() - start < 5


# ---- the scheduler ------------------------------------------------------------------------------
class FakeRun:
    """Trains until stopped; counts how many are training at once."""
    lock, now, most = threading.Lock(), 0, 0

    def __init__(self, settings):
        self.settings = settings

    def train(self, should_stop):
        with FakeRun.lock:
            FakeRun.now += 1
            FakeRun.most = max(FakeRun.most, FakeRun.now)
        try:
            while not should_stop():
                time.sleep(0.01)
            return "stopped"
        finally:
            with FakeRun.lock:
                FakeRun.now -= 1


def fake_runner(job, should_stop):
    return FakeRun(job.settings).train(should_stop)


def _wait(condition, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_at_most_k_runs_train_and_the_rest_wait_in_order():
    FakeRun.most = 0
    sched = Scheduler(slots=2, runner=fake_runner)
    jobs = [sched.submit(f"s{i}", SMALL) for i in range(5)]
    _wait(lambda: sched.training == 2)
    assert [sched.position(j) for j in jobs] == [0, 0, 1, 2, 3]
    assert sched.submit("s3", SMALL) is jobs[3]                       # asking again: the same job
    sched.stop(jobs[0])
    _wait(lambda: jobs[2].state == "training")
    assert [sched.position(j) for j in jobs[3:]] == [1, 2]
    sched.stop(jobs[3])                                               # leaves the queue at once
    assert jobs[3].ended == "stopped" and sched.position(jobs[4]) == 1
    for j in jobs:
        sched.stop(j)
    _wait(lambda: all(not j.active for j in jobs))
    assert FakeRun.most == 2
    again = sched.submit("s0", SMALL)                                 # a finished owner may train again
    assert again is not jobs[0]
    sched.stop(again)


def test_a_closed_tab_stops_its_run_and_leaves_the_queue():
    alive = {"a": True, "b": True, "c": True}
    sched = Scheduler(slots=1, alive=lambda owner: alive[owner], runner=fake_runner)
    a, b, c = (sched.submit(o, SMALL) for o in "abc")
    _wait(lambda: a.state == "training")
    alive["b"] = False                                                 # b's tab closes while it waits
    _wait(lambda: not b.active)
    assert b.ended == "left" and sched.position(c) == 1
    alive["a"] = False                                                 # a's tab closes while it trains
    _wait(lambda: not a.active, timeout=3)
    assert a.ended == "left"
    _wait(lambda: c.state == "training")
    sched.stop(c)


def test_a_failing_run_is_reported_and_frees_its_slot():
    def broken(job, should_stop):
        raise ValueError("no such thing\nsecond line")
    sched = Scheduler(slots=1, runner=broken)
    job = sched.submit("x", SMALL)
    _wait(lambda: not job.active)
    assert job.error == "ValueError: no such thing" and job.ended == "failed" and sched.training == 0


def test_runs_train_in_their_own_processes_and_share_nothing():
    sched = Scheduler(slots=2)                                         # the app's runner: a child process each
    a = sched.submit("a", SMALL.changed(max_steps=60, seed=1))
    b = sched.submit("b", SMALL.changed(max_steps=60, seed=2, task=TaskSpec("sort", 3, 5, 6)))
    _wait(lambda: not a.active and not b.active, timeout=90)
    assert a.error is None and b.error is None and a.ended == b.ended == "steps"
    assert a.run is not b.run and a.run.model is not b.run.model
    assert a.run.settings.task.name == "reverse" and b.run.settings.task.name == "sort"
    assert [p.step for p in a.run.history] == [0, 50, 60] and a.run.step == 60
    for job in (a, b):                                   # the trained weights came back from the child
        last = job.run.history[-1]
        assert job.run.evaluate(job.run.heldout)[1:] == pytest.approx((last.token_acc, last.seq_acc))
        assert job.run.history[0].seq_acc != last.seq_acc or last.token_acc != job.run.history[0].token_acc


def test_a_stopped_process_run_ends_promptly():
    """Measured: 0.25-0.32 s from Stop to the run shown as stopped (BENCHMARKS.md, session 10);
    here with a margin a busy machine cannot break (the process's shutdown, waited for in the
    background, took 1.2-1.5 s more)."""
    sched = Scheduler(slots=1)
    job = sched.submit("a", SMALL.changed(max_steps=100_000, stop_at=2.0))
    _wait(lambda: job.run is not None and job.run.step > 0, timeout=60)
    stopped = time.monotonic()
    sched.stop(job)
    _wait(lambda: not job.active, timeout=5)
    assert time.monotonic() - stopped < 5 and job.ended == "stopped" and job.run.history[-1].step == job.run.step
    # the training process is waited for in the background (its shutdown took another second), and does end
    _wait(lambda: not [c for c in multiprocessing.active_children() if c.name == f"lab-{job.id}"], timeout=10)


def test_an_error_in_the_training_process_reaches_its_owner():
    sched = Scheduler(slots=1)
    job = sched.submit("a", SMALL.changed(task=TaskSpec("reverse", 1, 1, 2), heldout=10))   # 2 sources, both held out
    _wait(lambda: not job.active, timeout=60)
    assert job.ended == "failed" and job.error == "ValueError: every possible source is held out: make the task larger"


def test_training_examples_are_random_but_seeded():
    first = next(LabRun(SMALL).training_batches())[0]
    assert torch.equal(first, next(LabRun(SMALL).training_batches())[0])
    assert not torch.equal(first, next(LabRun(SMALL.changed(seed=1)).training_batches())[0])
    random.seed(0)   # the global generator plays no part


def test_processes_sharing_the_machine_slots_train_one_at_a_time(tmp_path):
    """Two schedulers (as two app processes under make serve) with one machine-wide slot."""
    from serving.lab_jobs import MachineSlots
    FakeRun.most = 0
    first, second = (Scheduler(slots=1, runner=fake_runner, machine=MachineSlots(tmp_path, 1)) for _ in range(2))
    a = first.submit("a", SMALL)
    _wait(lambda: a.state == "training")
    b = second.submit("b", SMALL)
    time.sleep(1.2)                                                   # two retries of the watcher
    assert b.state == "queued" and second.position(b) == 1 and FakeRun.most == 1
    first.stop(a)
    _wait(lambda: b.state == "training")
    second.stop(b)
    _wait(lambda: not b.active)
    assert FakeRun.most == 1


# ---- the page -----------------------------------------------------------------------------------
def test_the_lab_page_trains_replays_decodes_and_saves(app_checkpoints, tmp_path, monkeypatch):

    from streamlit.testing.v1 import AppTest

    from tests.support import APP, goto
    root = tmp_path / "checkpoints"
    shutil.copytree(app_checkpoints, root)
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(root))
    at = AppTest.from_file(APP, default_timeout=60).run()
    goto(at, "lab")
    assert not at.exception
    for key, value in (("lab_d_model", 32), ("lab_heads", 2), ("lab_d_ff", 64)):
        at.selectbox(key=key).set_value(value).run()
    at.slider(key="lab_layers").set_value(1).run()
    at.slider(key="lab_steps").set_value(100).run()
    at.slider(key="lab_lengths").set_value((3, 5)).run()
    at.button(key="lab_train").click().run()
    assert at.button(key="lab_train").disabled and not at.button(key="lab_stop").disabled
    assert at.selectbox(key="lab_d_model").disabled                   # settings locked while it trains
    _wait(lambda: not at.session_state["lab_job"].active, timeout=120)
    at.run()
    assert not at.exception, at.exception
    assert any("reached its step limit: step 100 of 100" in s.value for s in at.success)
    job = at.session_state["lab_job"]
    assert job.run.settings.d_model == 32 and job.run.cfg.n_encoder_layers == 1
    assert at.select_slider(key="lab_snapshot").options == ["0", "50", "100"]
    at.select_slider(key="lab_snapshot").set_value(50).run()
    assert any("at step 50" in m.value for m in at.markdown)
    assert any(m.value.startswith("**Step 0**") for m in at.markdown)       # the step-through view
    at.text_input(key="lab_text").set_value("a b c").run()
    assert not at.exception and any("**Output**" in m.value for m in at.markdown)
    at.text_input(key="lab_save_name").set_value("lab-test").run()
    at.button(key="lab_save").click().run()
    assert (root / "lab-test" / "config.json").is_file() and any("Saved as" in s.value for s in at.success)
    at.button(key="lab_save").click().run()
    assert any("exists already" in e.value for e in at.error)
    at.selectbox(key="checkpoint").set_value("lab-test").run()          # every other page opens it
    goto(at, "explore")
    at.text_input(key="text").set_value("a b c d").run()
    assert not at.exception
    drawn = [el for el in at.get("bidi_component") if el.proto.component_name.endswith("attention_charts")]
    assert len(drawn) == 2                                             # the explorer's charts, from its numbers


def test_the_download_is_a_loadable_checkpoint(tmp_path):
    import io
    import zipfile

    from app.lab_models import zipped as _zipped
    run = LabRun(SMALL.changed(max_steps=3))
    run.train()
    with zipfile.ZipFile(io.BytesIO(_zipped(run, "my-lab"))) as zf:
        names = set(zf.namelist())
        zf.extractall(tmp_path)
    assert {"my-lab/config.json", "my-lab/model.safetensors", "my-lab/spm.model", "my-lab/README.md"} <= names
    assert load_checkpoint(tmp_path / "my-lab").config == run.cfg


def test_another_session_sees_nothing_of_a_run(app_checkpoints, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from tests.support import APP, goto
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    mine, theirs = (goto(AppTest.from_file(APP, default_timeout=60).run(), "lab") for _ in range(2))
    mine.slider(key="lab_steps").set_value(50).run()
    mine.selectbox(key="lab_d_model").set_value(16).run()
    mine.button(key="lab_train").click().run()
    _wait(lambda: not mine.session_state["lab_job"].active, timeout=120)
    mine.run()
    theirs.run()
    assert any("step limit" in s.value for s in mine.success)
    assert "lab_job" not in theirs.session_state and not theirs.success and not theirs.get("plotly_chart")
    assert not theirs.button(key="lab_train").disabled and theirs.selectbox(key="lab_d_model").value == 64


def test_a_run_keeps_training_while_its_owner_visits_other_pages(app_checkpoints, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from tests.support import APP, goto
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(app_checkpoints))
    at = goto(AppTest.from_file(APP, default_timeout=60).run(), "lab")
    at.selectbox(key="lab_d_model").set_value(16).run()
    at.slider(key="lab_steps").set_value(400).run()
    at.button(key="lab_train").click().run()
    job = at.session_state["lab_job"]
    _wait(lambda: job.run is not None and job.run.step > 0, timeout=60)
    goto(at, "explore")
    goto(at, "card")
    step_away = job.run.step
    _wait(lambda: not job.active or job.run.step > step_away + 20, timeout=60)   # it went on without the page
    goto(at, "lab")
    assert at.session_state["lab_job"] is job and not at.exception
    assert at.selectbox(key="lab_d_model").value == 16
    if not at.button(key="lab_stop").disabled:
        at.button(key="lab_stop").click().run()
    _wait(lambda: not job.active, timeout=30)


def test_a_spawned_training_process_does_not_run_the_app_again():
    """The lab trains in a spawned process, which imports the parent's main script as __mp_main__:
    app/main.py must then draw nothing (it once ran the whole app there, in bare mode, writing a
    warning per element to the server's output)."""
    done = subprocess.run([sys.executable, "-c", "import runpy; runpy.run_path('app/main.py', run_name='__mp_main__')"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "ScriptRunContext" not in done.stderr and "ScriptRunContext" not in done.stdout


def _trained_lab(at) -> None:
    """A tiny lab run, trained to its end, in the session `at` (on the lab page)."""
    from tests.support import goto
    goto(at, "lab")
    at.selectbox(key="lab_d_model").set_value(16).run()
    at.slider(key="lab_layers").set_value(1).run()
    at.slider(key="lab_steps").set_value(50).run()
    at.button(key="lab_train").click().run()
    _wait(lambda: not at.session_state["lab_job"].active, timeout=120)
    at.run()


def test_on_a_class_server_a_lab_model_is_its_students_until_the_teacher_shows_it(app_checkpoints, tmp_path,
                                                                                    monkeypatch):
    """Issue 42, item 1: under `make serve` a saved lab model is the student's own (not in the checkpoints
    folder, not in another student's list, not opened by another's link), bounded per student, and the
    teacher of the class sees it and shows it to the class."""
    from streamlit.testing.v1 import AppTest

    from tests.support import APP
    root = tmp_path / "checkpoints"
    shutil.copytree(app_checkpoints, root)
    monkeypatch.setenv("TRANSFORMER_CHECKPOINTS", str(root))
    monkeypatch.setenv("TRANSFORMER_LAB_OWNED", "1")
    monkeypatch.setenv("TRANSFORMER_LAB_PER_STUDENT", "1")

    def session(**link):
        at = AppTest.from_file(APP, default_timeout=120)
        for k, v in link.items():
            at.query_params[k] = v
        return at.run()

    teacher = session()
    teacher.button(key="class-start").click().run()
    code = teacher.session_state["class"].code
    ana, ben = session(**{"class": code}), session(**{"class": code})
    _trained_lab(ana)
    ana.text_input(key="lab_save_name").set_value("ana-model").run()
    ana.button(key="lab_save").click().run()
    assert not ana.exception and any("yours" in s.value for s in ana.success)
    assert not (root / "ana-model").exists()                              # not in everybody's folder
    ana.run()
    assert "ana-model" in ana.sidebar.selectbox(key="checkpoint").options
    ana.text_input(key="lab_save_name").set_value("ana-two").run()
    ana.button(key="lab_save").click().run()
    assert any("You have 1 saved lab models" in e.value for e in ana.error)  # the bound, said
    ben.run()
    assert "ana-model" not in ben.sidebar.selectbox(key="checkpoint").options
    eve = session(checkpoint="ana-model")                                  # a link naming it: not hers
    assert eve.session_state["checkpoint"] != "ana-model" and any("names a model" in w.value for w in eve.warning)
    teacher.run()
    seat = ana.session_state["class"].student
    publish = teacher.sidebar.toggle(key=f"lab_publish_{seat}_ana-model")
    assert publish.value is False
    publish.set_value(True).run()
    ben.run()
    assert "ana-model" in ben.sidebar.selectbox(key="checkpoint").options  # shown to the class
    assert "ana-model" not in session().sidebar.selectbox(key="checkpoint").options   # not outside it
