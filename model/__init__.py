"""The instrumented Transformer of "Attention Is All You Need" (Vaswani et al., 2017), in rooms by concern:

    network/     the model as in the paper's figure: config, masks, layers, transformer, tokenizer, a
                 batch, the three attention kinds, and the trace its layers write (with its names)
    inference/   decoding (its options apart from its engine), the pipeline a page or a tool calls,
                 the residual stream, ensembles, the confidence notice
    analysis/    what is read off a model: attribution methods, head statistics and knockout, readings
    training/    the training loop, its data, the lab's tasks and runs, BLEU/chrF
    storage/     checkpoints on disk, the model card, where checkpoints live, Marian conversion, the hub
    commands/    the command-line tools (one module each) and their registry

Public entry points (imported lazily, so `python -m model.trace` runs cleanly):
    ModelConfig, PRESETS        -- model/network/config.py
    Transformer                 -- model/network/transformer.py
    Trace, Recording            -- model/network/trace/
    Tokenizer                   -- model/network/tokenizer.py
    load_checkpoint, save_checkpoint, CheckpointError -- model/storage/checkpoint.py
Rooms import downwards only: network <- inference <- storage <- training <- analysis <- commands
(tests/test_structure.py). Old module paths (model.checkpoint, model.pipeline, `python -m model.translate`,
...) keep working: model/moved.py.
"""
from importlib import import_module
from typing import Any

from model import moved

moved.install()

_EXPORTS = {"ModelConfig": "model.network.config", "PRESETS": "model.network.config",
            "Trace": "model.network.trace", "Recording": "model.network.trace",
            "Transformer": "model.network.transformer", "Tokenizer": "model.network.tokenizer",
            "load_checkpoint": "model.storage.checkpoint", "save_checkpoint": "model.storage.checkpoint",
            "CheckpointError": "model.storage.checkpoint"}
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'model' has no attribute {name!r}")
