"""Measure which fast scheme a checkpoint may be served with, and store the choice beside it.

For each scheme of model/inference/precision.py, against the fp32 model on the same sentences (the
checkpoint's own decoding: beam search with its alpha):
  identical   the share of sentences whose translation is exactly fp32's (per set)
  BLEU        sacrebleu, cased, all references per distinct source: fp32's and the scheme's
  attention   the largest difference of any attention weight (every layer, head and kind) between the
              two, each teacher-forced over fp32's translation of the first --attention-sentences sources
  speed       one sentence as the app decodes it (its steps recorded), fp32 and the scheme taken in turns
              (A B A B), medians; and the first --speed-sentences sources through model.translate
  memory      the MB the scheme's copy holds beyond the fp32 model (it shares everything it does not replace)
A scheme passes with >= 98 % identical on every set, BLEU within 0.3, attention within 0.02. With --write
the fastest passing scheme (fp32 if none passes or none is 5 % faster than fp32 on this machine; of schemes within
5 points of the fastest, the smallest copy) goes into the
checkpoint's config.json ("precision", which the app serves and the model card shows), the whole report into
its precision.json. Choose on
validation sets (the default: Multi30K val, Tatoeba val-long); score test sets once, to report.

  python -m model.precision --checkpoint checkpoints/multi30k-en-de --write
  python -m model.precision --checkpoint checkpoints/multi30k-en-de --set ../shared/data/multi30k:test_2016_flickr
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

from model.commands import registry as command
from model.commands.shared import add_checkpoint_arg, fail, load_or_exit
from model.inference.decoding import forced_decode
from model.inference.options import DecodeOptions
from model.inference.pipeline import explain, source_ids, translate
from model.inference.precision import FP32, SCHEMES, added_bytes, quantized
from model.network.trace import Trace
from model.storage.card import write_card
from model.storage.checkpoint import Checkpoint, write_config_entry
from model.training.data import DataError, group_references, read_parallel
from model.training.metrics import corpus_scores

IDENTICAL, BLEU_GAP, ATTENTION_GAP = 0.98, 0.3, 0.02           # what a scheme must meet
FASTER = 0.95      # and its one sentence at most this share of fp32's: the copy it serves costs memory
NEAR = 0.05        # shares of fp32's time this close count as one speed: then the smaller copy is chosen
DEFAULT_SETS = ("../shared/data/multi30k:val", "../shared/data/tatoeba-en-de:val-long")
SPEED_SENTENCE = "A young woman in a blue jacket is walking her dog along the beach at sunset today."
PRECISION_FILE = "precision.json"


def read_set(spec: str, ckpt: Checkpoint, limit: int | None) -> tuple[str, list[str], list[list[str]]]:
    data, _, split = spec.rpartition(":")
    sources, refs = read_parallel(data, split, ckpt.src_lang, ckpt.tgt_lang)
    sources, refs = group_references(sources[:limit], refs[:limit])
    return f"{Path(data).name}:{split}", sources, refs


def attention_gap(a: Checkpoint, b: Checkpoint, sources: list[str], outputs: list[str]) -> float:
    """The largest |weight difference| over every attention weight of a's and b's teacher-forced passes over
    a's own translations."""
    gap = 0.0
    for text, out in zip(sources, outputs):
        src = torch.tensor([source_ids(a, text)])
        ref = a.tgt_tokenizer.encode(out)
        traces = [Trace(), Trace()]
        with torch.inference_mode():
            for ckpt, trace in zip((a, b), traces):
                forced_decode(ckpt.model, src, ref, trace=trace)
        for kind in ("encoder_self", "decoder_self", "cross"):
            gap = max(gap, (traces[0].attention(kind) - traces[1].attention(kind)).abs().max().item())
    return gap


def one_sentence_seconds(a: Checkpoint, b: Checkpoint, opts: DecodeOptions, rounds: int) -> tuple[float, float]:
    """Medians of one sentence decoded as the app does (steps recorded), a and b in turns."""
    times: tuple[list[float], list[float]] = ([], [])
    with torch.inference_mode():
        for _ in range(rounds):
            for ckpt, out in zip((a, b), times):
                t0 = time.perf_counter()
                explain(ckpt, SPEED_SENTENCE, dataclasses.replace(opts, record_steps=True))
                out.append(time.perf_counter() - t0)
    return statistics.median(times[0]), statistics.median(times[1])


def many_seconds(ckpt: Checkpoint, sources: list[str], opts: DecodeOptions) -> float:
    t0 = time.perf_counter()
    translate(ckpt, sources, opts, batch_size=32)
    return time.perf_counter() - t0


def passes(m: dict) -> bool:
    return all(s["identical"] >= IDENTICAL and abs(s["bleu"] - s["bleu_fp32"]) <= BLEU_GAP
               for s in m["sets"].values()) and m["attention_gap"] <= ATTENTION_GAP


def measure(ckpt: Checkpoint, sets: list[tuple[str, list[str], list[list[str]]]], schemes: list[str],
            opts: DecodeOptions, attention_sentences: int, speed_sentences: int, rounds: int) -> dict:
    progress = tqdm(total=len(sets) * (len(schemes) + 1), desc="translating sets", unit="set", file=sys.stderr)
    fp32_out = {}
    for name, sources, _refs in sets:
        fp32_out[name] = translate(ckpt, sources, opts, batch_size=32)
        progress.update()
    first_sources = sets[0][1]
    results: dict[str, dict] = {}
    for scheme in schemes:
        fast = dataclasses.replace(ckpt, model=quantized(ckpt.model, scheme))
        m: dict = {"sets": {}}
        for name, sources, refs in sets:
            out = translate(fast, sources, opts, batch_size=32)
            m["sets"][name] = {"sentences": len(sources),
                               "identical": sum(x == y for x, y in zip(out, fp32_out[name])) / len(sources),
                               "bleu_fp32": round(corpus_scores(fp32_out[name], refs).bleu, 2),
                               "bleu": round(corpus_scores(out, refs).bleu, 2)}
            progress.update()
        n = attention_sentences
        m["attention_gap"] = attention_gap(ckpt, fast, first_sources[:n], fp32_out[sets[0][0]][:n])
        m["one_sentence_s"] = dict(zip((FP32, scheme), one_sentence_seconds(ckpt, fast, opts, rounds)))
        many = first_sources[:speed_sentences]
        a, b = many_seconds(ckpt, many, opts), many_seconds(fast, many, opts)
        a2, b2 = many_seconds(ckpt, many, opts), many_seconds(fast, many, opts)
        m["many_s"] = {FP32: statistics.median([a, a2]), scheme: statistics.median([b, b2]), "sentences": len(many)}
        m["added_mb"] = round(added_bytes(fast.model) / 2 ** 20, 1)
        m["passes"] = passes(m)
        results[scheme] = m
    progress.close()
    return results


def choose(results: dict[str, dict]) -> str:
    """The passing scheme whose one sentence is fastest against fp32 timed beside it, if it takes at most FASTER
    of fp32's time; else fp32. Of passing schemes within NEAR of the fastest's share, the one whose copy holds the
    fewest bytes (every app process holds it)."""
    ok = sorted((m["one_sentence_s"][s] / m["one_sentence_s"][FP32], s) for s, m in results.items() if m["passes"])
    if not ok or ok[0][0] > FASTER:
        return FP32
    near = [s for share, s in ok if share <= ok[0][0] + NEAR]
    return min(near, key=lambda s: (results[s].get("added_mb", 0), near.index(s)))


def served_entry(chosen: str, results: dict[str, dict], specs: list[str]) -> dict:
    """config.json's "precision": the scheme the app serves and what it was measured to keep (the card says it)."""
    entry: dict = {"scheme": chosen, "chosen_on": specs, "decoding": "beam 4", "report": PRECISION_FILE,
                   "tried": {s: {k: round(v * 1000, 1) for k, v in m["one_sentence_s"].items()}
                             for s, m in results.items()}, "at_most": FASTER}
    if chosen in results:
        m = results[chosen]
        entry |= {"identical": {k: v["identical"] for k, v in m["sets"].items()},
                  "bleu": {k: [v["bleu_fp32"], v["bleu"]] for k, v in m["sets"].items()},
                  "attention_gap": m["attention_gap"], "added_mb": m.get("added_mb"),
                  "one_sentence_ms": {k: round(v * 1000, 1) for k, v in m["one_sentence_s"].items()}}
    return entry


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=command.prog("model.precision"), description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_checkpoint_arg(p)
    p.add_argument("--set", action="append", metavar="DATA:SPLIT",
                   help=f"a set to compare on (repeatable; default {' and '.join(DEFAULT_SETS)})")
    p.add_argument("--limit", type=int, help="only the first N lines of each set")
    p.add_argument("--scheme", action="append", choices=list(SCHEMES), help="schemes to try (default: all)")
    p.add_argument("--attention-sentences", type=int, default=100, help="sentences whose attention is compared")
    p.add_argument("--speed-sentences", type=int, default=1000, help="sentences timed through model.translate")
    p.add_argument("--rounds", type=int, default=9, help="A B rounds of the one-sentence timing (default 9)")
    p.add_argument("--write", action="store_true", help=f"store the choice in the checkpoint's {PRECISION_FILE}")
    p.add_argument("--json", help="also write every figure here")
    args = p.parse_args(argv)
    ckpt = load_or_exit(args)
    if ckpt.path is None:
        fail("--checkpoint must name one checkpoint directory")
    specs = args.set or list(DEFAULT_SETS)
    if args.write and any(":test" in s for s in specs):
        fail("choose on validation sets, not a test set: --write with a test set is refused")
    try:
        sets = [read_set(s, ckpt, args.limit) for s in specs]
    except DataError as exc:
        fail(str(exc))
    opts = DecodeOptions("beam", beam_size=4, alpha=ckpt.beam_alpha)
    results = measure(ckpt, sets, args.scheme or list(SCHEMES), opts, args.attention_sentences,
                      args.speed_sentences, args.rounds)
    chosen = choose(results)
    report = {"checkpoint": ckpt.name, "precision": chosen, "sets": specs, "decoding": "beam 4",
              "bounds": {"identical": IDENTICAL, "bleu_gap": BLEU_GAP, "attention_gap": ATTENTION_GAP},
              "threads": torch.get_num_threads(), "schemes": results}
    for scheme, m in results.items():
        sets_text = ", ".join(f"{k} {v['identical']:.1%} identical, BLEU {v['bleu_fp32']} -> {v['bleu']}"
                              for k, v in m["sets"].items())
        one = m["one_sentence_s"]
        print(f"{scheme}: {sets_text}; attention within {m['attention_gap']:.4f}; one sentence "
              f"{one[FP32] * 1000:.0f} -> {one[scheme] * 1000:.0f} ms; {m['many_s']['sentences']} sentences "
              f"{m['many_s'][FP32]:.1f} -> {m['many_s'][scheme]:.1f} s; its copy {m['added_mb']} MB; "
              f"{'passes' if m['passes'] else 'fails'}")
    print(f"chosen: {chosen}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    if args.write:
        (ckpt.path / PRECISION_FILE).write_text(json.dumps(report, indent=1) + "\n")
        write_config_entry(ckpt.path, "precision", served_entry(chosen, results, specs))
        write_card(ckpt.path)
        print(f"wrote {ckpt.path / PRECISION_FILE} and config.json's \"precision\" (what the app serves)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
