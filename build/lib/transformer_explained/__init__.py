"""transformer-explained: the original Transformer, trained here, with every head, mask and positional
encoding on view. The installed command is `transformer-explained` (transformer_explained/cli.py);
the code lives in the packages model, figures, serving and app."""
from __future__ import annotations

from importlib import metadata


def version() -> str:
    try:
        return metadata.version("transformer-explained")
    except metadata.PackageNotFoundError:        # a checkout that was never installed
        return "0+checkout"
