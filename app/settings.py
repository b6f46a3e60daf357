"""The sidebar: checkpoint, decoding settings, display settings, returned as plain values."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from app import figures
from model.decoding import DecodeOptions


@dataclass(frozen=True)
class Settings:
    checkpoint: Path
    opts: DecodeOptions
    projector: bool = False
    image_format: str = "png"

    @property
    def font_size(self) -> int:
        return 18 if self.projector else 12

    @property
    def colorscale(self) -> str:
        return figures.CONTRAST_COLORSCALE if self.projector else figures.COLORSCALE


def decoding_ui() -> DecodeOptions:
    st.sidebar.subheader("Decoding")
    method = st.sidebar.radio(
        "Method",
        ["beam", "greedy", "sample"],
        key="method",
        horizontal=True,
        help="greedy: the likeliest token each step; beam: keep the k best partial "
        "translations; sample: draw each token at random from the model's distribution",
    )
    kw: dict = {"method": method, "record_steps": True, "record_top_k": 8}
    if method == "beam":
        kw["beam_size"] = st.sidebar.slider("Beam size", 1, 16, 4, key="beam_size")
        kw["alpha"] = st.sidebar.slider(
            "Length penalty α (GNMT)",
            0.0,
            2.0,
            0.6,
            0.1,
            key="alpha",
            help="score = log p / ((5 + length) / 6)^α; 0 = no normalisation",
        )
    if method == "sample":
        kw["temperature"] = st.sidebar.slider(
            "Temperature",
            0.05,
            2.0,
            1.0,
            0.05,
            key="temperature",
            help="divides the logits: below 1 sharper, above 1 flatter",
        )
        kw["top_k"] = st.sidebar.slider("Top-k (0 = all tokens)", 0, 50, 0, key="top_k")
        kw["seed"] = st.sidebar.number_input("Seed", 0, 10_000, 0, key="seed")
    return DecodeOptions(**kw)


def sidebar(checkpoints: list[Path], default: str) -> Settings:
    names = [p.name for p in checkpoints]
    index = names.index(default) if default in names else 0
    name = st.sidebar.selectbox(
        "Checkpoint", names, index=index, key="checkpoint", help="every checkpoint directory found in checkpoints/"
    )
    opts = decoding_ui()
    st.sidebar.subheader("Display")
    projector = st.sidebar.toggle("Projector mode (large fonts, high contrast)", key="projector")
    image_format = st.sidebar.radio(
        "Figure download format",
        ["png", "svg"],
        horizontal=True,
        key="image_format",
        help="the camera icon above each figure downloads it in this format",
    )
    return Settings(checkpoints[names.index(name)], opts, projector, image_format)
