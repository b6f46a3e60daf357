"""Every command-line tool of model/, in one table: `transformer-explained NAME` (transformer_explained/cli.py)
and `python -m model.NAME` (model/moved.py) both read it.

COMMAND says how a tool was called, for its --help: `transformer-explained NAME` when run through the
installed command (which sets it), else `python -m model.NAME` as from a checkout.
"""
from __future__ import annotations

import contextvars
from dataclasses import dataclass

COMMAND: contextvars.ContextVar[str | None] = contextvars.ContextVar("command", default=None)


@dataclass(frozen=True)
class Command:
    module: str         # whose main(argv) runs it
    summary: str        # one line for `transformer-explained --help`
    shortcut: str       # what `python -m` takes, from a checkout


def _command(name: str, summary: str, module: str | None = None, shortcut: str | None = None) -> Command:
    return Command(module or f"model.commands.{name}", summary, shortcut or f"model.{name}")


COMMANDS: dict[str, Command] = {
    "translate": _command("translate", "translate sentences from a file or standard input"),
    "trace": _command("trace", "a translation's whole trace (attention, masks, encodings) as JSON"),
    "evaluate": _command("evaluate", "BLEU and chrF of a checkpoint on a test set"),
    "convert": _command("convert", "Marian / OPUS-MT models in (from a folder or by name), ours out"),
    "tune": _command("tune", "choose a checkpoint's beam length penalty on val"),
    "calibrate": _command("calibrate", "fit when the app flags a translation as unsure"),
    "heads": _command("heads", "every head's statistics over a set of sentences"),
    "attribution": _command("attribution", "what each generated token used, by every method"),
    "train": _command("train", "train a Transformer (CPU, CUDA, torchrun)", shortcut="model.train"),
    "precision": _command("precision", "which int8 scheme a checkpoint may be served with (measured against fp32)"),
    "grow": _command("grow", "a deeper model from a trained one, to train on (new layers start near identity)"),
    "html": Command("webpage.command", "one self-contained web page of a sentence or a lesson: opens offline",
                    "model.html"),
    "backtranslate": _command("backtranslate", "translate a monolingual corpus in shards that resume (training data)"),
    "mix": _command("mix", "the training mix of everyday pairs, lexicon entries and back-translations"),
    "visit": _command("visit", "a whole visit to a lent GPU in one command: teachers, distillation, students"),
    "faithfulness": _command("faithfulness", "how faithful each attribution method is (deletion curves)",
                             shortcut="model.attribution.faithfulness"),
}


def prog(module: str) -> str:
    return COMMAND.get() or f"python -m {module}"
