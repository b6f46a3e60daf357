"""Training figures: a checkpoint's training curves and its BLEU by sentence length, the lab's live curves."""
from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from figures.common import MARGIN
from i18n import _


def training_curves(log: Sequence[dict]) -> go.Figure:
    """Per-epoch train/val loss (left axis) and val BLEU (right axis) from training_log.jsonl rows."""
    epochs = [r["epoch"] for r in log]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(
        go.Scatter(
            x=epochs, y=[r["train_loss"] for r in log], name=_("train loss (label-smoothed)"), mode="lines+markers"
        ),
        secondary_y=False,
    )
    fig.add_trace(
        go.Scatter(x=epochs, y=[r["val_loss"] for r in log], name=_("val loss"), mode="lines+markers"),
        secondary_y=False
    )
    fig.add_trace(
        go.Scatter(
            x=epochs,
            y=[r["val_bleu"] for r in log],
            name=_("val BLEU (greedy)"),
            mode="lines+markers",
            line=dict(dash="dot"),
        ),
        secondary_y=True,
    )
    fig.update_xaxes(title=_("epoch"), dtick=1)
    fig.update_yaxes(title=_("loss"), secondary_y=False)
    fig.update_yaxes(title="BLEU", secondary_y=True)
    fig.update_layout(
        title=_("training curves"),
        height=380,
        margin=MARGIN,
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="right", x=1),  # clear of the axis title,
    )
    return fig


FEW = 50      # a length with fewer sentences than this says how many on its bar: its BLEU is shaky


def bleu_by_length(series: Sequence[tuple[str, Sequence[dict]]]) -> go.Figure:
    """BLEU by the source's length in words, one group of bars per length and one bar per test set.
    series: (test set name, rows of `model.evaluate`'s "by_length": words, sentences, bleu); a length
    with no sentence in a set has no bar (not a bar at 0, which would say the model failed them)."""
    fig = go.Figure()
    for name, rows in series:
        fig.add_trace(go.Bar(
            x=[row["words"] for row in rows], y=[row["bleu"] for row in rows], name=name,
            text=[None if row["bleu"] is None else f"{row['bleu']:.1f}" + (f" (n={row['sentences']})"
                  if row["sentences"] < FEW else "") for row in rows], textposition="outside",
            customdata=[row["sentences"] for row in rows],
            hovertemplate=_("%{x} words: BLEU %{y:.2f} over %{customdata} sentences")
            + "<extra>%{fullData.name}</extra>"))
    top = max((row["bleu"] or 0 for _name, rows in series for row in rows), default=0)
    fig.update_xaxes(title=_("source sentence length (words)"), type="category")
    fig.update_yaxes(title="BLEU", range=[0, max(10.0, top * 1.15)])
    fig.update_layout(title=_("BLEU by sentence length (beam search, test sets)"), barmode="group", height=400,
                      margin=MARGIN, legend=dict(orientation="h", yanchor="top", y=-0.22, xanchor="left", x=0))
    return fig


def lab_curves(steps: Sequence[int], train_loss: Sequence[float], heldout_loss: Sequence[float],
               token_acc: Sequence[float], seq_acc: Sequence[float]) -> go.Figure:
    """The training lab's live curves against the step: losses (log scale) on the left,
    held-out accuracies on the right. NaN values (no training loss before step 1) are gaps."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=(_("loss (log scale)"), _("held-out accuracy, greedy decoding")),
                        horizontal_spacing=0.1)
    lines = ((1, _("training loss (label-smoothed)"), train_loss, "solid"),
             (1, _("held-out loss"), heldout_loss, "dot"),
             (2, _("token accuracy"), token_acc, "dot"), (2, _("whole-sequence accuracy"), seq_acc, "solid"))
    fig.add_traces([go.Scatter(x=list(steps), y=[float(v) for v in values], name=name, mode="lines",
                               line=dict(dash=dash)) for _, name, values, dash in lines],
                   rows=[1] * len(lines), cols=[col for col, *_ in lines])
    fig.update_xaxes(title=_("step"))
    fig.update_yaxes(type="log", dtick="D2", row=1, col=1)      # labels at 1, 2, 5 of each decade
    fig.update_yaxes(range=[0, 1.02], tickformat=".0%", row=1, col=2)
    fig.update_layout(height=340, margin=dict(l=10, r=10, t=40, b=10),
                      legend=dict(orientation="h", yanchor="top", y=-0.25, xanchor="left", x=0))
    return fig
