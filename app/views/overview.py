"""The whole Transformer on one screen: figure 1 of the paper, drawn from the loaded model's
config and filled with the sentence's real numbers; a click on a block opens its details.

The numbers come from one teacher-forced pass over the translation recorded with the
residual stream (`ctx.with_stream`; names in model/network/trace, readings in model/inference/stream.py).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st
import torch
from streamlit.delta_generator import DeltaGenerator

import figures
from app import classroom, links, state
from app.context import Context
from app.settings import LAYER, declare, index, selectbox, slider
from app.ui import chart, described, fragment, why
from app.views.explore import KIND
from figures import diagram
from i18n import _, num
from model.inference import stream
from model.inference.decoding import sampling_distribution
from model.network import names
from model.network.kinds import of_module
from model.network.trace import Trace

OV_BLOCK = declare("ov_block", links.BLOCK, "encoder.self_attn", choices=diagram.BLOCK_IDS)
OV_TOKEN = declare("ov_token", "token", 0, index)      # the source token followed
OV_POS = declare("ov_pos", "pos", 0, index)            # the decoder position followed
OV_LAYER = declare("ov_layer", "ov_layer", 0, index)
OV_TEMPERATURE = declare("ov_temperature", None, 1.0, float, bounds=(0.1, 3.0), step=0.1)
OV_TOP_K = declare("ov_top_k", None, 0, int, bounds=(0, 50))
OV_TOP_P = declare("ov_top_p", None, 1.0, float, bounds=(0.05, 1.0), step=0.05)
OV_UNIT = declare("ov_unit", None, None, int)
COMPACT_HEIGHT = 680      # the diagram in projector mode: most of it within a 1280x720 window, its pickers below


def render(ctx: Context) -> None:
    if ctx.checkpoint.config.norm_first:
        st.info(_("This overview follows the paper's post-norm layers; this model is pre-norm."))
        return
    overview(ctx)


@fragment
def overview(ctx: Context) -> None:
    """A fragment: a click on a block, the token and position pickers and the panels' own
    widgets rerun only this, not the sentence and its translation above."""
    ex = ctx.with_stream
    trace, cfg = ex.trace, ctx.checkpoint.config
    src, tgt = trace.source_tokens[0], trace.target_tokens[0]
    compact = ctx.settings.projector      # the front of a room: the words behind "Why?", beside the pickers
    words = _("Figure 1 of the paper, drawn for this model, with this sentence's numbers in every block: each strip "
              "is the chosen token's vector (d_model values, red positive, blue negative) or its attention row over "
              "the keys (the heads' mean). Click a block to open it.")
    if not compact:
        st.caption(words)
    figure_at = st.container() if compact else st    # the front of a room: the picture above its pickers
    c = st.columns([3, 3, 3, 4, 2] if compact else 3, vertical_alignment="bottom")
    if compact:
        why(c[4], words, True, "overview")
    token = selectbox(c[0], OV_TOKEN, _("Source token"), range(len(src)), format_func=lambda i: f"{i}: {src[i]}")
    pos = selectbox(c[1], OV_POS, _("Decoder position (predicts the next token)"), range(len(tgt)),
                    format_func=lambda i: f"{i}: {tgt[i]}")
    layer = selectbox(c[2], OV_LAYER, _("Layer shown in the N× stacks"),
                      range(min(cfg.n_encoder_layers, cfg.n_decoder_layers)))
    log_probs = ctx.logit_lens()[-1]          # (T, V): the model's own next-token distribution, cached
    top = _top(ctx, log_probs[pos], 5)
    block = _block_picker(ctx, trace, (token, pos, layer), top, c[3] if compact else st, figure_at)
    st.divider()
    PANELS[block.split(".")[-1] if block.startswith(("encoder", "decoder")) else block](ctx, trace, block,
                                                                                      (token, pos, layer), log_probs)
    classroom.end_of_run(ctx.site)   # a fragment's rerun does not reach main(), which writes the link otherwise


def _top(ctx: Context, log_probs: torch.Tensor, k: int) -> list[tuple[str, float]]:
    values, ids = log_probs.exp().topk(k)
    pieces = ctx.checkpoint.tgt_tokenizer.pieces(ids.tolist())
    return list(zip(pieces, values.tolist()))


def _block_picker(ctx: Context, trace: Trace, where: tuple[int, int, int], top: list, picker: DeltaGenerator,
                  figure_at: DeltaGenerator) -> str:
    """The figure (in `figure_at`; a click selects a block) and a list of the blocks that says the same (in
    `picker`). Compact (the front of a room): the figure as high as a projector's 720-px screen leaves it."""
    token, pos, layer = where
    clicked = _clicked(state.widget("overview_figure"))
    if clicked is not None and clicked != state.held(state.OV_CLICKED):
        state.hold(state.OV_CLICKED, clicked)
        state.set_widget(OV_BLOCK.name, clicked)
    names = diagram.picker_names(ctx.checkpoint.config)
    block = selectbox(picker, OV_BLOCK, _("Block"), diagram.BLOCK_IDS, format_func=lambda b: names[b],
                      help=_("or click a block in the figure"))
    values, texts = diagram.values_of(trace, token, pos, layer, top)
    compact = ctx.settings.projector
    fig = ctx.figure("overview", (token, pos, layer, block, compact), lambda: diagram.model_diagram(
        ctx.checkpoint.config, values, texts, selected=block, large=ctx.settings.display.large,
        height=COMPACT_HEIGHT if compact else None))
    figure_at.plotly_chart(fig, key="overview_figure", on_select="rerun", selection_mode="points", width="stretch",
                           config={"displaylogo": False, "displayModeBar": False})
    described(figure_at, fig, ctx.settings)
    return block


def _clicked(event) -> str | None:
    try:
        points = event["selection"]["points"]
    except (KeyError, TypeError):
        return None
    for point in points:
        if point.get("customdata") in diagram.BLOCK_IDS:
            return point["customdata"]
    return None


# ---- the panels ---------------------------------------------------------------------------------
def _side(block: str) -> tuple[str, str]:
    return ("encoder", "source") if block.startswith("encoder") else ("decoder", "target")


def embedding_panel(ctx: Context, trace: Trace, block: str, where: tuple, log_probs) -> None:
    stack, side = _side(block)
    i = where[0] if side == "source" else where[1]
    tokens = trace.source_tokens[0] if side == "source" else trace.target_tokens[0]
    ids = ctx.explanation.source_ids if side == "source" else ctx.explanation.target_ids
    cfg, model = ctx.checkpoint.config, ctx.checkpoint.model
    st.subheader(_("Input embedding") if side == "source" else _("Output embedding"))
    st.markdown(_("The tokenizer cuts the text into subword pieces; each piece's id picks one row of the embedding "
                  "matrix ({rows} × {cols}), multiplied by √d_model = {root} so that it is as large as the positional "
                  "encoding added next.").format(rows=cfg.src_vocab_size, cols=cfg.d_model,
                                                 root=num(cfg.d_model ** 0.5, ".1f")))
    st.latex(r"x_i = E[\mathrm{id}_i] \cdot \sqrt{d_{\mathrm{model}}}")
    st.dataframe(pd.DataFrame({_("piece"): tokens, "id": ids[:len(tokens)]}).T.astype(str), width="stretch")
    table = (model.src_embed if side == "source" else model.tgt_embed).lut.weight.detach()   # (V, D)
    row = table[ids[i]]
    scaled = trace[names.side(side, "embedding")][0, i]
    fig = ctx.figure("ov_embedding", (side, i), lambda: figures.vector_heatmap(
        np.stack([row.numpy(), scaled.numpy()]), [_("row E[id]"), "× √d_model"],
        _("the embedding of {token} (id {id})").format(token=figures.label(tokens[i]), id=ids[i])))
    chart(st, fig, key="ov_embedding", settings=ctx.settings)
    specials = tuple(sorted({cfg.pad_id, cfg.unk_id, cfg.bos_id, cfg.eos_id}))
    near = stream.nearest_tokens(table, ids[i], 10, exclude=specials)
    tokenizer = ctx.checkpoint.src_tokenizer if side == "source" else ctx.checkpoint.tgt_tokenizer
    pieces = tokenizer.pieces([n for n, _v in near])
    st.markdown(_("**Nearest tokens to {token}** in embedding space (cosine similarity; the token itself "
                  "and the special symbols left out):").format(token=tokens[i]))
    st.dataframe(pd.DataFrame({_("token"): pieces, _("cosine"): [round(v, 3) for _n, v in near]}), hide_index=True)


def positional_panel(ctx: Context, trace: Trace, block: str, where: tuple, log_probs) -> None:
    stack, side = _side(block)
    i = where[0] if side == "source" else where[1]
    tokens = trace.source_tokens[0] if side == "source" else trace.target_tokens[0]
    emb, pe, total = (trace[names.side(side, "embedding")][0, i], trace[names.side(side, "positional")][i],
                      trace[names.side(side, "input")][0, i])
    st.subheader(_("Positional encoding added"))
    if not ctx.checkpoint.config.positional_encoding:
        st.warning(_("This model was built without positional encoding (a training-lab experiment): nothing is "
                     "added."))
    st.markdown(_("The encoder and decoder see tokens all at once; the only thing that tells position {i} from the "
                  "others is this vector of sines and cosines of different wavelengths, added to the "
                  "embedding.").format(i=i))
    st.latex(r"PE_{(pos, 2i)} = \sin(pos / 10000^{2i/d_{\mathrm{model}}}),\quad "
             r"PE_{(pos, 2i+1)} = \cos(pos / 10000^{2i/d_{\mathrm{model}}})")
    fig = ctx.figure("ov_positional", (side, i), lambda: figures.vector_heatmap(
        np.stack([emb.numpy(), pe.numpy(), total.numpy()]),
        [_("embedding × √d"), _("PE(position {i})").format(i=i), _("sum")],
        _("{token} at position {i}").format(token=figures.label(tokens[i]), i=i)))
    chart(st, fig, key="ov_positional", settings=ctx.settings)
    st.markdown(_("Norms: embedding {e}, positional encoding {p}, sum {s}.").format(
        e=num(emb.norm(), ".2f"), p=num(pe.norm(), ".2f"), s=num(total.norm(), ".2f")))


def attention_panel(ctx: Context, trace: Trace, block: str, where: tuple, log_probs) -> None:
    kind = of_module(*block.split(".")).name
    layer = where[2]
    st.subheader({"encoder_self": _("Encoder self-attention"), "decoder_self": _("Masked decoder self-attention"),
                  "cross": _("Cross-attention (queries: decoder, keys and values: encoder)")}[kind])
    st.latex(r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\left(\frac{QK^T}{\sqrt{d_k}}\right)V")
    st.markdown(_("Every head of every layer, the masks and the scores have their own pages; open the explorer at "
                  "this kind of attention, layer {layer}:").format(layer=layer))
    if st.button(_("Open in the attention explorer"), key="ov_open_attention", icon=":material/grid_view:"):
        state.set_widget(KIND.name, kind)
        state.set_widget(LAYER.name, layer)
        ctx.open("explore")


def norm_panel(ctx: Context, trace: Trace, block: str, where: tuple, log_probs) -> None:
    stack, side = _side(block)
    i, layer = (where[0] if side == "source" else where[1]), where[2]
    sub_kind = block.split(".")[1]
    sub = names.sublayer(stack, min(layer, trace.num_layers(stack) - 1), sub_kind)
    tokens = trace.source_tokens[0] if side == "source" else trace.target_tokens[0]
    st.subheader(_("Add & Norm after {sublayer}, layer {layer}").format(sublayer=_(figures.SUBLAYER_NAMES[sub_kind]),
                                                                        layer=layer))
    st.markdown(_("The sublayer's output is added to its input (the residual stream), then LayerNorm rescales each "
                  "token's vector to mean 0 and standard deviation 1 and applies a learned scale γ and shift β."))
    st.latex(r"\mathrm{LayerNorm}(x + \mathrm{Sublayer}(x)) = \gamma \odot \frac{s - \mu}{\sigma} + \beta,"
             r"\quad s = x + \mathrm{Sublayer}(x)")
    parts = [trace[names.part(sub, p)][0, i].numpy() for p in ("in", "update", "sum", "out")]
    fig = ctx.figure("ov_norm_vectors", (sub, i), lambda: figures.vector_heatmap(
        np.stack(parts), [_("x (in)"), "Sublayer(x)", "x + Sublayer(x)", _("out")],
        _("{token}: the stream through this sublayer").format(token=figures.label(tokens[i]))))
    chart(st, fig, key="ov_norm_vectors", settings=ctx.settings)
    mean, std = float(trace[names.part(sub, "norm.mean")][0, i]), float(trace[names.part(sub, "norm.std")][0, i])
    gamma, beta = (trace[names.part(sub, f"norm.{p}")].numpy() for p in ("gamma", "beta"))
    s_vec = parts[2]
    dims = list(range(min(8, len(s_vec))))
    steps = pd.DataFrame({"s": s_vec[dims], "(s − μ)/σ": (s_vec[dims] - mean) / std, "γ": gamma[dims],
                          "β": beta[dims], _("out"): parts[3][dims]}, index=[_("dim {d}").format(d=d) for d in dims]).T
    st.markdown(_("**LayerNorm step by step** (first {n} dimensions): μ = {mean}, σ = {std}").format(
        n=len(dims), mean=num(mean, ".3f"), std=num(std, ".3f")))
    st.dataframe(steps.round(3), width="stretch")
    ratios = stream.update_ratios(trace, stack)[:, :, 0, i].numpy()       # (L, n_sublayers)
    fig = ctx.figure("ov_norm_ratios", (stack, i), lambda: figures.update_sizes(
        ratios, list(stream.SUBLAYERS[stack]), tokens[i]))
    chart(st, fig, key="ov_norm_ratios", settings=ctx.settings)


def ffn_panel(ctx: Context, trace: Trace, block: str, where: tuple, log_probs) -> None:
    stack, side = _side(block)
    i, layer = (where[0] if side == "source" else where[1]), where[2]
    sub = names.sublayer(stack, min(layer, trace.num_layers(stack) - 1), "feed_forward")
    tokens = trace.source_tokens[0] if side == "source" else trace.target_tokens[0]
    cfg = ctx.checkpoint.config
    hidden = trace[names.part(sub, "hidden")][0]                         # (T, d_ff)
    st.subheader(_("Position-wise feed-forward network, layer {layer}").format(layer=layer))
    st.markdown(_("The same two linear layers for every position, {d} → {d_ff} → {d}, with a {activation} in "
                  "between.").format(d=cfg.d_model, d_ff=cfg.d_ff,
                                     activation=cfg.activation.upper() if cfg.activation == "relu" else cfg.activation))
    st.latex(r"\mathrm{FFN}(x) = \max(0,\ xW_1 + b_1)\,W_2 + b_2")
    zeros = int(stream.ffn_zeros(trace, sub)[0, i])
    top = hidden[i].topk(5).indices.tolist()
    st.markdown(_("For **{token}**: {zeros} of {d_ff} hidden units are exactly zero after the {activation}; the most "
                  "active are units {top}.").format(token=tokens[i], zeros=zeros, d_ff=cfg.d_ff,
                                                    activation="ReLU" if cfg.activation == "relu" else cfg.activation,
                                                    top=", ".join(map(str, top))))
    units = ctx.figure("ov_ffn_units", (sub, i), lambda: figures.unit_bars(
        hidden[i].numpy(), _("the {n} hidden units of {token}").format(n=cfg.d_ff, token=figures.label(tokens[i])),
        top))
    chart(st, units, key="ov_ffn_units", settings=ctx.settings)
    unit = selectbox(st, OV_UNIT, _("Which tokens activate unit"), range(cfg.d_ff), default=top[0])
    across = ctx.figure("ov_ffn_tokens", (sub, unit), lambda: figures.token_bars(
        tokens, hidden[:, unit].tolist(), _("unit {unit} across the sentence").format(unit=unit), _("activation")))
    chart(st, across, key="ov_ffn_tokens", settings=ctx.settings)


def output_panel(ctx: Context, trace: Trace, block: str, where: tuple, log_probs) -> None:
    pos, cfg = where[1], ctx.checkpoint.config
    tgt = trace.target_tokens[0]
    st.subheader(_("The output: linear layer, softmax, and what each layer would have said"))
    st.markdown((_("The decoder's last vector at position {pos} ({token}) goes through one linear layer to {n} scores "
                   "(logits): its weights are the embedding matrix itself (tied, section 3.4); softmax turns them "
                   "into probabilities.") if cfg.tie_embeddings else
                 _("The decoder's last vector at position {pos} ({token}) goes through one linear layer to {n} scores "
                   "(logits); softmax turns them into probabilities.")).format(pos=pos, token=tgt[pos],
                                                                               n=cfg.tgt_vocab_size))
    st.latex(r"P(\text{next token}) = \mathrm{softmax}(h\,W_E^{T} / T)")
    c = st.columns(3)
    temperature = slider(c[0], OV_TEMPERATURE, _("Temperature T"))
    top_k = slider(c[1], OV_TOP_K, _("Top-k cut (0: none)"))
    top_p = slider(c[2], OV_TOP_P, _("Top-p cut (1: none)"))
    kept = sampling_distribution(log_probs[pos], temperature, top_k, top_p)
    probs = (log_probs[pos] / temperature).softmax(-1)
    order = probs.topk(20).indices
    pieces = ctx.checkpoint.tgt_tokenizer.pieces(order.tolist())
    fig = ctx.figure("ov_output", (pos, temperature, top_k, top_p), lambda: figures.distribution(
        pieces, probs[order].tolist(), (kept[order] > 0).tolist(),
        _("the 20 likeliest next tokens at T = {t} (grey: cut by top-k/top-p)").format(t=num(temperature, "g"))))
    chart(st, fig, key="ov_output", settings=ctx.settings)
    _logit_lens(ctx, trace, pos)


def _logit_lens(ctx: Context, trace: Trace, pos: int) -> None:
    lens = ctx.logit_lens()[:, pos]           # (L, V), from the shared cache
    chosen = ctx.explanation.target_ids[pos + 1] if pos + 1 < len(ctx.explanation.target_ids) else \
        ctx.checkpoint.config.eos_id
    ranks = stream.token_ranks(lens, torch.full((lens.size(0),), chosen))
    pieces = ctx.checkpoint.tgt_tokenizer.pieces
    rows = []
    for layer in range(lens.size(0)):
        top = lens[layer].exp().topk(3)
        said = zip(pieces(top.indices.tolist()), top.values.tolist())
        rows.append({_("layer"): layer, _("would predict"): ", ".join(f"{p} {v:.2f}" for p, v in said),
                     _("rank of {token}").format(token=pieces([chosen])[0]): int(ranks[layer])})
    st.markdown(_("**Layer by layer (logit lens):** each decoder layer's output sent through the same linear layer "
                  "and softmax, as if the model stopped there (post-norm: each layer's output is already normalised). "
                  "The last row is the model's real prediction."))
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


PANELS = {"embedding": embedding_panel, "positional": positional_panel, "self_attn": attention_panel,
          "cross_attn": attention_panel, "norm": norm_panel, "feed_forward": ffn_panel,
          "output.linear": output_panel, "output.softmax": output_panel}
