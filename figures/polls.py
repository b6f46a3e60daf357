"""A class's poll, answered: the class's answers beside the model's own probabilities."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from figures.common import MARGIN, axis, from_spec, labels
from i18n import N_, _, ngettext

OTHER = N_("(their own word)")
CLASS_COLOR, MODEL_COLOR = "#0072B2", "#E69F00"        # Okabe-Ito blue and orange: told apart without hue


def poll_results(options: Sequence[str], answers: Sequence[str], model: Mapping[str, float] | None = None,
                 title: str = "") -> go.Figure:
    """Horizontal bars per option: the share of the class that chose it (answers not among the options
    pooled as OTHER), and the model's probability of it when `model` gives one. Shares in [0, 1]."""
    rows = list(options) + ([OTHER] if any(a not in options for a in answers) else [])
    n = max(1, len(answers))
    share = [sum(a == o for a in answers) / n for o in options] + \
        ([sum(a not in options for a in answers) / n] if OTHER in rows else [])
    at = list(range(len(rows)))
    shown = [_(OTHER) if r == OTHER else r for r in rows]
    # plain dicts (figures/common.from_spec): every follower of a class builds this figure when the teacher reveals
    bars = [dict(type="bar", name=ngettext("class ({n} answer)", "class ({n} answers)", len(answers)).format(
                     n=len(answers)), x=share, y=at, orientation="h", marker=dict(color=CLASS_COLOR),
                 text=[f"{s:.0%}" for s in share], textposition="outside", customdata=labels(shown),
                 hovertemplate=_("%{customdata}: %{x:.0%} of the class<extra></extra>"))]
    if model is not None:
        probs = [model.get(o, 0.0) for o in options] + ([None] if OTHER in rows else [])
        bars.append(dict(type="bar", name=_("model"), x=probs, y=at, orientation="h", customdata=labels(shown),
                         marker=dict(color=MODEL_COLOR, pattern=dict(shape="/")),
                         text=[f"{p:.0%}" if p is not None else "" for p in probs], textposition="outside",
                         hovertemplate="%{customdata}: p = %{x:.3f}<extra></extra>"))
    return from_spec(bars, dict(
        title=dict(text=title), barmode="group", yaxis=axis(shown, reverse=True),
        xaxis=dict(range=[0, 1.2], title=dict(text=_("share of the class / probability")), tickformat=".0%"),
        height=140 + 44 * len(rows), margin=MARGIN, legend=dict(orientation="h", y=-0.25)))
