"""Heads switched in the browser, and still told to the server.

A chart made by figures.attention_heads carries every head of one attention kind and a menu that shows
another head at once, in the browser (plotly's own "update" buttons: no round trip). This module's
listener, a small Streamlit component (components v2: JavaScript in the page, no iframe), hears the
menu's clicks on that chart and tells Python which head is shown; Python then makes it the chosen layer
and head as if the pickers had changed (`on_pick`), so the link and a following class get it. The
chart is already showing the head by then: the rerun only catches the server up.
"""
from __future__ import annotations

from collections.abc import Callable

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from app import state

# Finds the chart by its element key (Streamlit's class st-key-KEY) and listens to its menu; looks again whenever
# the page changes and every 200 ms (plotly readies a new chart after it is inserted): Streamlit draws the chart
# anew after each switch (its spec, and with it its element, changed), and a click on the new one must be heard
# (a listener that looked every half second missed a click made soon after a switch: the suite, session 26).
# Streamlit calls this again each time the page draws the listener anew, not only once: what listens lives on the
# component's element, and a later call only hands it the newest trigger (one listener more per run before).
JS = """
export default function(component) {
    const { data, setTriggerValue, parentElement: host } = component;
    const running = host.__headSwitch;
    if (running && running.chart === data.chart) {
        running.tell = setTriggerValue;
        return running.stop;
    }
    if (running) running.stop();
    const listener = { chart: data.chart, tell: setTriggerValue, plot: null };
    const picked = (event) => listener.tell("pick", event.active);
    const attach = () => {
        const found = document.querySelector(`.st-key-${listener.chart} .js-plotly-plot`);
        if (found && found.on && found !== listener.plot) {
            listener.plot?.removeListener?.("plotly_buttonclicked", picked);
            listener.plot = found;
            found.on("plotly_buttonclicked", picked);
        }
    };
    const changes = new MutationObserver(attach);
    changes.observe(document.body, { childList: true, subtree: true });
    const timer = setInterval(attach, 200);
    listener.stop = () => {
        changes.disconnect();
        clearInterval(timer);
        listener.plot?.removeListener?.("plotly_buttonclicked", picked);
        if (host.__headSwitch === listener) delete host.__headSwitch;
    };
    host.__headSwitch = listener;
    attach();
    return listener.stop;
}
"""

_listener = st.components.v2.component("transformer_explained.head_switch", js=JS)


def listen(where: DeltaGenerator, chart_key: str, n_heads: int, on_pick: Callable[[int, int], None]) -> None:
    """Tell on_pick(layer, head) when the menu of the chart `chart_key` shows another head."""
    key = f"{chart_key}_switch"

    def picked() -> None:
        index = getattr(state.widget(key), "pick", None)
        if isinstance(index, int) and index >= 0:
            on_pick(*divmod(index, n_heads))
    with where:
        _listener(key=key, data={"chart": chart_key}, on_pick_change=picked)
