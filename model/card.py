"""The model card (README.md) of a checkpoint directory, written from what the
directory holds: config.json, training_log.jsonl and, once `model.evaluate --write-card`
has run, eval_results.json."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from model.config import ModelConfig

EVAL_RESULTS = "eval_results.json"


def _read_json(path: Path, default: Any) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return default


def read_training_log(directory: str | Path) -> list[dict]:
    """A checkpoint directory's training_log.jsonl, one record per epoch (empty if it has none)."""
    path = Path(directory) / "training_log.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line] if path.is_file() else []


def shape_rows(cfg: ModelConfig) -> dict[str, object]:
    """The model's shape, as a student reads it."""
    return {
        "d_model": cfg.d_model, "heads": cfg.n_heads, "d_k = d_model / heads": cfg.d_head,
        "encoder layers": cfg.n_encoder_layers, "decoder layers": cfg.n_decoder_layers, "d_ff": cfg.d_ff,
        "dropout": cfg.dropout, "norm": "pre-norm" if cfg.norm_first else "post-norm (paper)",
        "vocabulary": f"{cfg.src_vocab_size} ({'joint' if cfg.tie_embeddings else 'separate'})",
        "max positions": cfg.max_positions,
        "FFN activation": cfg.activation + (" (paper)" if cfg.activation == "relu" else ""),
        "positional encoding": "sin/cos interleaved (paper)" if cfg.pe_layout == "interleaved"
        else "all sines, then all cosines (Marian)",
        "embeddings × √d_model": "yes (paper)" if cfg.scale_embedding else "no",
        "output bias": "yes (Marian's final_logits_bias)" if cfg.logits_bias else "no (paper)",
        "decoder start symbol": "<pad> (Marian)" if cfg.bos_id == cfg.pad_id else "<s>",
    }


def render_card(directory: str | Path) -> str:
    d = Path(directory)
    config = _read_json(d / "config.json", {})
    cfg = ModelConfig.from_dict(config["model"])
    log = read_training_log(d)
    evals = _read_json(d / EVAL_RESULTS, {})
    src, tgt = config.get("src_lang", "?"), config.get("tgt_lang", "?")
    args = config.get("train_args", {})
    lines = [
        f"# {d.name}: Transformer, {src} → {tgt}",
        "",
        "Trained by this project's `train.py`, from scratch, on this project's machine. "
        "Load it with `model.checkpoint.load_checkpoint`; the app lists it in its checkpoint picker.",
        "",
        "## Data",
        f"Multi30K task 1 (Elliott et al., 2016): 29,000 training pairs, model selection on `val` "
        f"(1,014), test on `test_2016_flickr` (1,000). Tokenizer: sentencepiece BPE, "
        f"{cfg.src_vocab_size} pieces, {'joint for both languages' if cfg.tie_embeddings else 'one per language'}.",
        "",
        "## Model",
        "| setting | value |",
        "|---|---|",
        *(f"| {name} | {value} |" for name, value in shape_rows(cfg).items()),
        f"| parameters | {config.get('parameters', 0) / 1e6:.2f} M |",
        "",
        f"Weights stored as {config.get('weights_dtype', 'float32')} (loaded as float32).",
        "",
        "## Training",
        f"- hardware: {config.get('hardware', '?')}",
        f"- wall time: {config.get('training_time_min', '?')} min, {config.get('epochs', '?')} epochs, "
        f"{config.get('steps', '?')} optimizer steps",
        f"- batches of ~{args.get('batch_tokens', '?')} tokens, Adam(0.9, 0.98, 1e-9), peak lr {args.get('lr', '?')} "
        f"after {args.get('warmup', '?')} warm-up steps then inverse square root{_cooldown(args)}, label smoothing "
        f"{args.get('label_smoothing', '?')}, gradient clipping {args.get('clip', '?')}, seed {args.get('seed', '?')}",
        f"- shipped weights: {config.get('selected', '?')} (val BLEU {config.get('val_bleu', '?')}, greedy)",
        *_continued(args, config.get("epochs")),
        "",
    ]
    if log:
        lines += ["| epoch | step | train loss | val loss | val BLEU (greedy) | val chrF | tokens/s | minutes |",
                  "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['epoch']} | {r['step']} | {r['train_loss']:.3f} | {r['val_loss']:.3f} | {r['val_bleu']:.2f} | "
                  f"{r['val_chrf']:.2f} | {r['tokens_per_s']:,} | {r['wall_time_s'] / 60:.1f} |" for r in log]
        lines.append("")
    lines += [*_decoding(config.get("decoding")), "## Quality", ""]
    if evals:
        lines += [f"sacrebleu on detokenized, cased text, `{evals.get('split')}`:", "",
                  "| decoding | BLEU | chrF |", "|---|---|---|"]
        for name, r in evals.get("results", {}).items():
            lines.append(f"| {decoding_name(name, r)} | {r['bleu']:.2f} | {r['chrf']:.2f} |")
        first = next(iter(evals.get("results", {}).values()), {})
        sigs = f"BLEU `{first.get('bleu_signature', '')}`, chrF `{first.get('chrf_signature', '')}`"
        lines += ["", f"Signatures: {sigs}.",
                  "", f"Command: `{evals.get('command', '')}`", ""]
    else:
        lines += ["Not evaluated on the test set yet: run `python -m model.evaluate --checkpoint "
                  f"{d} --write-card`.", ""]
    return "\n".join(lines)


def _cooldown(args: dict[str, Any]) -> str:
    k = args.get("cooldown_epochs") or 0
    if not k:
        return ""
    return f", times a linear cooldown to 0 over the last {k:g} of {args.get('epochs', '?')} planned epochs"


def training_parts(args: dict[str, Any]) -> list[dict[str, Any]]:
    """The runs a model was trained in, first to last: each continued one's train_args hold
    the run it started from (`continued_from`: epochs, steps, val BLEU, its train_args)."""
    chain, first = [], args.get("continued_from")
    while first:
        chain.append(first)
        first = first.get("train_args", {}).get("continued_from")
    return chain[::-1]


_NUMBERS = {2: "two", 3: "three", 4: "four", 5: "five"}


def _continued(args: dict[str, Any], epochs: Any = None) -> list[str]:
    """A run continued from finished weights (`train.py --init-from`), perhaps more than
    once: where each part ended and how the next went on (`epochs`: those the last part reached)."""
    parts = training_parts(args)
    if not parts:
        return []
    a = parts[0].get("train_args", {})
    lines = [f"- in {_NUMBERS.get(len(parts) + 1, len(parts) + 1)} parts: epochs 1-{parts[0].get('epochs')} are the "
             f"run that ended at step {parts[0].get('steps')} (its {parts[0].get('selected', '?')}, val BLEU "
             f"{parts[0].get('val_bleu')}; amp {a.get('amp', '?')}, cooldown {a.get('cooldown_epochs', 0) or 'none'})"]
    for before, part in zip(parts, [*parts[1:], None]):
        b = part.get("train_args", {}) if part else args
        end = part.get("epochs") if part else epochs or b.get("epochs", "?")
        ended = (f", ended at step {part.get('steps')} (its {part.get('selected', '?')}, "
                 f"val BLEU {part.get('val_bleu')})" if part else "")
        lines.append(f"  - epochs {before.get('epochs', 0) + 1}-{end}: continued from those weights with "
                     f"`--init-from {b.get('init_from', '?')} --epochs {b.get('epochs', '?')} --cooldown-epochs "
                     f"{b.get('cooldown_epochs', 0):g}` (an empty optimizer, the rate ramped up again over "
                     f"{b.get('rewarm', '?')} steps, amp {b.get('amp', '?')}){_other_data(a, b)}{ended}")
    return lines


def _other_data(first: dict[str, Any], part: dict[str, Any]) -> str:
    """A continued part that trained on other data than the first part: which, and how it was made."""
    if part.get("data") == first.get("data") and not part.get("data_note"):
        return ""
    note = f": {part['data_note']}" if part.get("data_note") else ""
    return f", trained on `--data {part.get('data', '?')}`{note}"


def _decoding(decoding: dict[str, Any] | None) -> list[str]:
    """The beam length penalty chosen by `python -m model.tune`, with what it tried."""
    if not decoding:
        return []
    lines = ["## Decoding", "",
             f"Beam search uses the GNMT length penalty α = {decoding['alpha']:g} by default (the translate and "
             f"trace CLIs, `model.evaluate` and the app), chosen on `{decoding.get('chosen_on', '?')}` with beam "
             f"{decoding.get('beam_size', '?')} by `python -m model.tune`:", "",
             "| α | BLEU | brevity penalty | length ratio |", "|---|---|---|---|"]
    lines += [f"| {t['alpha']:g} | {t['bleu']:.2f} | {t['brevity']:.3f} | {t['length_ratio']:.3f} |"
              for t in decoding.get("tried", [])]
    return [*lines, ""]


def decoding_name(name: str, result: dict[str, Any]) -> str:
    """An evaluation row's name with its length penalty, e.g. "beam 4 (α 1.4)"."""
    return f"{name} (α {result['alpha']:g})" if "alpha" in result else name


def write_card(directory: str | Path) -> Path:
    path = Path(directory) / "README.md"
    path.write_text(render_card(directory))
    return path
