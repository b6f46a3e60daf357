"""The app and the decoder on a random model of OPUS-MT's real shape, next to ours.

  .venv/bin/python -m benchmarks.opus_shape [--runs 5] [--dir /tmp/opus-shape]

Builds (with the optional `transformers` extra) a random MarianMTModel shaped like
Helsinki-NLP/opus-mt-en-de: 6+6 layers, d_model 512, 8 heads, d_ff 2048, swish, a
58,101-piece vocabulary (our shipped sentencepiece model's pieces, padded with unused
ones), imports it with model.convert, then measures:
1. the decoder: time per decoding step of a 20-token sentence, greedy and beam 4,
   alternating with checkpoints/multi30k-en-de (A B A B; medians and ratio);
2. the app on it alone (benchmarks.app_speed): Enter -> every chart drawn in Chromium,
   and the server's script time of a "Next" step and of a widget change.
A random model never says </s>, so every output runs to the length limit (1.5 x source + 10):
the slowest case for the app.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from benchmarks.common import alternate, machine, ratio_line
from model.inference.decoding import decode
from model.inference.options import DecodeOptions
from model.inference.pipeline import source_ids
from model.storage.checkpoint import load_checkpoint
from model.storage.convert import import_marian

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "checkpoints" / "multi30k-en-de"
VOCAB = 58101
SENTENCE = "A young woman in a blue jacket is walking her dog along the beach at sunset."


def build(directory: Path) -> Path:
    """A random OPUS-MT-shaped Marian directory, imported; returns our checkpoint's path."""
    from transformers import MarianConfig, MarianMTModel
    hf, ours = directory / "hf", directory / "checkpoints" / "opus-mt-shape-en-de"
    if (ours / "config.json").is_file():
        return ours
    spm_model = (SHIPPED / "spm.model").read_bytes()
    pieces = load_checkpoint(SHIPPED).src_tokenizer.pieces(range(4, 8000))
    vocab = {"</s>": 0, "<unk>": 1, **{p: i + 2 for i, p in enumerate(pieces)}}
    vocab |= {f"▁unused{i}": i for i in range(len(vocab), VOCAB - 1)} | {"<pad>": VOCAB - 1}
    cfg = MarianConfig(vocab_size=VOCAB, decoder_vocab_size=VOCAB, d_model=512, encoder_layers=6, decoder_layers=6,
                       encoder_attention_heads=8, decoder_attention_heads=8, encoder_ffn_dim=2048,
                       decoder_ffn_dim=2048, activation_function="swish", max_position_embeddings=512,
                       scale_embedding=True, pad_token_id=VOCAB - 1, eos_token_id=0, decoder_start_token_id=VOCAB - 1)
    torch.manual_seed(0)
    MarianMTModel(cfg).save_pretrained(hf, safe_serialization=True)
    for name in ("source.spm", "target.spm"):
        (hf / name).write_bytes(spm_model)
    (hf / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    (hf / "tokenizer_config.json").write_text(json.dumps({"source_lang": "en", "target_lang": "de"}))
    return import_marian(hf, ours)


def _decoding(ckpt, opts: DecodeOptions, steps: dict[str, int], name: str):
    """A timed call: decode SENTENCE; notes how many decoding steps it took."""
    def go() -> None:
        result = decode(ckpt.model, torch.tensor([source_ids(ckpt, SENTENCE)]), opts)[0]
        steps[name] = len(result.steps)
    return go


def step_times(runs: int, opus: Path) -> None:
    a, b = load_checkpoint(opus), load_checkpoint(SHIPPED)
    for method in ("greedy", "beam"):
        opts, steps = DecodeOptions(method, beam_size=4, record_steps=True), {}
        ta, tb = alternate(_decoding(a, opts, steps, "opus"), _decoding(b, opts, steps, "ours"), runs, warmup=1)
        ta, tb = [t / steps["opus"] for t in ta], [t / steps["ours"] for t in tb]
        print(f"{method}, per decoding step, with the app's per-step records ({steps['opus']} vs {steps['ours']} "
              f"steps): " + ratio_line("opus-shape", ta, "multi30k-en-de", tb))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--dir", default="/tmp/opus-shape", help="where the random model is built (kept for reruns)")
    a = p.parse_args()
    torch.set_num_threads(2)
    print(machine())
    opus = build(Path(a.dir))
    ckpt = load_checkpoint(opus)
    print(f"{opus}: {ckpt.model.num_parameters() / 1e6:.1f} M parameters, "
          f"{len(source_ids(ckpt, SENTENCE))} source tokens")
    step_times(a.runs, opus)
    from benchmarks import app_speed
    app_speed.main(["--runs", str(a.runs), "--checkpoints", str(opus.parent), "--port", "8766"])



if __name__ == "__main__":
    main()
