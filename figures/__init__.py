"""Pure figure builders: plain arrays and token lists in, plotly figures out (no Streamlit).

One module per topic; this package names every builder so that pages can write
`figures.attention_heatmap(...)`. The display (font size, colour scale) is not an
argument of any builder: `figures.common.Display.apply` sets it once, where a figure is
cached (app/ui.py). The paper's figure 1 is `figures.diagram`; the lesson's steps, which
pick their arrays from a trace, live with their page (app/views/lesson.py). No builder runs
the model or imports torch (tests/test_structure.py).
"""
from figures.attention import (
    attention_difference,
    attention_grid,
    attention_heads,
    attention_heatmap,
    grid_layout,
    heads_by_token,
    mask_heatmap,
    row_across_heads,
    score_pipeline,
    scores_heatmap,
)
from figures.attribution import (
    attribution_heatmap,
    contrast_heatmap,
    faithfulness_bars,
    head_agreement_grid,
    looked_vs_used,
    source_share_bars,
    step_used_vs_looked,
)
from figures.common import COLORSCALE, CONTRAST_COLORSCALE, MARGIN, Display, label, labels, shared
from figures.decoding import beam_tree, distribution, token_confidence, top_k_bar
from figures.knockout import knockout_grid, probability_change
from figures.polls import poll_results
from figures.positional import embedding_decomposition, pe_curves, pe_heatmap, pe_similarity
from figures.training import bleu_by_length, lab_curves, training_curves
from figures.vectors import SUBLAYER_NAMES, token_bars, unit_bars, update_sizes, vector_heatmap

__all__ = [
    "COLORSCALE", "CONTRAST_COLORSCALE", "MARGIN", "Display", "attention_grid", "attention_heads", "attention_heatmap",
    "attribution_heatmap", "beam_tree",
    "contrast_heatmap", "attention_difference", "heads_by_token", "bleu_by_length", "faithfulness_bars",
    "head_agreement_grid", "looked_vs_used",
    "source_share_bars",
    "step_used_vs_looked",
    "distribution", "embedding_decomposition", "grid_layout", "knockout_grid", "lab_curves", "label", "labels",
    "mask_heatmap", "pe_curves", "pe_heatmap", "pe_similarity", "probability_change", "row_across_heads",
    "score_pipeline", "scores_heatmap", "token_bars", "token_confidence", "top_k_bar", "training_curves",
    "unit_bars", "update_sizes", "SUBLAYER_NAMES", "vector_heatmap", "poll_results", "shared",
]
