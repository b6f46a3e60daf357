"""Small Streamlit helpers shared by the views."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from app.settings import Settings


def chart(where: Any, fig: go.Figure, key: str, settings: Settings) -> None:
    """Show a figure; its camera icon downloads it as PNG or SVG (the sidebar's choice)."""
    where.plotly_chart(
        fig,
        width="stretch",
        key=key,
        config={
            "displaylogo": False,
            "toImageButtonOptions": {"format": settings.image_format, "filename": key, "scale": 2},
        },
    )
