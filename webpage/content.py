"""What a lesson file shows of one sentence, computed once and drawn by the app's own figure builders:
the translation and how sure the model was, every layer and head of the three attention kinds, the
step-through of greedy and beam decoding (top-k, the beam tree, where each new token looked), what the
model used (the default attribution method), the positional encoding and the masks, and the model in short.

Everything is plain JSON (plotly figures as plotly.js reads them: arrays as base64 typed arrays), in the
interface's language of the moment (i18n). Nothing here knows HTML: webpage/page.py assembles the file.
"""
from __future__ import annotations

import json
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go
import plotly.io

import figures
from figures import captions
from figures.common import Display, scale
from figures.describe import summary
from i18n import _, language, num
from model.analysis.attribution import Cost, attribute
from model.analysis.readings import chosen_token, tree_until
from model.inference.confidence import LOW_TOKEN_PROB
from model.inference.decoding import DecodeResult, StepRecord
from model.inference.options import DecodeOptions
from model.inference.pipeline import Explanation, decode_many, encoder_trace, explain
from model.network import names
from model.network.kinds import ATTENTION_KINDS
from model.storage.card import CORPORA, corpora, read_eval_reports, report_title
from model.storage.checkpoint import Checkpoint

TOP_K = 8                       # next-token candidates per step (the app's step page records 8)
PE_POSITIONS = 100              # the positional encoding's curves: the app's default
APP_URL = "http://localhost:8501"   # where `transformer-explained` serves the app
# The app's link parameters (app/settings.py; tests/test_webpage.py checks they still agree)
LINK = {"text": "text", "checkpoint": "checkpoint", "method": "method", "step": "step", "fp32": "fp32",
        "language": "lang"}
PAGES = {"attention": "explore", "decoding": "step", "attribution": "attribution", "positional": "positional",
         "masks": "masks", "card": "card"}


@dataclass(frozen=True)
class Request:
    """One sentence of a lesson: what to translate, with which model (a name or directory)."""
    text: str
    checkpoint: str


def chart(fig: go.Figure, display: Display = Display()) -> dict[str, Any]:
    """A figure as the page draws it: plotly.js's JSON on the display, and its sentence for screen readers."""
    fig = display.apply(fig)
    return {"figure": json.loads(plotly.io.to_json(fig, validate=False)), "said": summary(fig)}


def inline_markdown(text: str) -> str:
    """The little Markdown the app's texts use (**bold**, `code`) as HTML, everything else escaped."""
    import html
    out = html.escape(text, quote=False)
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", out)


def app_link(app_url: str, page: str, request: Request, extra: dict[str, str] | None = None) -> str:
    """The app's page for the same state (fp32: the app decodes as the file did, not at its served precision)."""
    params = {LINK["text"]: request.text, LINK["checkpoint"]: request.checkpoint, LINK["fp32"]: "1"}
    if language() != "en":
        params[LINK["language"]] = language()
    params.update(extra or {})
    return f"{app_url.rstrip('/')}/{page}?{urllib.parse.urlencode(params)}"


def beam_options(ckpt: Checkpoint) -> DecodeOptions:
    """The app's default decoding: beam 4 with the checkpoint's own length penalty."""
    return DecodeOptions("beam", alpha=ckpt.beam_alpha, record_steps=True, record_top_k=TOP_K)


def sentence(ckpt: Checkpoint, request: Request, app_url: str = APP_URL) -> dict[str, Any]:
    """Everything the file shows of one sentence (raises pipeline.InputError for a sentence the model
    cannot take)."""
    ex = explain(ckpt, request.text, beam_options(ckpt))
    greedy = decode_many(ckpt, [ex.source_ids], DecodeOptions("greedy", record_steps=True, record_top_k=TOP_K))[0]
    said, brief, flagged = ex.confidence(ckpt).words(ex.output_pieces(ckpt))
    links = {part: app_link(app_url, page, request) for part, page in PAGES.items()}
    return {
        "text": request.text, "output": ex.output, "checkpoint": request.checkpoint,
        "confidence": {"said": inline_markdown(said), "brief": brief, "flagged": flagged},
        "token_confidence": chart(figures.token_confidence(
            ex.output_pieces(ckpt), ex.output_probs, LOW_TOKEN_PROB,
            title=_("how sure the model was of each token of the translation"))),
        "attention": attention(ex),
        "decoding": {"beam": steps(ckpt, ex.result, ex, "beam", request, app_url),
                     "greedy": steps(ckpt, greedy, ex, "greedy", request, app_url)},
        "attribution": attribution(ckpt, ex),
        "positional": positional(ckpt, ex),
        "masks": masks(ckpt, ex),
        "model": model_card(ckpt),
        "links": links,
    }


def attention(ex: Explanation) -> list[dict[str, Any]]:
    """Each attention kind: every layer and head in one figure (the explorer's, with its head menu)."""
    out = []
    for name, kind in ATTENTION_KINDS.items():
        rows, cols = ex.trace.tokens(kind.query_side), ex.trace.tokens(kind.key_side)
        attn = ex.trace.attention(name)[:, 0].numpy()      # (L, H, Tq, Tk)
        fig = figures.attention_heads(attn, rows, cols, 0, 0,
                                      row_title=_("{side} (query)").format(side=_(kind.query_side)),
                                      col_title=_("{side} (key)").format(side=_(kind.key_side)))
        out.append({"kind": name, "label": _(kind.label), "caption": _(kind.caption), "layers": attn.shape[0],
                    "heads": attn.shape[1], **chart(fig)})
    return out


def followed(record: StepRecord, final: list[int]) -> int:
    """The hypothesis of a step to show: the one the final translation grew from, else the best."""
    for i, hyp in enumerate(record.hypotheses):
        if hyp.tokens[1:] == final[: len(hyp.tokens) - 1]:
            return i
    return 0


def steps(ckpt: Checkpoint, result: DecodeResult, ex: Explanation, method: str, request: Request,
          app_url: str) -> dict[str, Any]:
    """One decoding, step by step, as the step page draws it (pre-recorded: nothing runs in the file)."""
    pieces, decode = ckpt.tgt_tokenizer.pieces, ckpt.tgt_tokenizer.decode
    source = ex.trace.source_tokens[0]
    out = []
    for t, record in enumerate(result.steps):
        chosen = followed(record, result.tokens)
        hyp = record.hypotheses[chosen]
        so_far = pieces(hyp.tokens)
        token = chosen_token(record, chosen)
        step: dict[str, Any] = {
            "heading": inline_markdown(_("**Step {t}** of {n}. Output so far: `{output}`").format(
                t=t, n=len(result.steps) - 1, output=decode(hyp.tokens) or _("(nothing yet)"))),
            "topk": chart(figures.top_k_bar(
                [pieces([tok])[0] for tok, _p in hyp.top_k], [p for _t, p in hyp.top_k],
                chosen=pieces([token])[0] if token is not None else None,
                title=_("next token after {n} input tokens").format(n=len(so_far)))),
            "link": app_link(app_url, PAGES["decoding"], request,
                             {**({LINK["method"]: method} if method != "beam" else {}), **({LINK["step"]: str(t)}
                                                                                            if t else {})}),
        }
        if hyp.cross_attn is not None:
            row = figures.row_across_heads(hyp.cross_attn[:, :, None, :].numpy(), 0, source, so_far[-1])
            row.update_layout(title=_("cross-attention of the new position ({token})").format(
                token=figures.label(so_far[-1])))
            step["cross"] = chart(row)
        if method == "beam":
            nodes, edges, index = tree_until(result.steps, t, pieces)
            step["tree"] = chart(figures.beam_tree(
                nodes, edges, title=_("beam search tree (● live/kept, ■ finished, × pruned)"),
                selected=index.get((t, chosen))))
        out.append(step)
    return {"caption": _(captions.DECODING[method]), "output": decode(result.tokens), "steps": out}


def attribution(ckpt: Checkpoint, ex: Explanation) -> dict[str, Any]:
    """The default method's reading (ALTI+ where the model allows it, else value norms): one traced pass."""
    att = attribute(ckpt, ex.source_ids, ex.result.tokens, Cost.TRACE)
    key = "alti" if "alti" in att.scores else "value_norm"
    method = att.methods[key]
    src, pre = att.scores[key].normalised()
    fig = figures.attribution_heatmap(src, pre, att.source_tokens, att.prefix_tokens, att.generated_tokens,
                                      title=method.shown())
    return {"intro": inline_markdown(_(captions.ATTRIBUTION_INTRO)).replace("*", ""),
            "caveat": inline_markdown(_(method.caveat)), **chart(fig)}


def positional(ckpt: Checkpoint, ex: Explanation) -> dict[str, Any]:
    cfg = ckpt.config
    tokens = ex.trace.source_tokens[0]
    pe = ex.trace[names.side("source", "positional")].numpy()    # (S, D)
    table = ckpt.model.positional.pe[: min(PE_POSITIONS, cfg.max_positions)].numpy()
    note = _(captions.HALVES_NOTE) if cfg.pe_layout == "halves" else ""
    return {"intro": " ".join(filter(None, [_(captions.POSITIONAL_INTRO), note])),
            "heatmap": chart(figures.pe_heatmap(pe, tokens)), "similarity": chart(figures.pe_similarity(pe, tokens)),
            "curves": chart(figures.pe_curves(table, captions.default_pe_dims(cfg.d_model, cfg.pe_layout))),
            "curves_caption": _(captions.CURVES_CAPTION)}


def masks(ckpt: Checkpoint, ex: Explanation) -> dict[str, Any]:
    """The padding mask of a batch of two sentences, the causal and cross masks of this translation, and
    layer 0 head 0's decoder self-attention scores before the softmax beside its weights after it."""
    trace = ex.trace
    src, tgt = trace.source_tokens[0], trace.target_tokens[0]
    batch = encoder_trace(ckpt, [ex.text, captions.short_sentence(ckpt.src_lang)])
    padding = [chart(figures.mask_heatmap(batch.mask("encoder_self")[b].int().numpy(), batch.source_tokens[b],
                                          batch.source_tokens[b],
                                          title=_("sentence {n}: encoder padding mask").format(n=b + 1)))
               for b in range(2)]
    scores = trace.attention("decoder_self", "scores")[0, 0, 0].numpy()
    weights = trace.attention("decoder_self")[0, 0, 0].numpy()
    return {
        "intro": _(captions.MASKS_INTRO), "padding": padding, "padding_caption": _(captions.PADDING_CAPTION),
        "causal": chart(figures.mask_heatmap(trace.mask("decoder_self")[0].int().numpy(), tgt, tgt,
                                             title=_("decoder self-attention: causal mask"))),
        "cross": chart(figures.mask_heatmap(trace.mask("cross")[0].int().numpy(), tgt, src,
                                            title=_("cross-attention: every source token"))),
        "scores": chart(figures.scores_heatmap(scores, tgt, tgt, _("scores q·k/√d_k, blocked = −∞"))),
        "weights": chart(figures.attention_heatmap(weights, tgt, tgt, title=_("weights after softmax (blocked = 0)"))),
    }


def model_card(ckpt: Checkpoint) -> dict[str, Any]:
    """The model in short: its name, size and shape, what it read, and its test scores."""
    cfg, meta = ckpt.config, ckpt.meta
    params = meta.get("parameters") or sum(p.numel() for p in ckpt.model.parameters())
    scores = []
    for report in read_eval_reports(ckpt.path) if ckpt.path else []:
        results = report.get("results", {})
        best = next((k for k in results if k.startswith("beam")), None) or next(iter(results), None)
        if best is not None and "bleu" in results[best]:
            scores.append({"test": inline_markdown(report_title(report)), "decoding": best,
                           "bleu": num(results[best]["bleu"], ".1f"), "chrf": num(results[best].get("chrf", 0), ".1f")})
    return {
        "name": ckpt.name, "languages": f"{ckpt.src_lang} → {ckpt.tgt_lang}",
        "size": _("{n} parameters; d_model {d}, {heads} heads, {enc} encoder and {dec} decoder layers").format(
            n=num(params, ","), d=cfg.d_model, heads=cfg.n_heads, enc=cfg.n_encoder_layers, dec=cfg.n_decoder_layers),
        "data": [inline_markdown(_(CORPORA[c])) for c in corpora(meta)],
        "scores": scores, "signature": meta.get("bleu_signature", ""),
    }


def display_scales() -> dict[str, Any]:
    """What the page's "large letters" switch changes, as Display.for_projector says (webpage/page.js applies it)."""
    big, normal = Display.for_projector(True), Display()
    return {"large": {"font": big.font_size, "scale": scale(big.sequential)},
            "normal": {"font": normal.font_size, "scale": scale(normal.sequential)}}
