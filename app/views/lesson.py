"""The guided lesson: the paper in order on the current sentence, one screen per step,
previous / next by keyboard (← →). The step is in the link (`?lesson=5`), so a teacher
prepares a lesson as a list of links. Each step's text, formula and figure are here (`STEPS`);
the figures are drawn by the pure builders of figures/ from the sentence's trace, and what a
step computes with the model (the attribution) comes from the shared caches."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import streamlit as st

import figures
from app import state, try_it
from app.context import Context
from app.settings import declare, selectbox
from app.try_it import TryIt
from app.ui import chart
from i18n import N_, _, num
from model.analysis.attribution import Attribution, Cost
from model.analysis.attribution.attention import method_key
from model.inference.confidence import LOW_TOKEN_PROB
from model.inference.pipeline import Explanation, next_token_distribution, token_probabilities
from model.inference.stream import SUBLAYERS, update_ratios
from model.network import names
from model.storage.checkpoint import Checkpoint


@dataclass(frozen=True)
class LessonData:
    """What the lesson's figures read: the checkpoint, the sentence's explanation recorded with the
    residual stream, and its attribution from the shared cache (`Context.attribution`; None where a
    step needs none)."""
    ckpt: Checkpoint
    ex: Explanation                  # recorded with the stream
    used: Callable[[], Attribution] | None = None

    @property
    def trace(self):
        return self.ex.trace

    @property
    def src(self) -> list[str]:
        return self.trace.source_tokens[0]

    @property
    def tgt(self) -> list[str]:
        return self.trace.target_tokens[0]

    def last(self, stack: str) -> int:
        return self.trace.num_layers(stack) - 1


def _tokens(d: LessonData) -> go.Figure:
    fig = go.Figure(go.Table(header=dict(values=[_("position"), _("piece"), "id"]),
                             cells=dict(values=[list(range(len(d.src))), d.src, d.ex.source_ids])))
    return fig.update_layout(title=_("the sentence as the model reads it"), height=120 + 24 * len(d.src),
                             margin=figures.MARGIN)


def _embedding(d: LessonData) -> go.Figure:
    return figures.vector_heatmap(d.trace[names.side("source", "embedding")][0].numpy(), d.src,
                                  _("each token's embedding row × √d_model"))


def _positional(d: LessonData) -> go.Figure:
    return figures.pe_heatmap(d.trace[names.side("source", "positional")].numpy(), d.src)


def _self_attention(d: LessonData) -> go.Figure:
    return figures.attention_heatmap(d.trace[names.sublayer("encoder", 0, "self_attn")][0, 0].numpy(), d.src, d.src,
                                     title=_("encoder layer 0, head 0: each row sums to 1"))


def _multi_head(d: LessonData) -> go.Figure:
    return figures.attention_grid(d.trace.attention("encoder_self")[:, 0].numpy(), d.src, d.src,
                                  title=_("every layer × head of the encoder"))


def _add_norm(d: LessonData) -> go.Figure:
    ratios = update_ratios(d.trace, "encoder")[:, :, 0, 0].numpy()
    return figures.update_sizes(ratios, list(SUBLAYERS["encoder"]), d.src[0])


def _ffn(d: LessonData) -> go.Figure:
    hidden = d.trace[names.part(names.sublayer("encoder", 0, "feed_forward"), "hidden")][0, 0].numpy()
    return figures.unit_bars(hidden, _("layer 0's {n} hidden units for {token} ({zeros} exactly zero)").format(
        n=len(hidden), token=figures.label(d.src[0]), zeros=int((hidden == 0).sum())))


def _encoder(d: LessonData) -> go.Figure:
    memory = d.trace.stack_output("encoder")[0].numpy()
    return figures.vector_heatmap(memory, d.src, _("the encoder's output: one vector per source token"))


def _masked(d: LessonData) -> go.Figure:
    return figures.mask_heatmap(d.trace.mask("decoder_self")[0].int().numpy(), d.tgt, d.tgt,
                                _("the causal mask: position i sees positions 0..i"))


def _cross(d: LessonData) -> go.Figure:
    mean = d.trace[names.sublayer("decoder", d.last("decoder"), "cross_attn")][0].mean(0).numpy()   # (T, S)
    return figures.attention_heatmap(mean, d.tgt, d.src, title=_("cross-attention, last layer, mean of the heads"),
                                     row_title=_("decoder input"), col_title=_("source"))


def _softmax(d: LessonData) -> go.Figure:
    ids, probs = next_token_distribution(d.ckpt, d.trace.stack_output("decoder")[0, 0], k=10)
    return figures.top_k_bar(d.ckpt.tgt_tokenizer.pieces(ids), probs,
                             title=_("P(first output token): softmax over the whole vocabulary"))


def _decoding(d: LessonData) -> go.Figure:
    step = d.ex.result.steps[min(1, len(d.ex.result.steps) - 1)]
    hyp = step.hypotheses[0]
    pieces = d.ckpt.tgt_tokenizer.pieces
    return figures.top_k_bar(pieces([t for t, _p in hyp.top_k]), [p for _t, p in hyp.top_k],
                             title=_("step {t}: after {prefix}").format(
                                 t=step.step, prefix=figures.label("".join(pieces(hyp.tokens[1:])) or "<s>")))


def _teacher_forcing(d: LessonData) -> go.Figure:
    forced = token_probabilities(d.ckpt, d.ex.source_ids, d.ex.result.tokens)
    tokens = d.ckpt.tgt_tokenizer.pieces(forced.tokens)
    return figures.token_bars(tokens, forced.probs, _("each token's probability when the decoder is fed the answer "
                              "so far"), _("probability"))


def _cost(d: LessonData) -> go.Figure:
    s, t = len(d.src), len(d.tgt)
    cfg = d.ckpt.config
    sizes = {_("encoder self (S×S)"): s * s, _("decoder self (T×T)"): t * t, _("cross (T×S)"): t * s}
    n = np.arange(1, 2 * max(s, t) + 1)
    fig = go.Figure([go.Bar(x=list(sizes), y=list(sizes.values()), name=_("this sentence, one head")),
                     go.Scatter(x=list(sizes), y=[v * cfg.n_heads * cfg.n_encoder_layers for v in sizes.values()],
                                name=_("× {heads} heads × {layers} layers").format(heads=cfg.n_heads,
                                                                                  layers=cfg.n_encoder_layers),
                                mode="markers")])
    fig.update_layout(title=_("score matrices for S = {s}, T = {t} tokens (doubling the length: ×4; n = {n}: {n2} "
                              "scores per head)").format(s=s, t=t, n=n[-1], n2=n[-1] ** 2),
                      height=340, margin=figures.MARGIN, yaxis_title=_("scores computed"))
    return fig


def _confidence(d: LessonData) -> go.Figure:
    tokens = d.ex.output_pieces(d.ckpt)
    conf = d.ex.confidence(d.ckpt)
    unseen = "; " + _("never read in training: {words}").format(words=", ".join(conf.unseen)) if conf.unseen else ""
    verdict = _("not calibrated") if conf.p_wrong is None else _("P(wrong) ≈ {p}").format(p=num(conf.p_wrong, ".0%"))
    return figures.token_confidence(tokens, d.ex.output_probs, LOW_TOKEN_PROB,
                                    title=_("each output token's probability ({verdict})").format(
                                        verdict=verdict + unseen))


def _looked_vs_used(d: LessonData) -> go.Figure:
    if d.used is None:
        raise ValueError("the last step reads the attribution: LessonData(..., used=ctx.attribution)")
    att = d.used()
    looked = att.scores[method_key("attention", d.last("decoder"))].normalised()[0]
    key = "alti" if "alti" in att.scores else "grad_x_input"
    used = att.scores[key].normalised()[0]
    used = used / np.maximum(used.sum(-1, keepdims=True), 1e-12)        # shares of the source part alone
    titles = (_("where the last layer looked (cross-attention)"),
              _("what it used ({method})").format(method=att.methods[key].shown()))
    return figures.looked_vs_used(looked, used, att.source_tokens, att.generated_tokens, titles,
                                  title=_("the same translation, two pictures"))


@dataclass(frozen=True)
class Step:              # title, text and try_this are marked for the catalog (i18n/): _() where shown
    title: str
    text: str
    formula: str
    figure: Callable[[LessonData], go.Figure]
    try_this: str
    try_it: TryIt | None = None    # a button that opens the page with the question asked (app/try_it.py)


STEPS: tuple[Step, ...] = (
    Step(N_("1. Tokens"), N_("The model never sees letters or words: a sentencepiece model cuts the text into subword "
         "pieces from a fixed vocabulary, and each piece becomes a number. `</s>` marks the end."),
         r"\text{text} \rightarrow (\mathrm{id}_1, \dots, \mathrm{id}_S)", _tokens,
         N_("Type a rare or misspelled word: watch it fall apart into smaller pieces.")),
    Step(N_("2. Embedding"), N_("Each id picks one row of a learned matrix: a vector of d_model numbers. The paper "
                                "multiplies "
         "it by √d_model so that it has the same scale as the positional encoding added next."),
         r"x_i = E[\mathrm{id}_i]\,\sqrt{d_{\mathrm{model}}}", _embedding,
         N_("On The whole model, click the input embedding: which tokens are nearest to yours?")),
    Step(N_("3. Positional encoding"), N_("Attention itself ignores order, so a vector of sines and cosines is added "
                                          "to each "
         "token: fast waves in the first dimensions, slow ones in the last. Nearby positions get similar vectors."),
         r"PE_{(pos,2i)} = \sin\!\left(pos/10000^{2i/d_{\mathrm{model}}}\right),\ "
         r"PE_{(pos,2i+1)} = \cos\!\left(pos/10000^{2i/d_{\mathrm{model}}}\right)", _positional,
         N_("Training lab: switch the positional encoding off and train reverse. It cannot learn it.")),
    Step(N_("4. Self-attention"), N_("Each token asks a question (query q), every token offers a key k and a value "
                                     "v. The "
         "scores q·k are divided by √d_k, a softmax turns each row into weights that sum to 1, and the output is "
         "the weighted sum of the values."),
         r"\mathrm{Attention}(Q,K,V) = \mathrm{softmax}\!\left(\frac{QK^T}{\sqrt{d_k}}\right)V", _self_attention,
         N_("Inside one head: turn off the 1/√d_k scaling and watch the softmax saturate.")),
    Step(N_("5. Multi-head attention"), N_("The model runs h attention heads side by side, each with its own "
                                           "projections of "
         "d_model/h dimensions, and concatenates their outputs. Different heads learn to look for different things."),
         r"\mathrm{MultiHead}(Q,K,V) = \mathrm{Concat}(\mathrm{head}_1,\dots,\mathrm{head}_h)W^O", _multi_head,
         N_("A word of several pieces (“didn't”, “überquerte”): take its pieces as one word and see which heads "
            "look at it, in every layer at once."), try_it.SEVERAL_AT_ONCE),
    Step(N_("6. Add & Norm"), N_("Each sublayer's output is added to its input (a residual connection), then LayerNorm "
         "rescales every token's vector. The residual stream carries the token through the layers; each sublayer "
         "adds an update to it."), r"\mathrm{LayerNorm}(x + \mathrm{Sublayer}(x))", _add_norm,
         N_("Training lab: switch the residual connections off. The model barely learns.")),
    Step(N_("7. Feed-forward network"), N_("After attention mixes information between positions, a two-layer network "
         "transforms each position on its own: widen to d_ff, ReLU (many units exactly zero), narrow back."),
         r"\mathrm{FFN}(x) = \max(0,\,xW_1+b_1)\,W_2+b_2", _ffn,
         N_("On The whole model, click a feed-forward block and find which tokens light up its most active unit.")),
    Step(N_("8. The encoder stack"), N_("Attention plus feed-forward, each with Add & Norm, is one encoder layer; N "
                                        "of them "
         "are stacked. The last layer's vectors, one per source token, are the encoder's output (the memory)."),
         r"z = \mathrm{Encoder}(x) = \mathrm{Layer}_N(\cdots\mathrm{Layer}_1(x))", _encoder,
         N_("Explore: compare the encoder self-attention of the first and the last layer.")),
    Step(N_("9. Masked self-attention"), N_("The decoder writes the translation left to right. While training it "
                                            "sees the "
         "whole reference at once, so a mask hides every later position: position i may only attend to 0..i."),
         r"\mathrm{softmax}\!\left(\frac{QK^T}{\sqrt{d_k}} + M\right),\ M_{ij} = -\infty \text{ for } j > i",
         _masked, N_("Training lab: train without the causal mask. The loss falls, decoding fails.")),
    Step(N_("10. Cross-attention"), N_("In its second sublayer the decoder's queries look at the encoder's output: "
                                       "keys "
         "and values come from the source. This is where the model decides which source words it is translating."),
         r"\mathrm{Attention}(Q_{\mathrm{dec}},\,K_{\mathrm{enc}},\,V_{\mathrm{enc}})", _cross,
         N_("Change “tired” to “wide” (“müde” to “breit”): does the word for “it” change, and where does the "
            "cross-attention move?"),
         try_it.CHANGE_A_WORD),
    Step(N_("11. Linear and softmax"), N_("The decoder's last vector is multiplied by the embedding matrix (the same "
         "weights, tied) to give one score per vocabulary entry; softmax turns the scores into probabilities."),
         r"P(y_t \mid y_{<t}, x) = \mathrm{softmax}(h_t W_E^T)", _softmax,
         N_("Why “es” and not “sie” (“it” and not “he”)? Ask on What the model used: which source words made the "
            "model prefer its word?"), try_it.WHY_NOT),
    Step(N_("12. Decoding one token at a time"), N_("The model predicts one token, appends it, and predicts again, "
                                                    "until "
         "`</s>`. Greedy decoding takes the likeliest token each time; beam search keeps the k best partial "
         "translations."), r"\hat{y}_t = \arg\max_y P(y \mid \hat{y}_{<t}, x)", _decoding,
         N_("Force another first word (“Die”, “A”) and decode on: what does the rest of the translation do with it?"),
         try_it.FORCE_A_WORD),
    Step(N_("13. Training with teacher forcing"), N_("In training the decoder is fed the reference, not its own "
                                                     "guesses, so "
         "every position is trained at once; the loss is the cross-entropy of each next reference token (with "
         "label smoothing 0.1 in the paper)."), r"\mathcal{L} = -\sum_t \log P(y_t \mid y_{<t}, x)",
         _teacher_forcing, N_("Training lab: switch teacher forcing off and compare the training time.")),
    Step(N_("14. Why attention costs O(n²)"), N_("Every query scores every key: a sentence of n tokens needs n² "
                                                 "scores per "
         "head and layer. Doubling the sentence quadruples them; this is what limits how long an input can be."),
         r"\text{cost} = O(n^2 \cdot d)", _cost, N_("Type a sentence twice as long and compare the numbers.")),
    Step(N_("15. A model knows what it was trained on"), N_("The model only ever read its training sentences. Where "
         "a sentence looks like them it is sure of each token; on words it never read it guesses, and its "
         "probabilities drop. The app turns the mean and the lowest token probability, and the share of words "
         "the model never read, into the chance that the translation is wrong (fitted on held-out sentences) "
         "and warns above a threshold."),
         r"\bar{\ell} = \tfrac{1}{T}\sum_t \log P(\hat{y}_t \mid \hat{y}_{<t}, x),\quad "
         r"P(\text{wrong}) = \sigma(w \cdot [\bar{\ell},\ \min_t \log P,\ \text{unseen share}] + b)",
         _confidence, N_("Type a sentence about something no caption shows (a word like 'photosynthesis') and "
         "watch the probabilities fall and the warning appear.")),
    Step(N_("16. Attention is not explanation"), N_("A heatmap shows where a head looked, not what the prediction "
         "depended on: a head may look hard at a token whose value vector is tiny, and the residual stream carries "
         "each token past attention. Attribution methods follow what actually flowed: ALTI+ splits every "
         "sublayer's output, residual and LayerNorm included, into the parts each input token sent. Which picture "
         "is more honest can be measured: hide the token a method ranks first and see how much the prediction "
         "suffers."),
         r"c_{i,j} = \frac{\max(0,\ \|y_i\|_1 - \|y_i - T_i(x_j)\|_1)}{\sum_k \max(0,\ \|y_i\|_1 - "
         r"\|y_i - T_i(x_k)\|_1)}", _looked_vs_used,
         N_("On What the model used, compare last-layer attention with ALTI+ and integrated gradients: which rows "
         "disagree? The green box says which method hid the most important tokens on 500 test sentences.")),
)


LESSON_STEP = declare("lesson_step", "lesson", 1, int, bounds=(1, len(STEPS)))   # 1-based


def _move(by: int) -> None:
    state.set_widget(LESSON_STEP.name, min(max(state.get(LESSON_STEP.name, 1) + by, 1), len(STEPS)))


def controls() -> int:
    """Previous / next (keyboard ← →) and a list of the steps; returns the current step (1-based)."""
    row = st.container(horizontal=True, vertical_alignment="center", key="lesson_controls")   # buttons fit their names
    c = (row, row, row)
    current = state.get(LESSON_STEP.name, LESSON_STEP.default)
    c[0].button(_("Previous"), key="lesson_prev", icon=":material/chevron_left:", disabled=current <= 1,
                shortcut="Left", help=_("keyboard: ←"), on_click=_move, args=(-1,))
    c[1].button(_("Next"), key="lesson_next", icon=":material/chevron_right:", disabled=current >= len(STEPS),
                shortcut="Right", help=_("keyboard: →"), on_click=_move, args=(1,))
    return selectbox(c[2], LESSON_STEP, _("Step"), range(1, len(STEPS) + 1),
                     format_func=lambda k: _(STEPS[k - 1].title),
                     label_visibility="collapsed")


def render(ctx: Context) -> None:
    if ctx.checkpoint.config.norm_first:
        st.info(_("This lesson follows the paper's post-norm layers; this model is pre-norm."))
        return
    k = controls()
    step = STEPS[k - 1]
    st.progress(k / len(STEPS), text=_("step {k} of {n}").format(k=k, n=len(STEPS)))
    # the front of a room: the words beside the picture, not above it
    words, picture = st.columns([2, 3]) if ctx.settings.projector else (st, st)
    (words.subheader if ctx.settings.projector else words.header)(_(step.title))
    words.markdown(_(step.text))
    words.latex(step.formula)
    fig = ctx.figure("lesson", k, lambda: step.figure(LessonData(ctx.checkpoint, ctx.with_stream,
                                                                 lambda: ctx.attribution(Cost.TRACE))))
    chart(picture, fig, key="lesson_figure", settings=ctx.settings)
    words.info(_("**Try this:** {task}").format(task=_(step.try_this)), icon=":material/science:")
    try_it.button(ctx, step.try_it, words)
