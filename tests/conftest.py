"""Shared fixtures: tiny models and tokenizers made on the spot (no data needed)."""
from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
import torch

from model.config import preset
from model.tokenizer import Tokenizer
from model.transformer import Transformer

# Tiny models gain nothing from threads, and one thread keeps a shared 2-core machine usable.
torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parent.parent
MULTI30K = Path(os.environ.get("MULTI30K_DIR", ROOT.parent / "shared" / "data" / "multi30k"))
WORDS = "a the dog cat man woman runs sits on in park street red blue ball big small child plays".split()


def tiny_model(vocab: int = 40, seed: int = 0, **overrides) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(preset("tiny", src_vocab_size=vocab, tgt_vocab_size=vocab, **overrides)).eval()


def random_batch(vocab: int, lengths: list[int], seed: int = 0, bos: bool = False) -> torch.Tensor:
    """Padded (B, max(lengths)) ids in 4..vocab-1; EOS (3) last, or BOS (2) first."""
    g = torch.Generator().manual_seed(seed)
    out = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    for i, n in enumerate(lengths):
        out[i, :n] = torch.randint(4, vocab, (n,), generator=g)
        if bos:
            out[i, 0] = 2
        else:
            out[i, n - 1] = 3
    return out


def sentences(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8))) for _ in range(n)]


@pytest.fixture(scope="session")
def tokenizer() -> Tokenizer:
    return Tokenizer.train(sentences(400), vocab_size=60)


@pytest.fixture(scope="session")
def app_checkpoints(tokenizer, tmp_path_factory) -> Path:
    """A checkpoints/ directory holding one tiny untrained en->de checkpoint whose EOS
    embedding is zeroed, so it talks (up to the length limit) instead of stopping at once."""
    from model.checkpoint import save_checkpoint
    root = tmp_path_factory.mktemp("checkpoints")
    m = tiny_model(tokenizer.vocab_size, seed=1)
    with torch.no_grad():
        m.src_embed.lut.weight[3].zero_()
    save_checkpoint(root / "multi30k-en-de", m, tokenizer, tokenizer, meta={"src_lang": "en", "tgt_lang": "de"})
    save_checkpoint(root / "multi30k-de-en", m, tokenizer, tokenizer, meta={"src_lang": "de", "tgt_lang": "en"})
    return root


CHROMIUM = "/usr/bin/chromium"


def wait_healthy(url: str, proc, timeout: float = 180) -> None:
    """Poll url/_stcore/health until it says ok; else kill proc and fail with its output."""
    import time
    import urllib.request
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read() == b"ok":
                return
        except OSError:
            time.sleep(0.5)
    proc.kill()
    pytest.fail(f"{url} did not become healthy: " + (proc.stdout.read() if proc.stdout else ""))


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium, headless, driven by Playwright (never `playwright install`)."""
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-dev-shm-usage"])
        yield b
        b.close()
