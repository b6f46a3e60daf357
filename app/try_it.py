"""The guided lesson's "Try it" buttons (issue 54): one click opens a page on a sentence where its question
shows something, with the question already asked: a forced first word on the step page, why one word and
not another on "What the model used", a changed word on the explorer, a word of several pieces at once.

Each `TryIt` names its page, its sentence for each source language of the shipped models, and what it sets;
`button` applies it the way a link is applied (the settings' owner, app/state.py) and opens the page.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import streamlit as st

from app import resources, state, what_if
from app.context import Context
from app.settings import EDITED, FORCED, LAYER, METHOD, TEXT
from app.views import explore
from i18n import _
from model.analysis.readings import word_pieces
from model.inference.pipeline import InputError, forced_ids, source_ids
from model.storage.checkpoint import Checkpoint

ANIMAL = {"en": "The animal didn't cross the street because it was too tired.",
          "de": "Das Tier überquerte die Straße nicht, weil es zu müde war."}


@dataclass(frozen=True)
class TryIt:
    page: str                                              # the page it opens
    sentences: Mapping[str, str]                           # the sentence, by the model's source language
    settings: Mapping[str, Any] = field(default_factory=dict)         # setting name -> value
    force: Mapping[str, str] = field(default_factory=dict)            # a first word forced, by target language
    edited: Mapping[str, str] = field(default_factory=dict)           # the sentence compared, by source language
    ask: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # (its word, another), by target language
    several: Mapping[str, str] = field(default_factory=dict)          # a source word taken whole, by language
    opens: str | None = None                               # the lazy expander it opens

    def offered(self, ckpt: Checkpoint) -> bool:
        return ckpt.src_lang in self.sentences


def _apply(ctx: Context, t: TryIt) -> None:
    """Everything the try-it sets, for the next run (the page it opens)."""
    ckpt, src, tgt = ctx.checkpoint, ctx.checkpoint.src_lang, ctx.checkpoint.tgt_lang
    text = t.sentences[src]
    state.choose_next_run(TEXT.name, text)
    for name, value in t.settings.items():
        state.choose_next_run(name, value)
    state.choose_next_run(FORCED.name, " ".join(ckpt.tgt_tokenizer.pieces(forced_ids(ckpt, t.force[tgt])))
                          if tgt in t.force else "")
    if src in t.edited:
        state.choose_next_run(EDITED.name, t.edited[src])
    if src in t.several:
        pieces = ckpt.src_tokenizer.pieces(source_ids(ckpt, text))
        first = ckpt.src_tokenizer.pieces(ckpt.src_tokenizer.encode(t.several[src]))[0]
        state.choose_next_run(explore.SEVERAL.name, word_pieces(pieces, pieces.index(first))[:1])
    if tgt in t.ask:
        word, other = t.ask[tgt]
        opts = replace(ctx.settings.opts, prefix=())
        output = ckpt.tgt_tokenizer.pieces(resources.get_explanation(ctx.path, text, opts,
                                                                     precision=ctx.precision).result.tokens)
        piece = ckpt.tgt_tokenizer.pieces(ckpt.tgt_tokenizer.encode(word))[0]
        state.mirror(what_if.WHY_POSITION, output.index(piece) if piece in output else 0)
        state.mirror(what_if.WHY_TYPED, other)
    if t.opens:
        state.mirror(t.opens, True)


def button(ctx: Context, t: TryIt | None, where: Any = st) -> None:
    """"Try it": the try-it applied and its page opened (nothing for a model of another language)."""
    if t is None or not t.offered(ctx.checkpoint):
        return
    if where.button(_("Try it"), key="try_it", icon=":material/play_circle:", type="primary"):
        try:
            _apply(ctx, t)
        except (InputError, ValueError) as exc:
            where.warning(str(exc))
            return
        ctx.open(t.page)


# The four questions of issue 54, each on a sentence where it shows something.
FORCE_A_WORD = TryIt("step", ANIMAL, {METHOD.name: "greedy"}, force={"de": "Die", "en": "A"})
WHY_NOT = TryIt("attribution", ANIMAL, ask={"de": ("es", "sie"), "en": ("it", "he")}, opens=what_if.WHY_BOX)
CHANGE_A_WORD = TryIt("explore", ANIMAL, {explore.KIND.name: "cross", LAYER.name: 3},   # the last layer
                      opens=what_if.COMPARE_BOX,
                      edited={"en": "The animal didn't cross the street because it was too wide.",
                              "de": "Das Tier überquerte die Straße nicht, weil sie zu breit war."})
SEVERAL_AT_ONCE = TryIt("explore", ANIMAL, {explore.KIND.name: "encoder_self", explore.WHOLE_WORDS.name: True,
                                            explore.SEVERAL_SIDE.name: "keys"},
                        several={"en": "didn't", "de": "überquerte"}, opens=explore.SEVERAL_BOX)
