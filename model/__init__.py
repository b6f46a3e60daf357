"""The instrumented Transformer of "Attention Is All You Need" (Vaswani et al., 2017).

Public entry points:
    ModelConfig, PRESETS        -- model/config.py
    Transformer                 -- model/transformer.py
    Trace                       -- model/trace.py
    Tokenizer                   -- model/tokenizer.py
    load_checkpoint, save_checkpoint, CheckpointError -- model/checkpoint.py
"""
from model.config import PRESETS, ModelConfig
from model.trace import Trace
from model.transformer import Transformer

__all__ = ["ModelConfig", "PRESETS", "Trace", "Transformer"]
