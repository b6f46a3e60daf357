"""The record of one run (record.py): every layer's and head's attention, the masks, the positional
encodings, and what a recording asks for. The package re-exports it; `python -m model.trace` is
model/commands/trace.py."""
from model.network.trace.record import (  # noqa: F401
    Recording,
    Trace,
)
