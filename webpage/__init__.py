"""A lesson anyone can open without a server: one self-contained, interactive HTML file per sentence or
lesson (`transformer-explained html`, `python -m model.html`, and the app's "Download as a web page").

    content.py   what the file shows of one sentence: the app's figure builders' figures, as JSON
    page.py      the file: page.html, page.css and page.js around plotly.js and the data, inlined
    command.py   the command line

It sits beside the app, over model/ and figures/: the app imports it, it imports no Streamlit.
"""
from webpage.content import Request
from webpage.page import build

__all__ = ["Request", "build"]
