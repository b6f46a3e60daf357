"""Marian models by their Hugging Face hub name ("Helsinki-NLP/opus-mt-en-de"): fetched with
huggingface_hub when the hub can be reached, read from the local Hugging Face cache when not
(HF_HUB_OFFLINE=1, or no network). Only the files a conversion reads are fetched, never pickled
weights. Every failure is one ConvertError that says what to do.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

FILES = ["config.json", "model.safetensors", "source.spm", "target.spm", "vocab.json", "tokenizer_config.json"]
REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


class HubError(ValueError):
    """A model that cannot be had by its name; the message says why and what to do."""


def is_repo_id(text: str) -> bool:
    """"owner/name" that is not a directory here."""
    return bool(REPO_ID.match(text)) and not Path(text).exists()


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


def cache_dir() -> str | None:
    """The Hugging Face cache as the environment names it now (HF_HUB_CACHE, else HF_HOME/hub)."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    return str(Path(os.environ["HF_HOME"]) / "hub") if os.environ.get("HF_HOME") else None


def fetch(repo_id: str) -> Path:
    """The local directory of a Marian model's files, from the hub or the cache. Raises HubError."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import (
            GatedRepoError,
            HfHubHTTPError,
            LocalEntryNotFoundError,
            RepositoryNotFoundError,
        )
    except ImportError:
        raise HubError("opening a model by its name needs huggingface_hub: pip install 'transformer-explained[hf]' "
                       "(or give the model's folder instead)") from None
    try:
        path = Path(snapshot_download(repo_id, allow_patterns=FILES, local_files_only=offline(), cache_dir=cache_dir()))
    except GatedRepoError:
        raise HubError(f"{repo_id} is gated: accept its terms on huggingface.co/{repo_id} and log in "
                       "(`hf auth login`), then try again") from None
    except RepositoryNotFoundError:
        raise HubError(f"there is no model {repo_id!r} on the Hugging Face hub (a typo? OPUS-MT names look like "
                       "Helsinki-NLP/opus-mt-en-de)") from None
    except LocalEntryNotFoundError:
        where = os.environ.get("HF_HOME") or "~/.cache/huggingface"
        why = "HF_HUB_OFFLINE=1 is set" if offline() else "the hub cannot be reached"
        raise HubError(f"{repo_id} is not in the local Hugging Face cache ({where}) and {why}: fetch it once on a "
                       f"machine with internet (`transformer-explained convert from-hf {repo_id}`) and copy the "
                       "cache folder, or give the model's folder instead") from None
    except (HfHubHTTPError, OSError) as exc:
        raise HubError(f"the Hugging Face hub cannot be reached ({str(exc).splitlines()[0][:120]}); with the model "
                       "in the local cache, set HF_HUB_OFFLINE=1") from None
    if not (path / "model.safetensors").is_file():
        raise HubError(f"{repo_id} has no model.safetensors, only pickled weights (pytorch_model.bin) or none, and "
                       "this project never loads a pickle: convert it once with transformers where you trust it "
                       "(MarianMTModel.from_pretrained(...).save_pretrained(DIR, safe_serialization=True)), "
                       "then `convert from-hf DIR`")
    return path


def local_name(repo_id: str) -> str:
    """The checkpoint name a hub model gets: its name without the owner ("opus-mt-en-de")."""
    return repo_id.rsplit("/", 1)[-1]
