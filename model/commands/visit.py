"""A whole visit to a lent GPU in one command: the GPU tests, training speed (ours against
nn.Transformer; the real loop's step against a fixed-shape one, profiled), a teacher per direction
trained on every pair, the teachers' translations of every training source and monolingual sentence
(sequence-level distillation, back-translation), the shipped students trained on them, and everything
packed for the way back (issue 52).

    python -m model.commands.visit bundle --to gpu-bundle          # here, before the visit (~10 MB)
    python -m model.commands.visit run --bundle gpu-bundle --out "$OUT" --minutes 8.5   # there
    python -m model.commands.visit run --bundle B --out O --device cpu --tiny --students-from C   # tests

The machine there has PyTorch with CUDA, sentencepiece, sacrebleu, safetensors and no network: nothing
is installed, the checkout runs as it is (PYTHONPATH=.). Every stage has a deadline taken from
--minutes, so the command ends in time even when a stage is slower than planned; a stage that fails is
logged and the next goes on with what there is. What comes back (at most 8 files of < 16 MB):
report.tar.gz (logs, results.json, the teachers' training logs and cards, a figure), distill-en-de.txt.xz
and distill-de-en.txt.xz (corpus and teacher's translation, one line per source sentence in the bundle's
order: `model.training.distillation.read_compact` puts the sources back), students.tar.part-NN (the two
students' checkpoint directories; `cat students.tar.part-* | tar x`).
"""
from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

from model.commands.registry import prog
from model.training.distillation import (
    DIRECTIONS,
    PAIRS,
    PART_BYTES,
    compact,
    make_bundle,
    one_field,
    pairs,
    real_pairs,
    sources,
    split_file,
    student_pairs,
    unpack_distilled,
    val_pairs,
    write_dir,
)

ROOT = Path(__file__).resolve().parents[2]
STAGES = ("tests", "speed", "loop", "teachers", "distill", "students")
EXPANDABLE = "expandable_segments:True"
# ---- the run's log ------------------------------------------------------------------------------
class Log:
    def __init__(self, path: Path) -> None:
        self.path, self.t0 = path, time.time()
        path.parent.mkdir(parents=True, exist_ok=True)

    def __call__(self, message: str) -> None:
        line = f"[{time.time() - self.t0:6.1f}s] {message}"
        print(line, flush=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def run_logged(cmd: list[str], log_path: Path, timeout: float, extra_env: dict[str, str] | None = None
               ) -> subprocess.Popen:
    """Start cmd with its output in log_path; the caller waits (bounded by `timeout`, see wait_all)."""
    f = open(log_path, "w", encoding="utf-8")
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, PYTHONPATH=path, PYTHONUNBUFFERED="1", **(extra_env or {}))
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, env=env)
    proc.deadline = time.time() + timeout  # type: ignore[attr-defined]
    return proc


def run_all(jobs: list[tuple[list[str], Path, dict[str, str]]], seconds: float, serial: bool = False) -> list[int]:
    """Run (command, log, environment) jobs, all at once (a GPU shared by both directions) or one after
    another (--tiny: the suite's two cores are shared with the other tests), within `seconds` in all;
    their exit codes (-9: stopped at the deadline)."""
    if not serial:
        return wait_all([run_logged(cmd, path, seconds, env) for cmd, path, env in jobs])
    end, codes = time.time() + seconds, []
    for cmd, path, env in jobs:
        codes += wait_all([run_logged(cmd, path, max(1.0, end - time.time()), env)])
    return codes


def wait_all(procs: list[subprocess.Popen]) -> list[int]:
    """Wait for each process until its deadline; a late one is stopped (SIGTERM, then SIGKILL)."""
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(1.0, p.deadline - time.time())))  # type: ignore[attr-defined]
        except subprocess.TimeoutExpired:
            p.terminate()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            codes.append(-9)
    return codes


# ---- the stages ------------------------------------------------------------------------------------
def stage_tests(a: argparse.Namespace, log: Log, logs: Path, seconds: float) -> dict[str, Any]:
    if a.skip_tests:
        return {"skipped": True}
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "--noconftest", "-p", "no:cacheprovider",
           "--tb=short", "tests/test_gpu.py"]
    proc = run_logged(cmd, logs / "gpu-tests.log", seconds)
    code = wait_all([proc])[0]
    lines = (logs / "gpu-tests.log").read_text(errors="replace").strip().splitlines()
    tail = lines[-1:]
    log(f"gpu tests: exit {code}: {tail}")
    if code != 0:
        said = [line for line in lines if line.startswith(("E ", "FAILED", "tests/"))]
        log("gpu tests said:\n" + "\n".join(said)[:3000])
    return {"exit": code, "summary": tail}


def stage_speed(a: argparse.Namespace, log: Log, seconds: float) -> dict[str, Any]:
    from benchmarks.train_speed import compare
    result = compare(a.device, "tiny" if a.tiny else "base", amp="bf16" if a.device == "cuda" else "off",
                     batch_tokens=400 if a.tiny else 24_000, seconds=1.0 if a.tiny else seconds)
    log(f"training speed: {json.dumps(result)}")
    import torch
    if torch.cuda.is_available():
        torch.cuda.empty_cache()          # the teachers' processes need the memory, not this one
    return result


def stage_loop(a: argparse.Namespace, log: Log, logs: Path, seconds: float) -> dict[str, Any]:
    """The real training loop's step against a fixed-shape one, profiled (benchmarks/train_loop.py),
    with the CUDA allocator as it is and with expandable segments; the teachers get the faster one."""
    cmd = [sys.executable, "-m", "benchmarks.train_loop", "--bundle", str(a.bundle), "--device", a.device,
           "--tokenizer-from", str(a.students_from / "multi30k-en-de")]
    cmd += (["--preset", "tiny", "--steps", "2", "--batch-tokens", "1000", "--pairs", "2000", "--no-profile"]
            if a.tiny else ["--steps", "12"])
    out: dict[str, Any] = {}
    arms = (("default", None), ("expandable", EXPANDABLE)) if a.device == "cuda" else (("default", None),)
    for name, conf in arms:
        env = {"PYTORCH_CUDA_ALLOC_CONF": conf} if conf else {}
        proc = run_logged(cmd, logs / f"loop-{name}.log", seconds / 2, env)
        code = wait_all([proc])[0]
        first = (logs / f"loop-{name}.log").read_text(errors="replace").splitlines()
        found = [json.loads(line) for line in first if line.startswith("{")]
        out[name] = found[0] if found else {"exit": code}
        log(f"training loop ({name} allocator): {json.dumps(out[name])}")
    rate = {k: v.get("real_host_ahead_tokens_per_s", 0) for k, v in out.items()}
    a.alloc_conf = "" if rate["default"] > 1.05 * rate.get("expandable", 0) else EXPANDABLE
    out["teachers_use"] = a.alloc_conf or "default"
    return out


def alloc_env(a: argparse.Namespace) -> dict[str, str]:
    """The CUDA allocator the training processes get: expandable segments (every batch has another shape,
    and the caching allocator's fixed blocks fit them badly) unless the loop stage measured the default
    faster."""
    conf = getattr(a, "alloc_conf", EXPANDABLE)
    return {"PYTORCH_CUDA_ALLOC_CONF": conf} if conf and a.device == "cuda" else {}


def train_command(a: argparse.Namespace, data: Path, src: str, tgt: str, out: Path, minutes: float,
                  init_from: Path | None = None) -> list[str]:
    cmd = [sys.executable, str(ROOT / "train.py"), "--data", str(data), "--src", src, "--tgt", tgt,
           "--device", a.device, "--out", str(out), "--no-progress", "--log-every", "0.25", "--save-every", "0",
           "--eval-sentences", "1200", "--max-len", "100", "--average-last", "3", "--keep-partial"]
    if a.device == "cuda":
        cmd += ["--amp", "bf16"]
    if init_from is None:             # a teacher: larger than the student, pre-norm for a short warm-up
        cmd += ["--tokenizer-from", str(a.students_from / f"multi30k-{src}-{tgt}"), "--norm-first"]
        cmd += (["--preset", "tiny", "--batch-tokens", "400", "--epochs", "1", "--max-steps", "3"] if a.tiny else
                ["--preset", "base", "--dropout", "0.1", "--batch-tokens", str(a.teacher_batch), "--lr", "1e-3",
                 "--warmup", "400", "--epochs", "500", "--time-budget", f"{minutes:.2f}",
                 "--cooldown-minutes", f"{minutes * 0.45:.2f}"])
    else:                             # a student: the shipped weights, trained on
        cmd += ["--init-from", str(init_from), "--half", "--rewarm", "100"]
        cmd += (["--batch-tokens", "400", "--epochs", "1000", "--max-steps", "3"] if a.tiny else
                ["--batch-tokens", str(a.student_batch), "--lr", str(a.student_lr), "--epochs", "1000",
                 "--time-budget", f"{minutes:.2f}", "--cooldown-minutes", f"{minutes:.2f}"])
    return cmd


def stage_teachers(a: argparse.Namespace, log: Log, work: Path, logs: Path, seconds: float) -> dict[str, Any]:
    data = work / "teacher-data"
    en, de = real_pairs(a.bundle)
    copies = 1 if a.tiny else 4       # four passes an epoch: fewer end-of-epoch pauses on a fast GPU
    write_dir(data, "train", en * copies, de * copies)
    write_dir(data, "val", *val_pairs(a.bundle))
    log(f"teacher data: {len(en)} pairs x {copies} an epoch")
    minutes = max(0.2, (seconds - 45) / 60)          # start-up, tokenising, the final choice
    codes = run_all([(train_command(a, data, s, t, work / f"teacher-{s}-{t}", minutes), logs / f"teacher-{s}-{t}.log",
                      alloc_env(a)) for s, t in DIRECTIONS], seconds, serial=a.tiny)
    out = {}
    for (s, t), code in zip(DIRECTIONS, codes):
        card = work / f"teacher-{s}-{t}" / "config.json"
        meta = json.loads(card.read_text()) if card.is_file() else {}
        out[f"{s}-{t}"] = {"exit": code, **{k: meta.get(k) for k in ("val_bleu", "epochs", "steps", "parameters",
                                                                      "training_time_min", "hardware", "selected")}}
        log(f"teacher {s}-{t}: {out[f'{s}-{t}']}")
    return out


def stage_distill(a: argparse.Namespace, log: Log, work: Path, logs: Path, seconds: float) -> dict[str, Any]:
    jobs, done = [], []
    for s, t in DIRECTIONS:
        if not (work / f"teacher-{s}-{t}" / "config.json").is_file():
            log(f"distill {s}-{t}: no teacher")
            continue
        cmd = [sys.executable, "-m", "model.commands.visit", "translate", "--bundle", str(a.bundle),
               "--checkpoint", str(work / f"teacher-{s}-{t}"), "--src", s, "--tgt", t,
               "--out", str(work / f"distill-{s}-{t}.tsv.gz"), "--scores", str(work / f"teacher-{s}-{t}-scores.json"),
               "--seconds", f"{seconds - 15:.0f}", "--device", a.device, "--beam", str(a.distill_beam)]
        jobs.append((cmd, logs / f"distill-{s}-{t}.log", {}))
        done.append((s, t))
    run_all(jobs, seconds, serial=a.tiny)
    out = {}
    for s, t in done:
        path = work / f"teacher-{s}-{t}-scores.json"
        out[f"{s}-{t}"] = json.loads(path.read_text()) if path.is_file() else {"error": "no scores written"}
        log(f"distill {s}-{t}: {out[f'{s}-{t}']}")
    return out


def stage_students(a: argparse.Namespace, log: Log, work: Path, logs: Path, seconds: float) -> dict[str, Any]:
    jobs, out = [], {}
    minutes = max(0.2, (seconds - 50) / 60)
    for s, t in DIRECTIONS:
        src, tgt, counts = student_pairs(a.bundle, s, t, work)
        data = work / f"student-data-{s}-{t}"
        en, de = (src, tgt) if s == "en" else (tgt, src)
        write_dir(data, "train", en, de)
        write_dir(data, "val", *val_pairs(a.bundle))
        out[f"{s}-{t}"] = {"pairs": counts}
        log(f"student {s}-{t} data: {counts}")
        cmd = train_command(a, data, s, t, work / "students" / f"multi30k-{s}-{t}", minutes,
                            init_from=a.students_from / f"multi30k-{s}-{t}")
        jobs.append((cmd, logs / f"student-{s}-{t}.log", alloc_env(a)))
    for (s, t), code in zip(DIRECTIONS, run_all(jobs, seconds, serial=a.tiny)):
        card = work / "students" / f"multi30k-{s}-{t}" / "config.json"
        meta = json.loads(card.read_text()) if card.is_file() else {}
        out[f"{s}-{t}"].update(exit=code, val_bleu=meta.get("val_bleu"), steps=meta.get("steps"),
                               selected=meta.get("selected"))
        log(f"student {s}-{t}: {out[f'{s}-{t}']}")
    return out


# ---- translating (a stage's worker, one process per direction) -----------------------------------------
def translate_main(a: argparse.Namespace) -> int:
    import torch

    from model.inference.bulk import translate_corpus
    from model.inference.options import DecodeOptions
    from model.storage.checkpoint import load_checkpoint
    from model.training.data import group_references
    from model.training.metrics import corpus_scores

    end = time.time() + a.seconds
    device = torch.device(a.device)
    ckpt = load_checkpoint(a.checkpoint)
    ckpt.model.to(device).eval()
    opts = DecodeOptions("beam", beam_size=a.beam, alpha=1.0)
    greedy = DecodeOptions("beam", beam_size=1)
    scores: dict[str, Any] = {"decoding": f"beam {a.beam}, gnmt alpha 1.0 (monolingual sentences: greedy)"}
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext()
    sets = [("multi30k", "val"), ("tatoeba", "val"), ("tatoeba", "val-long"), ("multi30k", "test_2016_flickr"),
            ("tatoeba", "test"), ("tatoeba", "test-long")]
    for name, split in sets:
        en, de = pairs(a.bundle, name, split)
        src, refs = group_references(*((en, de) if a.src == "en" else (de, en)))
        with amp:
            hyps = translate_corpus(ckpt, src, opts, batch_tokens=a.batch_tokens)
        result = corpus_scores(hyps, refs)
        scores[f"{name}:{split}"] = round(result.bleu, 2)
        scores["signature"] = result.bleu_signature
    print(json.dumps(scores), flush=True)
    Path(a.scores).write_text(json.dumps(scores, indent=1))
    done: dict[str, int] = {}
    t0 = time.time()
    with gzip.open(a.out, "wt", encoding="utf-8") as f:
        for corpus, texts in sources(a.bundle, a.src).items():
            if time.time() > end:
                break
            with amp:
                outputs = translate_corpus(ckpt, texts, opts if corpus in PAIRS else greedy,
                                           batch_tokens=a.batch_tokens, should_stop=lambda: time.time() > end)
            for text, out in zip(texts, outputs):      # every source, "" where time ran out
                f.write(f"{corpus}\t{one_field(text)}\t{one_field(out)}\n")
            done[corpus] = sum(1 for out in outputs if out)
            print(f"{corpus}: {done[corpus]} of {len(texts)} in {time.time() - t0:.0f} s", flush=True)
    scores["translated"] = done
    scores["translate_s"] = round(time.time() - t0, 1)
    Path(a.scores).write_text(json.dumps(scores, indent=1))
    return 0


# ---- packing ---------------------------------------------------------------------------------------------
def pack(a: argparse.Namespace, log: Log, work: Path, logs: Path, results: dict[str, Any]) -> None:
    """The report first (it says what happened to the rest), then each piece on its own: one that
    fails is logged and the others still come back."""
    out = a.out
    pieces = [("report", lambda: _pack_report(out, work, logs, results))]
    for s, t in DIRECTIONS:
        src = work / f"distill-{s}-{t}.tsv.gz"
        if src.is_file():
            pieces.append((f"distill-{s}-{t}", lambda src=src, s=s, t=t: compact(src, out / f"distill-{s}-{t}.txt.xz")))
    pieces.append(("students", lambda: _pack_students(out, work, log)))
    for name, fn in pieces:
        try:
            fn()
        except Exception as exc:          # noqa: BLE001
            log(f"packing {name} failed: {type(exc).__name__}: {exc}")
    for path in sorted(out.glob("distill-*.txt.xz")):
        if path.stat().st_size > PART_BYTES:
            split_file(path)
    try:                                  # the report again, with the packing's own log lines
        _pack_report(out, work, logs, results)
    except Exception as exc:              # noqa: BLE001
        log(f"packing the report again failed: {type(exc).__name__}: {exc}")
    for p in sorted(out.iterdir()):
        log(f"out: {p.name} {p.stat().st_size / 2 ** 20:.1f} MiB")


def _pack_students(out: Path, work: Path, log: Log) -> None:
    students = work / "students"
    if any(students.glob("*/config.json")):
        tar_path = out / "students.tar"
        with tarfile.open(tar_path, "w") as tar:
            for d in sorted(students.glob("*/config.json")):
                tar.add(d.parent, arcname=d.parent.name)
        parts = split_file(tar_path)
        log(f"students: {len(parts)} part(s) of <= {PART_BYTES >> 20} MiB")


def _pack_report(out: Path, work: Path, logs: Path, results: dict[str, Any]) -> None:
    figure = _figure(work, logs)
    (logs / "results.json").write_text(json.dumps(results, indent=1))
    with tarfile.open(out / "report.tar.gz", "w:gz") as tar:
        tar.add(logs, arcname="report")
        for d in sorted(work.glob("teacher-*-*")):
            for name in ("config.json", "README.md", "training_log.jsonl"):
                if (d / name).is_file():
                    tar.add(d / name, arcname=f"report/{d.name}/{name}")
        if figure and figure.parent != logs:
            tar.add(figure, arcname=f"report/{figure.name}")


def _figure(work: Path, logs: Path) -> Path | None:
    """Validation BLEU by minute of every run, one PNG (matplotlib, where the machine has it)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    for path in sorted(work.glob("*/training_log.jsonl")) + sorted(work.glob("students/*/training_log.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        rows = [r for r in rows if "val_bleu" in r]
        if rows:
            ax.plot([r["wall_time_s"] / 60 for r in rows], [r["val_bleu"] for r in rows], marker="o",
                    label=path.parent.name)
    ax.set_xlabel("training minutes (a student's count on from its CPU training)")
    ax.set_ylabel("greedy val BLEU (first 1200 val pairs)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    target = logs / "val_bleu.png"
    fig.savefig(target, dpi=100)
    return target


# ---- the whole visit ------------------------------------------------------------------------------------
def run_main(a: argparse.Namespace) -> int:
    t0 = time.time()
    if a.tiny:                 # the suite, on a shared 2-core machine: each child process computes on one thread
        os.environ.setdefault("OMP_NUM_THREADS", "1")
    end = t0 + a.minutes * 60
    a.out.mkdir(parents=True, exist_ok=True)
    work = a.work
    if work.exists():
        shutil.rmtree(work)
    unknown = set(a.stages) - set(STAGES)
    if unknown:
        print(f"error: unknown stage(s) {', '.join(sorted(unknown))}; choose from {','.join(STAGES)}", file=sys.stderr)
        return 2
    logs = work / "logs"
    log = Log(logs / "visit.log")
    results: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "args": {k: str(v) for k, v in
                                                                                     vars(a).items()}}
    results["env"] = environment()
    log(f"environment: {json.dumps(results['env'])}")
    problem = preflight(a)
    if problem:
        log(f"preflight failed: {problem}")
        (logs / "results.json").write_text(json.dumps({**results, "preflight": problem}, indent=1))
        with tarfile.open(a.out / "report.tar.gz", "w:gz") as tar:
            tar.add(logs, arcname="report")
        return 3
    plan = {"tests": 0.05, "speed": 0.035, "loop": 0.06, "teachers": 0.42, "distill": 0.175, "students": 0.26}

    def budget(stage: str) -> float:
        """This stage's share of the time left, in proportion to the shares still to come."""
        names = list(plan)
        left = end - time.time() - (20 if not a.tiny else 0)     # packing
        share = plan[stage] / sum(plan[n] for n in names[names.index(stage):])
        return max(25.0 if stage == "tests" and not a.tiny else 5.0, left * share)   # pytest starts in ~15 s

    stages = [("tests", lambda s: stage_tests(a, log, logs, s)), ("speed", lambda s: stage_speed(a, log, s)),
              ("loop", lambda s: stage_loop(a, log, logs, s)),
              ("teachers", lambda s: stage_teachers(a, log, work, logs, s)),
              ("distill", lambda s: stage_distill(a, log, work, logs, s)),
              ("students", lambda s: stage_students(a, log, work, logs, s))]
    for name in [n for n in plan if n not in a.stages]:
        del plan[name]
    if a.distilled:
        results["distilled_from"] = unpack_distilled(a.distilled, a.bundle, work, log)
    for name, fn in stages:
        if name not in a.stages:
            continue
        seconds = budget(name)
        log(f"stage {name}: {seconds:.0f} s")
        started = time.time()
        try:
            results[name] = fn(seconds)
        except Exception as exc:          # noqa: BLE001  (one stage's failure must not lose the others)
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
            log(f"stage {name} failed: {type(exc).__name__}: {exc}")
        results.setdefault("seconds", {})[name] = round(time.time() - started, 1)
    pack(a, log, work, logs, results)
    log(f"visit done in {time.time() - t0:.0f} s: {json.dumps(summary(results))}")
    return 0


def summary(results: dict[str, Any]) -> dict[str, Any]:
    """The few numbers the end of the output should carry."""
    short = {"seconds": results.get("seconds"), "tests": results.get("tests", {}).get("summary"),
             "speed": {k: v for k, v in results.get("speed", {}).items() if "tokens_per_s" in k},
             "loop": {name: {k: v for k, v in r.items() if "tokens_per_s" in k}
                      for name, r in results.get("loop", {}).items() if isinstance(r, dict)}}
    for part in ("teachers", "distill", "students"):
        short[part] = results.get(part)
    return short


def preflight(a: argparse.Namespace) -> str | None:
    """What every stage needs, checked in seconds (a broken visit should end at once, not at its end)."""
    try:
        import sacrebleu  # noqa: F401
        import safetensors  # noqa: F401
        import sentencepiece  # noqa: F401
        import torch

        from model.commands.train import parse_args as train_args  # noqa: F401
        from model.inference.bulk import translate_corpus  # noqa: F401
        from model.storage.checkpoint import load_checkpoint
        for s, t in DIRECTIONS:
            load_checkpoint(a.students_from / f"multi30k-{s}-{t}")
        if a.device == "cuda" and not torch.cuda.is_available():
            return "--device cuda, but torch sees no CUDA device"
    except Exception as exc:          # noqa: BLE001
        return f"{type(exc).__name__}: {exc}"
    return None


def environment() -> dict[str, Any]:
    import torch
    env = {"python": sys.version.split()[0], "torch": torch.__version__, "cuda": torch.cuda.is_available()}
    if torch.cuda.is_available():
        env.update(gpu=torch.cuda.get_device_name(0), bf16=torch.cuda.is_bf16_supported(),
                   memory_gb=round(torch.cuda.get_device_properties(0).total_memory / 1e9, 1))
    env["cpus"] = os.cpu_count()
    return env


# ---- command line ------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=prog("model.visit"), description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bundle", help="copy the data the visit trains on into one folder (to carry)")
    b.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data", help="the shared data folder")
    b.add_argument("--to", type=Path, default=ROOT / "gpu-bundle", help="the bundle folder (git-ignored)")
    r = sub.add_parser("run", help="the whole visit: tests, speed, teachers, distillation, students, packing")
    r.add_argument("--bundle", type=Path, default=ROOT / "gpu-bundle")
    r.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "visit-out")),
                   help="what comes back (default $OUT)")
    r.add_argument("--work", type=Path, default=Path("/tmp/visit-work"), help="scratch (teachers stay here)")
    r.add_argument("--minutes", type=float, default=8.5, help="the whole visit, packing included (default 8.5)")
    r.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    r.add_argument("--students-from", type=Path, default=ROOT / "checkpoints",
                   help="where multi30k-en-de and multi30k-de-en are (the students' start and the tokenizer)")
    r.add_argument("--teacher-batch", type=int, default=24_000, help="a teacher's tokens per batch")
    r.add_argument("--student-batch", type=int, default=12_000, help="a student's tokens per batch")
    r.add_argument("--student-lr", type=float, default=3e-3, help="a student's peak rate (decayed by its step)")
    r.add_argument("--distill-beam", type=int, default=4)
    r.add_argument("--tiny", action="store_true", help="tiny models and a few steps: the same path, on a CPU")
    r.add_argument("--skip-tests", action="store_true", help="do not run pytest -m gpu")
    r.add_argument("--stages", type=lambda v: v.split(","), default=list(STAGES), metavar="A,B",
                   help=f"the stages to run, of {','.join(STAGES)} (default all; the time is shared among them)")
    r.add_argument("--distilled", type=Path, metavar="DIR",
                   help="distill-SRC-TGT.txt.xz[.part-NN] an earlier visit brought back (carried): the students "
                        "train on them (e.g. --stages tests,students on a visit after the teachers' one)")
    t = sub.add_parser("translate", help="(a stage's worker) score a teacher, translate every source")
    t.add_argument("--bundle", type=Path, required=True)
    t.add_argument("--checkpoint", type=Path, required=True)
    t.add_argument("--src", required=True)
    t.add_argument("--tgt", required=True)
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--scores", type=Path, required=True)
    t.add_argument("--seconds", type=float, required=True)
    t.add_argument("--device", default="cuda")
    t.add_argument("--beam", type=int, default=4)
    t.add_argument("--batch-tokens", type=int, default=100_000, help="source tokens x beam per batch")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if a.command == "bundle":
        manifest = make_bundle(a.shared, a.to)
        size = sum(p.stat().st_size for p in a.to.iterdir())
        print(json.dumps(manifest["files"], indent=1))
        print(f"bundle: {a.to} ({size / 2 ** 20:.1f} MiB)")
        return 0
    if a.command == "translate":
        return translate_main(a)
    for need in ("MANIFEST.json", "tatoeba.train.en.gz"):
        if not (a.bundle / need).is_file():
            print(f"error: {a.bundle / need}: missing; make the bundle first "
                  f"(python -m model.commands.visit bundle --to {a.bundle})", file=sys.stderr)
            return 2
    return run_main(a)


if __name__ == "__main__":
    sys.exit(main())
