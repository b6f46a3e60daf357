"""A class's code as the teacher shows it: the join link, its QR code, and the banner above the teacher's page."""
from __future__ import annotations

import io
import urllib.parse

import streamlit as st

from app import links
from i18n import _
from serving import class_store


def join_url(code: str, secret: str | None = None) -> str:
    """The link that joins class `code` (with the teacher's `secret`: leads it) on this server."""
    base = urllib.parse.urlsplit(st.context.url or "http://localhost:8501/")
    query = urllib.parse.urlencode({links.CLASS: code, **({links.TEACHER: secret} if secret else {})})
    return urllib.parse.urlunsplit((base.scheme, base.netloc, "/", query, ""))


def qr_png(url: str) -> bytes:
    import segno
    out = io.BytesIO()
    segno.make(url, error="m").save(out, kind="png", scale=8, border=2)
    return out.getvalue()


def join_banner(code: str | None) -> None:
    """Above the teacher's page, when asked (`code`: the class's, else None): the code in large type and the QR
    code, to project."""
    if code is None:
        return
    with st.container(border=True, key="class-banner"):
        left, right = st.columns([3, 2], vertical_alignment="center")
        left.markdown(_("Join the class at **{url}**, or scan the code, or type:").format(url=join_url(code)))
        left.markdown(f"<div style='font-size:4.5rem;font-weight:700;letter-spacing:0.15em'>"
                      f"{class_store.pretty(code)}</div>", unsafe_allow_html=True)
        right.image(qr_png(join_url(code)), width=320)
