"""View 2: step through greedy / beam / sampled decoding, token by token."""

from __future__ import annotations

import time

import streamlit as st

from app import figures
from app.analysis import first_divergence, tree_until
from app.settings import Settings
from app.ui import chart
from model.checkpoint import Checkpoint
from model.decoding import DecodeOptions
from model.pipeline import Explanation

PLAY_DELAY_S = 0.7


def _move(delta: int, n_steps: int) -> None:
    st.session_state["step"] = max(0, min(n_steps - 1, st.session_state.get("step", 0) + delta))


def _reset() -> None:
    st.session_state.update(step=0, playing=False)


def _toggle_play() -> None:
    st.session_state["playing"] = not st.session_state.get("playing", False)


def controls(n_steps: int, key: str) -> int:
    """Previous / next / play / reset and a slider over steps 0..n_steps-1. The buttons
    act in callbacks, before the page is drawn, so their disabled states are current."""
    if st.session_state.get("step_key") != key:  # a new decoding: back to step 0
        st.session_state.update(step_key=key, step=0, playing=False)
    if "next_step" in st.session_state:  # from a link, or set by play on the previous run
        st.session_state["step"] = st.session_state.pop("next_step")
    st.session_state["step"] = step = max(0, min(st.session_state["step"], n_steps - 1))
    playing = st.session_state["playing"]
    c = st.columns([1.1, 1.3, 1.3, 1.1, 5])
    c[0].button("Reset", key="reset", icon=":material/first_page:", on_click=_reset)
    c[1].button("Prev", key="prev", icon=":material/chevron_left:", disabled=step == 0, shortcut="Left",
                help="keyboard: ←", on_click=_move, args=(-1, n_steps))
    c[2].button("Next", key="next", icon=":material/chevron_right:", disabled=step >= n_steps - 1,
                shortcut="Right", help="keyboard: →", on_click=_move, args=(1, n_steps))
    c[3].button("Pause" if playing else "Play", key="play",
                icon=":material/pause:" if playing else ":material/play_arrow:", on_click=_toggle_play)
    shown = c[4].slider("Step", 0, n_steps - 1, key="step") if n_steps > 1 else step
    st.session_state["current_step"] = shown
    return shown


CAPTIONS = {
    "greedy": "Greedy decoding: at each step the decoder sees the source (through cross-attention) and the "
              "tokens so far (masked self-attention), outputs P(next token) = softmax(h Wᵀ), and takes the "
              "likeliest token.",
    "beam": "Beam search keeps the k best partial translations. Each step extends every one by its likeliest "
            "tokens, scores them by total log-probability divided by the length penalty ((5+n)/6)^α, keeps the "
            "best k, and sets aside those that ended with </s>.",
    "sample": "Sampling draws each token at random from softmax(logits / T): a low temperature T sharpens the "
              "distribution towards greedy, a high one flattens it.",
}


def render(ckpt: Checkpoint, ex: Explanation, settings: Settings, greedy: Explanation | None = None) -> None:
    st.caption(CAPTIONS[settings.opts.method] + " Keyboard: ← and → step.")
    steps = ex.result.steps
    pieces = ckpt.tgt_tokenizer.pieces
    src_tokens = ex.trace.source_tokens[0]
    t = controls(len(steps), key=f"{ex.text}|{settings.opts}")
    record = steps[t]
    hyp_names = [
        f"{h.index}: {ckpt.tgt_tokenizer.decode(h.tokens) or '(start)'}  [score {h.score:.2f}]"
        for h in record.hypotheses
    ]
    chosen_index = 0
    if len(record.hypotheses) > 1:
        chosen_index = st.selectbox(
            "Hypothesis to inspect", range(len(hyp_names)), format_func=hyp_names.__getitem__, key=f"hyp_{t}"
        )
    hyp = record.hypotheses[chosen_index]
    so_far = pieces(hyp.tokens)
    st.markdown(
        f"**Step {t}** of {len(steps) - 1}. Output so far: `{ckpt.tgt_tokenizer.decode(hyp.tokens) or '(nothing yet)'}`"
    )

    if settings.opts.method == "beam":
        every_step = st.toggle("Show the pruned candidates of every step", key="all_pruned",
                               help="Off: only the current step's pruned candidates, so a wide beam stays readable.")
        nodes, edges, index = tree_until(steps, t, pieces, pruned_only_last=not every_step)
        chart(
            st,
            figures.beam_tree(
                nodes,
                edges,
                title="beam search tree (● live/kept, ■ finished, × pruned)",
                selected=index.get((t, chosen_index)),
                font_size=settings.font_size,
            ),
            key="tree",
            settings=settings,
        )

    left, right = st.columns([2, 3])
    with left:
        chosen = _chosen_token(record, chosen_index)
        top_tokens = [pieces([tok])[0] for tok, _ in hyp.top_k]
        chart(
            st,
            figures.top_k_bar(
                top_tokens,
                [p for _, p in hyp.top_k],
                chosen=pieces([chosen])[0] if chosen is not None else None,
                title=f"next token after {len(so_far)} input tokens",
                font_size=settings.font_size,
            ),
            key="topk",
            settings=settings,
        )
    with right:
        if hyp.cross_attn is not None:
            chart(
                st,
                figures.row_across_heads(
                    hyp.cross_attn[:, :, None, :].numpy(),
                    0,
                    src_tokens,
                    so_far[-1],
                    colorscale=settings.colorscale,
                    font_size=settings.font_size,
                ).update_layout(title=f"cross-attention of the new position ({figures.label(so_far[-1])})"),
                key="cross_row",
                settings=settings,
            )
    if hyp.self_attn is not None:
        with st.expander("Decoder self-attention of the new position"):
            chart(
                st,
                figures.row_across_heads(
                    hyp.self_attn[:, :, None, :].numpy(),
                    0,
                    so_far,
                    so_far[-1],
                    colorscale=settings.colorscale,
                    font_size=settings.font_size,
                ),
                key="self_row",
                settings=settings,
            )
    if greedy is not None:
        _side_by_side(ckpt, ex, greedy)
    if st.session_state.get("playing"):
        if t < len(steps) - 1:
            time.sleep(PLAY_DELAY_S)
            st.session_state["next_step"] = t + 1
        else:
            st.session_state["playing"] = False
        st.rerun()


def _chosen_token(record, index: int) -> int | None:
    """The token this hypothesis continued with (kept or finished), if any."""
    for c in record.candidates:
        if c.parent == index and c.status in ("kept", "finished"):
            return c.token
    return None


def _side_by_side(ckpt: Checkpoint, beam: Explanation, greedy: Explanation) -> None:
    st.subheader("Greedy and beam side by side")
    g, b = greedy.result.tokens, beam.result.tokens
    where = first_divergence(g, b)
    pieces = ckpt.tgt_tokenizer.pieces
    c1, c2 = st.columns(2)
    for col, name, toks in ((c1, "greedy", g), (c2, "beam", b)):
        shown = [
            f"**:red[{figures.label(p)}]**" if i == where else figures.label(p) for i, p in enumerate(pieces(toks))
        ]
        col.markdown(f"**{name}:** " + " ".join(shown))
    st.caption("identical" if where is None else f"first different token at output position {where} (in red)")


def greedy_options(opts: DecodeOptions) -> DecodeOptions:
    return DecodeOptions("greedy", record_steps=True, record_top_k=opts.record_top_k)
