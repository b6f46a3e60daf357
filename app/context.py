"""The one argument of every page: what the page shows, and how to get more of it.

    ctx.checkpoint      the loaded model and tokenizers (shared, read-only)
    ctx.settings        the sidebar's choices (decoding options, display)
    ctx.text            the student's sentence (None on pages that take none)
    ctx.explanation     its decoding and full trace, with the sidebar's decoding options
    ctx.greedy          the same sentence decoded greedily        } computed when first
    ctx.with_qkv        the explanation with each head's Q, K, V  } asked for, cached
    ctx.with_stream     the explanation with the residual stream  } per process
    ctx.knocked_out(h)  the explanation with heads h switched off }
    ctx.encoder_batch(texts)  a padded batch of sentences through the encoder
    ctx.cursor          the step-through page's StepCursor (session state)
    ctx.open(slug)      go to another page (its widgets' values set beforehand stay)

Extras go through app/resources.py's caches, so two students asking for the same
thing share one computation; nothing here is stored on the model.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import streamlit as st

from app import resources, state
from app.cursor import StepCursor
from app.settings import Settings
from model.checkpoint import Checkpoint
from model.decoding import DecodeOptions
from model.pipeline import Explanation
from model.trace import Trace


@dataclass
class Context:
    checkpoint: Checkpoint
    settings: Settings
    text: str | None = None
    _explanation: Explanation | None = field(default=None, repr=False)
    pages: Mapping[str, Any] = field(default_factory=dict, repr=False)   # slug -> st.Page

    @property
    def path(self) -> str:
        return str(self.settings.checkpoint)

    @property
    def explanation(self) -> Explanation:
        if self._explanation is None:
            if self.text is None:
                raise ValueError("this page takes no sentence")
            self._explanation = resources.get_explanation(self.path, self.text, self.settings.opts)
        return self._explanation

    @cached_property
    def greedy(self) -> Explanation:
        """The sentence decoded greedily (for comparing with beam search)."""
        if self.settings.opts.method == "greedy":
            return self.explanation
        return resources.get_explanation(self.path, self.explanation.text, greedy_options(self.settings.opts))

    @cached_property
    def with_stream(self) -> Explanation:
        return resources.get_explanation(self.path, self.explanation.text, self.settings.opts, stream=True)

    def open(self, slug: str) -> None:
        st.switch_page(self.pages[slug])

    @cached_property
    def with_qkv(self) -> Explanation:
        return resources.get_explanation(self.path, self.explanation.text, self.settings.opts, qkv=True)

    def knocked_out(self, heads: frozenset[str]) -> Explanation:
        return resources.get_explanation(self.path, self.explanation.text, self.settings.opts, knockout=heads)

    def encoder_batch(self, texts: tuple[str, ...]) -> Trace:
        return resources.get_encoder_batch(self.path, texts)

    @property
    def figure_key(self) -> tuple:
        """What every figure of this sentence's decoding depends on, plus the display settings."""
        return (self.path, self.explanation.text, self.settings.opts, self.settings.colorscale,
                self.settings.font_size)

    @property
    def cursor(self) -> StepCursor:
        return state.cursor()


def greedy_options(opts: DecodeOptions) -> DecodeOptions:
    return DecodeOptions("greedy", record_steps=True, record_top_k=opts.record_top_k)
