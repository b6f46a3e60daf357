"""How faithful each attribution method is on a model: the command of
model/analysis/attribution/faithfulness.py (which holds the measure and its documentation)."""
from __future__ import annotations

import argparse
import json
import sys

from tqdm import tqdm

from model.analysis.attribution import methods
from model.analysis.attribution.faithfulness import __doc__ as FAITHFULNESS_DOC
from model.analysis.attribution.faithfulness import evaluate, table
from model.commands import registry as command
from model.commands import shared as cli
from model.storage.checkpoint import write_config_entry


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog=command.prog("model.attribution.faithfulness"),
        description="How faithful is each attribution method on this model? Erase each method's top-1 / top-3 "
                    "source tokens per generated token and measure the drop in log-probability of the model's own "
                    "greedy translation (ERASER comprehensiveness), against random tokens as the control.",
        epilog=FAITHFULNESS_DOC.split("\n\n")[-1], formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_checkpoint_arg(ap)
    cli.add_split_args(ap, "test_2016_flickr")
    ap.add_argument("--seed", type=int, default=0, help="for the random control (default 0)")
    ap.add_argument("--workers", type=int, default=1, help="sentences attributed at once, in threads (with "
                    "--threads 1 each keeps one core busy; default 1)")
    ap.add_argument("--write", action="store_true", help="store the result in the checkpoint's config.json "
                    "(\"faithfulness\"): the app's attribution page quotes it")
    ap.add_argument("--json", metavar="FILE", help="also write the result as JSON")
    args = ap.parse_args(argv)
    ckpt = cli.load_or_exit(args)
    texts, _ = cli.read_split(args, ckpt)
    with tqdm(total=len(texts), file=sys.stderr, desc="attributing", unit="sent") as bar:
        summary = evaluate(ckpt, texts, seed=args.seed, workers=args.workers, on_progress=bar.update)
    labels = {k: m.label for k, m in methods(ckpt.config.n_decoder_layers).items()}
    result = summary.to_dict() | {"data": args.data, "split": args.split}
    print(table(summary, labels))
    print(f"{summary.sentences} sentences, {summary.tokens} generated tokens; integrated gradients complete within 1 % "
          f"for {summary.ig_completeness_within_1pct:.1%} of tokens; seconds per sentence: "
          + ", ".join(f"{k} {v:.2f}" for k, v in summary.seconds_per_sentence.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.write:
        write_config_entry(ckpt.path, "faithfulness", result)
        print(f"wrote config.json \"faithfulness\" in {ckpt.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
