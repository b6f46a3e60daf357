"""The words said beside the figures, where the app's pages and the lesson file (webpage/) both say them:
marked for the catalog (N_), put into words where shown (`_(...)`)."""
from __future__ import annotations

from i18n import N_

DECODING = {
    "greedy": N_("Greedy decoding: at each step the decoder sees the source (through cross-attention) and the "
                 "tokens so far (masked self-attention), outputs P(next token) = softmax(h Wᵀ), and takes the "
                 "likeliest token."),
    "beam": N_("Beam search keeps the k best partial translations. Each step extends every one by its likeliest "
               "tokens, scores them by total log-probability divided by the length penalty ((5+n)/6)^α, keeps the "
               "best k, and sets aside those that ended with </s>."),
    "sample": N_("Sampling draws each token at random from softmax(logits / T): a low temperature T sharpens the "
                 "distribution towards greedy, a high one flattens it."),
}

POSITIONAL_INTRO = N_(
    "Attention itself ignores word order: every token is compared with every other. The model knows positions "
    "only because a fixed pattern of sines and cosines is added to each token's embedding before the first layer."
)

HALVES_NOTE = N_(
    "This model (Marian) lays the same sinusoids out differently from the paper: all sines in the first half of "
    "the dimensions, all cosines in the second."
)

CURVES_CAPTION = N_(
    "Low dimensions turn fast, high ones slowly: together they give each position a unique code, and "
    "PE(pos + k) is a fixed rotation of PE(pos) for any offset k, so relative positions are easy to use."
)

SHORT_SENTENCE = {"en": "A dog.", "de": "Ein Hund.", "fr": "Un chien."}     # the padding mask's second sentence


def short_sentence(lang: str) -> str:
    return SHORT_SENTENCE.get(lang, SHORT_SENTENCE["en"])


MASKS_INTRO = N_(
    "A mask says which keys each query may look at (1) and which are blocked (0). Blocked scores are set to −∞ "
    "before the softmax, so their weights come out exactly 0."
)

PADDING_CAPTION = N_(
    "The shorter sentence is padded with <pad> to the batch length; its padded columns are blocked, so no real "
    "token attends to padding. (Padded rows are computed but never used.)"
)

ATTRIBUTION_INTRO = N_(
    "A heatmap of attention shows where a head *looked*. What a prediction *depended on* is another "
    "question: a head can look hard at a token whose value vector is tiny, and the residual stream carries "
    "most of a token's information past attention. Each method below scores, for every generated token "
    "(rows), every source token and every earlier output token (columns, after the line). The colours are "
    "shares of each row, on one scale for all methods."
)


def default_pe_dims(d: int, layout: str) -> list[int]:
    """A fast sine and its cosine, a slower pair, the slowest sine."""
    if layout == "halves":
        return [0, d // 2, 8, d // 2 + 8, d // 2 - 1]
    return [0, 1, 8, min(64, d - 2), d - 2]
