"""Serving machinery, no Streamlit: the admission line, batched decoding, the training lab's
scheduler, the configuration read at start, the launcher of `make serve`, and one client of
Streamlit's websocket protocol (warm-up, load benchmarks and tests)."""
