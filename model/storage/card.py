"""The model card (README.md) of a checkpoint directory, written from what the
directory holds: config.json, training_log.jsonl and, once `model.evaluate --write-card`
has run, eval_results.json."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from i18n import N_, _, num
from model.inference.precision import DESCRIPTIONS
from model.network.config import ModelConfig

EVAL_RESULTS = "eval_results.json"


def _read_json(path: Path, default: Any) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return default


# The corpora a model of ours may have read: found by name in its --data paths and data notes.
CORPORA = {   # marked for the catalog: `_(CORPORA[name])` where the app shows them
    "multi30k": N_("Multi30K task 1 (Elliott et al., 2016): image captions, 29,000 training pairs, `val` (1,014), "
                   "`test_2016_flickr` (1,000); for non-commercial research and education."),
    "tatoeba": N_("Tatoeba English-German: short everyday sentences, 44,925 training pairs, `val` (1,000 English "
                  "sentences, 1,322 pairs) and `test` (1,000 sentences, 1,344 pairs), several translations per "
                  "sentence. Attribution: Tatoeba contributors (https://tatoeba.org), licensed CC BY 2.0 FR."),
    "tatoeba-2018": N_("Tatoeba English-German in full: the 2018 edition of manythings.org's English-German list "
                       "with the earlier short pairs, 173,611 training pairs of 1 to 44 English words; `val` and "
                       "`test` (short), `val-long` and `test-long` (8 words or more, about 1,000 English sentences "
                       "each), several translations per sentence. Attribution: Tatoeba contributors "
                       "(https://tatoeba.org) and manythings.org, licensed CC BY 2.0 FR."),
    "everyday-extra": N_("everyday-extra: 47,583 pairs of everyday sentences: Tatoeba pairs of the OPUS-MT test set "
                         "2021 that are not in the 2018 edition (CC BY 2.0 FR: credit the Tatoeba contributors), "
                         "BConTrasT chat pairs and xSID (CC BY-SA 4.0: credit their authors; what you pass on of their "
                         "text, share alike), the Ding dictionary's example sentences (GPL-2+) and the auf-deutsch "
                         "classroom phrases (MIT)."),
    "ding-lexicon": N_("The Ding German-English dictionary (Debian's trans-de-en 1.9, GPL-2+): up to 100,000 entries "
                       "as short training pairs, tagged as dictionary entries; its single-word entries are also "
                       "shipped as `lexicon.tsv.gz`, which the notice reads (that file is under the GPL-2+: share "
                       "it under the same terms, naming Ding as its source)."),
    "back-translation": N_("Back-translations (`data/generated/`): English dialogue sentences of the Schema-Guided "
                           "Dialogue dataset (CC BY-SA 4.0: credit its authors, share alike) turned into German by "
                           "this project's en->de model, and German Common Voice sentences (CC0) turned into English "
                           "by its de->en model; the model-written side is the source, tagged."),
}
# How a training part's --data path or note names each corpus (the full Tatoeba before the short one)
NAMED_BY = {"multi30k": ("multi30k",), "tatoeba-2018": ("2018 edition", "tatoeba-2018"), "tatoeba": ("tatoeba",),
            "everyday-extra": ("everyday-extra",), "ding-lexicon": ("ding lexicon",),
            "back-translation": ("back-translated",)}
DECODINGS = {"greedy": N_("greedy"), "beam": N_("beam")}


def corpora(config: dict[str, Any]) -> list[str]:
    """The CORPORA a checkpoint was trained on, in every part of its training (Multi30K when nothing says)."""
    args = config.get("train_args", {})
    found: set[str] = set()
    for part in [*(p.get("train_args", {}) for p in training_parts(args)), args]:
        said = " ".join(str(part.get(k, "")) for k in ("data", "data_note")).lower()
        here = {name for name, needles in NAMED_BY.items() if any(n in said for n in needles)}
        found |= here - {"tatoeba"} if "tatoeba-2018" in here else here     # the full edition holds the short
    return [name for name in CORPORA if name in found] or ["multi30k"]


def read_eval_reports(directory: str | Path) -> list[dict[str, Any]]:
    """eval_results.json: one report per test set (`model.evaluate --write-card`); an older
    single report is read as a list of one."""
    data = _read_json(Path(directory) / EVAL_RESULTS, [])
    return [data] if isinstance(data, dict) else list(data)


def add_eval_report(directory: str | Path, report: dict[str, Any]) -> Path:
    """Store a report in eval_results.json, replacing the one for the same data and split."""
    kept = [r for r in read_eval_reports(directory) if _report_key(r) != _report_key(report)]
    path = Path(directory) / EVAL_RESULTS
    path.write_text(json.dumps([*kept, report], indent=2) + "\n")
    return path


def _report_key(report: dict[str, Any]) -> tuple[str, str]:
    return Path(str(report.get("data") or "multi30k")).name, str(report.get("split"))


def report_title(report: dict[str, Any]) -> str:
    """A test report's name, e.g. "tatoeba-en-de test (all 1,344 references of 1,000 sentences)", in the
    interface's language (i18n/)."""
    data = _report_key(report)[0]
    refs = (" " + _("(all {refs} references of {n} sentences)").format(refs=num(report['reference_count'], ","),
                                                                       n=num(report['sentences'], ","))
            if report.get("references") == "all" and report.get("reference_count", 0) > report.get("sentences", 0)
            else "")
    return f"{data} `{report.get('split')}`{refs}"


def read_training_log(directory: str | Path) -> list[dict]:
    """A checkpoint directory's training_log.jsonl, one record per epoch (empty if it has none)."""
    path = Path(directory) / "training_log.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line] if path.is_file() else []


def shape_rows(cfg: ModelConfig) -> dict[str, object]:
    """The model's shape, as a student reads it (in the interface's language, i18n/)."""
    return {
        "d_model": cfg.d_model, _("heads"): cfg.n_heads, _("d_k = d_model / heads"): cfg.d_head,
        _("encoder layers"): cfg.n_encoder_layers, _("decoder layers"): cfg.n_decoder_layers, "d_ff": cfg.d_ff,
        _("dropout"): cfg.dropout, _("norm"): _("pre-norm") if cfg.norm_first else _("post-norm (paper)"),
        _("vocabulary"): (_("{n} (joint)") if cfg.tie_embeddings else _("{n} (separate)")).format(n=cfg.src_vocab_size),
        _("max positions"): cfg.max_positions,
        _("FFN activation"): _("{activation} (paper)").format(activation=cfg.activation) if cfg.activation == "relu"
        else cfg.activation,
        _("positional encoding"): _("sin/cos interleaved (paper)") if cfg.pe_layout == "interleaved"
        else _("all sines, then all cosines (Marian)"),
        _("embeddings × √d_model"): _("yes (paper)") if cfg.scale_embedding else _("no"),
        _("output bias"): _("yes (Marian's final_logits_bias)") if cfg.logits_bias else _("no (paper)"),
        _("decoder start symbol"): _("<pad> (Marian)") if cfg.bos_id == cfg.pad_id else "<s>",
    }


def render_card(directory: str | Path) -> str:
    d = Path(directory)
    config = _read_json(d / "config.json", {})
    cfg = ModelConfig.from_dict(config["model"])
    log = read_training_log(d)
    evals = read_eval_reports(d)
    src, tgt = config.get("src_lang", "?"), config.get("tgt_lang", "?")
    args = config.get("train_args", {})
    lines = [
        f"# {d.name}: Transformer, {src} → {tgt}",
        "",
        "Trained by this project's `train.py`, from scratch, on this project's machine. "
        "Load it with `model.checkpoint.load_checkpoint`; the app lists it in its checkpoint picker.",
        "",
        "## Data",
        *(f"- {_(CORPORA[name])}" for name in corpora(config)),
        f"- Model selection on the val sets, test on the test sets. Tokenizer: sentencepiece BPE, "
        f"{cfg.src_vocab_size} pieces, {'joint for both languages' if cfg.tie_embeddings else 'one per language'}.",
        "",
        "## Licences",
        _("What you owe when you use or share this model: credit for the data it learnt from, as each line "
          "above says (Multi30K: non-commercial research and education; Tatoeba: CC BY 2.0 FR). The code that "
          "trained it is under the Apache License 2.0 (LICENSE)."),
        *([_("`lexicon.tsv.gz`, which the notice reads, is made of the Ding German-English dictionary's entries "
             "(Debian's trans-de-en 1.9, GPL-2+): share it under the same terms, naming Ding as its source."), ""]
          if (d / "lexicon.tsv.gz").is_file() and "ding-lexicon" not in corpora(config) else [""]),
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
    lines += [*_decoding(config.get("decoding")), *_precision(config.get("precision")),
              *_confidence(config.get("confidence")),
              *_faithfulness(config.get("faithfulness")), *_hand_check(config.get("hand_check")), "## Quality", ""]
    for report in evals:
        lines += _quality(report)
    if not evals:
        lines += ["Not evaluated on the test set yet: run `python -m model.evaluate --checkpoint "
                  f"{d} --write-card`.", ""]
    return "\n".join(lines)


def _quality(report: dict[str, Any]) -> list[str]:
    """One test set's scores: sacrebleu BLEU (cased, and lowercased when measured), chrF, speed."""
    rows = [(decoding_name(name, r), f"{r['bleu']:.2f}",
             "" if r.get("bleu_lowercase") is None else f"{r['bleu_lowercase']:.2f}", f"{r['chrf']:.2f}",
             r.get("sentences_per_second", "")) for name, r in report.get("results", {}).items()]
    lines = [f"sacrebleu on detokenized, cased text, {report_title(report)}:", "",
             *_table(("decoding", "BLEU", "BLEU (lowercased)", "chrF", "sentences/s"), rows)]
    first = next(iter(report.get("results", {}).values()), {})
    sigs = f"BLEU `{first.get('bleu_signature', '')}`, chrF `{first.get('chrf_signature', '')}`"
    return [*lines, "", *_by_length(report), f"Signatures: {sigs}.", "", f"Command: `{report.get('command', '')}`", ""]


def _by_length(report: dict[str, Any]) -> list[str]:
    """BLEU by the source's length in words (`model.evaluate` measures it), sentences in brackets."""
    results = {name: r["by_length"] for name, r in report.get("results", {}).items() if r.get("by_length")}
    if not results:
        return []
    words = [row["words"] for row in next(iter(results.values()))]
    rows = [(decoding_name(name, report["results"][name]),
             *("–" if row["bleu"] is None else f"{row['bleu']:.2f} ({row['sentences']:,})" for row in by_length))
            for name, by_length in results.items()]
    return ["BLEU by the source's length in words (sentences):", "",
            *_table(("decoding", *(f"{w} words" for w in words)), rows), ""]


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
        grown = f", {before['grown_from']}," if before.get("grown_from") else ""
        timed = (f" --time-budget {b['time_budget']:g} --cooldown-minutes {b['cooldown_minutes']:g}"
                 if b.get("cooldown_minutes") and b.get("time_budget") else "")
        device = f" on {b['device']}" if b.get("device") not in (None, "auto") else ""    # auto: see "hardware"
        lines.append(f"  - epochs {(before.get('epochs') or 0) + 1}-{end}: continued from those weights{grown} with "
                     f"`--init-from {b.get('init_from', '?')} --epochs {b.get('epochs', '?')} --cooldown-epochs "
                     f"{b.get('cooldown_epochs', 0):g}{timed}`{device} (an empty optimizer, the rate "
                     f"ramped up again over {b.get('rewarm', '?')} steps, amp {b.get('amp', '?')})"
                     f"{_other_data(a, b)}{ended}")
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
    return _section("Decoding",
                    f"Beam search uses the GNMT length penalty α = {decoding['alpha']:g} by default (the translate "
                    f"and trace CLIs, `model.evaluate` and the app), chosen on `{decoding.get('chosen_on', '?')}` "
                    f"with beam {decoding.get('beam_size', '?')} by `python -m model.tune`:",
                    ("α", "BLEU", "brevity penalty", "length ratio"),
                    [(f"{t['alpha']:g}", f"{t['bleu']:.2f}", f"{t['brevity']:.3f}", f"{t['length_ratio']:.3f}")
                     for t in decoding.get("tried", [])])


def _precision(entry: dict[str, Any] | None) -> list[str]:
    """How the app computes this model's sentences (`python -m model.precision --write`) and what that kept."""
    if not entry:
        return []
    if "identical" not in entry:
        tried = "; ".join(f"`{name}` {ms['fp32']:.0f} -> {ms[name]:.0f} ms"
                          for name, ms in entry.get("tried", {}).items())
        why = "" if not tried else (
            f", chosen by `python -m model.precision` on {', '.join(entry['chosen_on'])}: no scheme took at most "
            f"{entry['at_most']:.0%} of fp32's time for one sentence as the app decodes it ({tried})")
        return ["## Precision", "", f"The app serves it as {entry['scheme']}{why}.", ""]
    ms = entry["one_sentence_ms"]
    return _section("Precision",
                    f"The app serves it as `{entry['scheme']}` ({_scheme_words(entry)}), chosen by "
                    f"`python -m model.precision` on "
                    f"{', '.join(entry['chosen_on'])} ({entry['decoding']}); every attention weight within "
                    f"{entry['attention_gap']:.1e} of fp32's; one sentence as the app decodes it "
                    f"{ms['fp32']:.0f} -> {ms[entry['scheme']]:.0f} ms. The link parameter `fp32=1` shows plain fp32.",
                    ("set", "identical to fp32", "BLEU fp32", "BLEU served"),
                    [(name, f"{share:.1%}", *entry["bleu"][name]) for name, share in entry["identical"].items()])


def _scheme_words(entry: dict[str, Any]) -> str:
    """What the served scheme computes, and the memory its copy takes beside the fp32 model."""
    words = DESCRIPTIONS.get(entry["scheme"], entry["scheme"])
    return words if entry.get("added_mb") is None else f"{words}; its copy holds {entry['added_mb']} MB beside fp32's"


def _confidence(entry: dict[str, Any] | None) -> list[str]:
    """When the app flags a translation (`python -m model.calibrate`), and how that did on val."""
    if not entry:
        return []
    extra = {"missing_share": "the share of source content words whose every translation in `lexicon.tsv.gz` is "
                              "missing from the output (the notice names such words the model read in fewer than 20 "
                              "training sentences)",
             "uncovered_share": "the share of source content words the output barely attended to"}
    said = "; ".join(extra[f] for f in entry.get("features", []) if f in extra)
    return _section("Confidence",
                    f"The app flags a translation when P(wrong) ≥ {entry['threshold']:.2f}, from the mean and lowest "
                    f"token log-probability and the share of source words not in `familiar_words.txt` (the "
                    f"training sources' words){'; ' + said if said else ''}; {entry.get('note', '')}.",
                    ("val set", "sentences", "wrong", "wrong flagged", "right flagged", "unflagged that are wrong"),
                    [(name, r["sentences"], r["wrong"], f"{r['wrong_flagged']:.0%}", f"{r['right_flagged']:.0%}",
                      f"{r['confident_wrong']:.0%}" if "confident_wrong" in r else "-")
                     for name, r in entry.get("val", {}).items()])


def _faithfulness(entry: dict[str, Any] | None) -> list[str]:
    """How faithful each attribution method is on this model (`python -m model.attribution.faithfulness`)."""
    if not entry:
        return []
    drop, err = entry["drop"], entry["stderr"]
    return _section("Attribution: how faithful each method is",
                    f"Mean drop of each generated token's log-probability when a method's top-1 / top-3 source "
                    f"tokens are hidden, over {entry['sentences']} sentences of {entry['split']} ({entry['tokens']} "
                    f"tokens, the model's own greedy translations; `random`: the control).",
                    ("method", "top-1 hidden", "top-3 hidden"),
                    [(m, f"{drop[m]['1']:.2f} ± {err[m]['1']:.2f}", f"{drop[m]['3']:.2f} ± {err[m]['3']:.2f}")
                     for m in sorted(drop, key=lambda m: -drop[m]["1"])])


def hand_check_sentence(entry: dict[str, Any]) -> str:
    """How many everyday sentences, written by hand and in no data set, a person judged right."""
    return (f"{entry['right']} of {entry['of']} everyday sentences of {entry['words']} words, written by hand and in "
            f"no data set, judged right by a person (every content word kept, no grammar error; "
            f"`{entry['table']}`){'; before: ' + str(entry['before']) if 'before' in entry else ''}.")


def _hand_check(entry: dict[str, Any] | None) -> list[str]:
    return ["## Judged by hand", "", hand_check_sentence(entry), ""] if entry else []


def _section(title: str, text: str, header: tuple[str, ...], rows: list[tuple]) -> list[str]:
    """A card section: its heading, one paragraph, a table."""
    return [f"## {title}", "", text, "", *_table(header, rows), ""]


def _table(header: tuple[str, ...], rows: list[tuple]) -> list[str]:
    """A markdown table's lines."""
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(str(v) for v in row) + " |" for row in rows)]


def decoding_name(name: str, result: dict[str, Any]) -> str:
    """An evaluation row's name with its length penalty, e.g. "beam 4 (α 1.4)" (the method in the
    interface's language)."""
    method, _space, size = name.partition(" ")
    shown = _(DECODINGS[method]) + (f" {size}" if size else "") if method in DECODINGS else name
    return f"{shown} (α {result['alpha']:g})" if "alpha" in result else shown


def write_card(directory: str | Path) -> Path:
    path = Path(directory) / "README.md"
    path.write_text(render_card(directory))
    return path
