"""The instrumented Transformer of "Attention Is All You Need" (Vaswani et al., 2017).

Public entry points (imported lazily, so `python -m model.trace` runs cleanly):
    ModelConfig, PRESETS        -- model/config.py
    Transformer                 -- model/transformer.py
    Trace, Recording            -- model/trace/
    Tokenizer                   -- model/tokenizer.py
    load_checkpoint, save_checkpoint, CheckpointError -- model/checkpoint.py
"""
from importlib import import_module
from typing import Any

_EXPORTS = {"ModelConfig": "model.config", "PRESETS": "model.config", "Trace": "model.trace",
            "Recording": "model.trace", "Transformer": "model.transformer", "Tokenizer": "model.tokenizer",
            "load_checkpoint": "model.checkpoint", "save_checkpoint": "model.checkpoint",
            "CheckpointError": "model.checkpoint"}
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'model' has no attribute {name!r}")
