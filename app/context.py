"""The one argument of every page: what the page shows, and how to get more of it.

    ctx.checkpoint      the loaded model and tokenizers (shared, read-only)
    ctx.settings        the sidebar's choices (decoding options, display)
    ctx.text            the student's sentence (None on pages that take none)
    ctx.explanation     its decoding and full trace, with the sidebar's decoding options
    ctx.greedy          the same sentence decoded greedily        } computed when first
    ctx.with_qkv        the explanation with each head's Q, K, V  } asked for, cached
    ctx.with_stream     the explanation with the residual stream  } per process
    ctx.knocked_out(h)  the explanation with heads h switched off }
    ctx.attribution(upto) what each generated token used, by every method up to a cost (Cost.TRACE:
                        one traced pass; Cost.INTEGRATED: with integrated gradients), once per process
    ctx.encoder_batch(texts)  a padded batch of sentences through the encoder
    ctx.cursor          the step-through page's StepCursor (session state)
    ctx.figure(name, key, build)  a figure of this sentence, built once per process (key: what
                        else it is drawn from) with the sidebar's display applied
    ctx.open(slug)      go to another page (its widgets' values set beforehand stay)

Extras go through app/resources.py's caches, so two students asking for the same
thing share one computation; nothing here is stored on the model.
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import plotly.graph_objects as go
import streamlit as st
import torch

from app import resources, state
from app.links import Site
from app.settings import SidebarChoices
from app.state import StepCursor
from i18n import language
from model.analysis.attribution import Attribution, Cost
from model.inference.decoding import ForcedResult
from model.inference.options import DecodeOptions
from model.inference.pipeline import Explanation
from model.network.trace import Recording, Trace
from model.storage.checkpoint import Checkpoint


@dataclass
class Context:
    checkpoint: Checkpoint
    settings: SidebarChoices
    text: str | None = None
    _explanation: Explanation | None = field(default=None, repr=False)
    pages: Mapping[str, Any] = field(default_factory=dict, repr=False)   # slug -> st.Page
    site: Site | None = field(default=None, repr=False)    # for a fragment that writes the link (`app.links.Site`)

    @property
    def path(self) -> str:
        return str(self.settings.checkpoint)

    @property
    def precision(self) -> str:
        """How this session's sentences are computed (the sidebar's choice: model/inference/precision.py)."""
        return self.settings.precision

    @property
    def explanation(self) -> Explanation:
        if self._explanation is None:
            if self.text is None:
                raise ValueError("this page takes no sentence")
            self._explanation = resources.get_explanation(self.path, self.text, self.settings.opts,
                                                              precision=self.precision)
        return self._explanation

    @cached_property
    def greedy(self) -> Explanation:
        """The sentence decoded greedily (for comparing with beam search)."""
        if self.settings.opts.method == "greedy":
            return self.explanation
        return resources.get_explanation(self.path, self.explanation.text, greedy_options(self.settings.opts),
                                         precision=self.precision)

    def recorded(self, recording: Recording) -> Explanation:
        """The explanation with a trace that records `recording` (the decoding is the same)."""
        return resources.get_explanation(self.path, self.explanation.text, self.settings.opts, recording=recording,
                                         precision=self.precision)

    @cached_property
    def with_stream(self) -> Explanation:
        return self.recorded(WITH_STREAM)

    def open(self, slug: str) -> None:
        st.switch_page(self.pages[slug])

    @cached_property
    def with_qkv(self) -> Explanation:
        return self.recorded(WITH_QKV)

    def attribution(self, upto: Cost, on_progress: Callable[[int, int], None] | None = None) -> Attribution:
        """What each token of the translation used (model/analysis/attribution), every method up to the cost
        `upto` (Cost.TRACE: the attention methods and ALTI+, one traced pass), computed once per process."""
        return resources.get_attribution(self.checkpoint, self.explanation, self.figure_key, upto, on_progress)

    def compute_ahead(self, names: Collection[str]) -> None:
        """The decoding, and what `names` say a page computes from it for every session alike (Page.ahead): computed
        into the process's caches, drawing nothing. Unknown names are left out (an announcement from another
        version of the app: serving/class_ahead.py)."""
        _ = self.explanation
        if "greedy" in names:                    # the step page's side by side
            _ = self.greedy
        if "attribution" in names:               # its "what it used", the first step's drawn first
            self.attribution(Cost.TRACE)

    def attribution_ready(self, upto: Cost) -> bool:
        return resources.attribution_ready(self.figure_key, upto)

    def knocked_out(self, heads: frozenset[str]) -> Explanation:
        return resources.get_explanation(self.path, self.explanation.text, self.settings.opts, knockout=heads,
                                         precision=self.precision)

    def token_probabilities(self, knockout: frozenset[str] = frozenset()) -> ForcedResult:
        """Each output token's probability and rank, fed the translation so far (heads `knockout` off)."""
        return resources.get_token_probabilities(self.path, self.explanation.text, self.settings.opts, knockout,
                                                 self.precision)

    def logit_lens(self) -> torch.Tensor:
        """(L, T, V): each decoder layer's next-token log-probabilities; the last layer's is the model's own."""
        return resources.get_logit_lens(self.path, self.explanation.text, self.settings.opts, WITH_STREAM,
                                        self.precision)

    def encoder_batch(self, texts: tuple[str, ...]) -> Trace:
        return resources.get_encoder_batch(self.path, texts)

    @property
    def figure_key(self) -> tuple:
        """What every figure of this sentence's decoding depends on (the display is applied apart)."""
        return self.path, self.precision, self.explanation.text, self.settings.opts

    def figure(self, name: str, key: Hashable, build: Callable[[], go.Figure], cache: bool = True) -> go.Figure:
        """The figure `name` of this sentence, drawn from `key` too, on the sidebar's display:
        built once per process and shared by every session that asks for the same. `cache=False`
        for a figure that one click draws and that costs about a millisecond (one head's heatmap):
        drawn fresh, the display applied the same way (measured: caching each of those made a
        class's first pages slower, BENCHMARKS.md session 11)."""
        if not cache:
            return self.settings.display.apply(build())
        return resources.get_figure(name, (self.figure_key, key), self.settings.display, language(), build)

    @property
    def cursor(self) -> StepCursor:
        return state.cursor()


WITH_STREAM = Recording(scores=True, stream=True)   # the overview and the lesson
WITH_QKV = Recording(scores=True, qkv=True)         # inside one head


def greedy_options(opts: DecodeOptions) -> DecodeOptions:
    return DecodeOptions("greedy", record_steps=True, record_top_k=opts.record_top_k)
