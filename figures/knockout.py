"""Head knockout figures: each head's effect as a grid, each token's probability before and after."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from figures.common import MARGIN, axis, cell_targets, labels
from i18n import _, num


def probability_change(tokens: Sequence[str], before: Sequence[float], after: Sequence[float]) -> go.Figure:
    """Each output token's probability with all heads, and with the chosen heads off."""
    x = list(range(len(tokens)))
    fig = go.Figure([go.Bar(x=x, y=list(before), name=_("all heads"), customdata=labels(tokens),
                            hovertemplate="%{customdata}: %{y:.4f}<extra>" + _("all heads") + "</extra>"),
                     go.Bar(x=x, y=list(after), name=_("heads knocked out"), customdata=labels(tokens),
                            hovertemplate="%{customdata}: %{y:.4f}<extra>" + _("knocked out") + "</extra>")])
    fig.update_layout(barmode="group", title=_("probability of each token of the original translation"),
                      xaxis=axis(tokens, _("token")), yaxis=dict(title=_("probability"), range=[0, 1]),
                      height=380, margin=MARGIN, legend=dict(orientation="h"))
    return fig


def knockout_grid(effects: np.ndarray, modules: Sequence[str], title: str = "") -> go.Figure:
    """effects (M, H + 1): the drop in log-probability of the translation when one head
    (columns 0..H-1) or the whole module (last column) is switched off, per attention
    module (rows). Red: the translation got less likely without it."""
    effects = np.asarray(effects, dtype=float)
    n_heads = effects.shape[1] - 1
    cols = [_("head {j}").format(j=h) for h in range(n_heads)] + [_("whole layer")]
    limit = float(np.abs(effects).max()) or 1.0
    hover = [[f"{m}, {c}<br>" + _("log-probability drop {drop}").format(drop=num(v, ".3f")) for c, v in zip(cols, row)]
             for m, row in zip(modules, effects)]
    fig = go.Figure([go.Heatmap(
        z=effects, x=list(range(n_heads + 1)), y=list(range(len(modules))), colorscale="RdBu", reversescale=True,
        zmid=0, zmin=-limit, zmax=limit, text=np.round(effects, 2), texttemplate="%{text}", hoverinfo="skip",
        colorbar=dict(thickness=12)),
        cell_targets(len(modules), n_heads + 1, hover, "%{customdata}<extra></extra>")])
    fig.update_layout(title=title, height=140 + 34 * len(modules), margin=MARGIN,
                      xaxis=axis(cols), yaxis=axis(modules, reverse=True),
                      clickmode="event+select")
    fig.add_vline(x=n_heads - 0.5, line=dict(color="#555", width=2))
    return fig
