"""Why this token and not that one: contrastive attribution (Yin & Neubig 2022, "Interpreting Language
Models with Contrastive Explanations").

At output position t the model chose token c; the question is why c rather than an alternative a. The
quantity explained is the difference of their log-probabilities, d = log p(c) - log p(a), given the source
and the output before t (the same prefix for both: the decoder is causal, so what came after t plays no
part). The methods whose contrastive form is sound, each a reading of d:

    gradient x input       e . d(d)/d e for each source and prefix token embedding: the gradient is linear,
                           so this is exactly gradient x input of log p(c) minus that of log p(a)
    integrated gradients   the path integral of the same gradient from zero embeddings (the positional
                           encodings kept) to the input: the scores sum to d(input) - d(baseline)
                           (completeness), the quadrature refined until they do within 1 % (as for one
                           token's log-probability, gradients.py), the error reported
    erasure                d minus d with one source token hidden (its attention mask closed), for each
                           source token: how much of the preference that token carries (source only)

The alternative must be one token of the target vocabulary, other than the chosen one. Gradients are taken
with `torch.autograd.grad` on the embeddings only: nothing is written to the shared model.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from i18n import N_, Later
from model.analysis.attribution.gradients import (
    IG_STEPS,
    MAX_STEPS,
    SCAN_POINTS,
    SPLIT_SHARE,
    TOLERANCE,
    Pass,
    grad_mode,
    on_scan,
)
from model.inference.decoding import output_log_probs
from model.inference.pipeline import InputError
from model.network.transformer import Transformer
from model.storage.checkpoint import Checkpoint

METHODS = ("grad_x_input", "integrated_gradients", "erasure")
LABELS = {"grad_x_input": N_("gradient × input of the difference"),
          "integrated_gradients": N_("integrated gradients of the difference"),
          "erasure": N_("erasure: the difference lost when one source token is hidden")}
CAVEATS = {
    "grad_x_input": N_("A first-order reading: exact for a small change of an embedding, not for removing it."),
    "integrated_gradients": N_("From all-zero embeddings to the sentence's own; the scores add up to the change of "
                               "the difference along that path (see its completeness error)."),
    "erasure": N_("Source tokens only; hiding a token also changes what the others mean, so the parts need not add "
                  "up to the whole."),
}
ROWS_PER_PASS = 64


@dataclass
class Contrast:
    """Why `chosen` and not `alternative` at output position `position` (0: the first output token)."""
    position: int
    chosen: int
    alternative: int
    chosen_token: str
    alternative_token: str
    log_probs: tuple[float, float]       # log p(chosen), log p(alternative) at the position
    source_tokens: list[str]             # S, EOS last
    prefix_tokens: list[str]             # position + 1 decoder inputs: the start symbol, then the output before t
    scores: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)   # method -> (source (S,),
    #                                                                                   prefix (position + 1,))
    ig_points: int = 0
    ig_completeness_error: float = float("nan")
    ig_baseline_difference: float = float("nan")

    @property
    def difference(self) -> float:
        return self.log_probs[0] - self.log_probs[1]

    def top_source(self, method: str) -> int:
        """The source position that most raises the preference for the chosen token by `method`."""
        return int(np.argmax(self.scores[method][0]))


def alternative_id(ckpt: Checkpoint, text: str) -> int:
    """A token of the target vocabulary from what a person typed: a word that is one piece ("sie": "▁sie", as
    the word is written in a sentence), else a piece as shown ("▁sie", "s"). Raises InputError otherwise."""
    tok = ckpt.tgt_tokenizer
    text = text.strip()
    if not text:
        raise InputError(Later(N_("The alternative is empty: type a word or choose a token.")))
    ids = tok.encode(text)
    if len(ids) == 1:
        return ids[0]
    piece = tok.piece_id(text)
    if piece is not None:
        return piece
    raise InputError(Later(N_("“{text}” is {n} tokens ({pieces}); the alternative must be one token."),
                           text=text, n=len(ids), pieces=" ".join(tok.pieces(ids))))


def _next_log_probs(model: Transformer, p: Pass, src_emb: Tensor, tgt_emb: Tensor, position: int,
                    src_mask: Tensor | None = None) -> Tensor:
    """log p(next token) at `position` for each row of embeddings: src_emb (R, S, D), tgt_emb (R, position + 1,
    D) -> (R, V); src_mask (R, 1, 1, S) hides source tokens (erasure)."""
    rows = src_emb.size(0)
    src, tgt = p.src.expand(rows, -1), p.tgt[: tgt_emb.size(1)].expand(rows, -1)
    src_mask = model.src_mask(src) if src_mask is None else src_mask
    hidden = model.decode(tgt, model.encode(src, src_mask, embedded=src_emb), src_mask, embedded=tgt_emb)
    return output_log_probs(model, hidden[:, position])


def _differences(model: Transformer, p: Pass, src_emb: Tensor, tgt_emb: Tensor, position: int, chosen: int,
                 alternative: int) -> Tensor:
    """log p(chosen) - log p(alternative) at `position` for each row of embeddings -> (R,)."""
    lp = _next_log_probs(model, p, src_emb, tgt_emb, position)
    return lp[:, chosen] - lp[:, alternative]


def _gradient_rows(model: Transformer, p: Pass, alphas: np.ndarray, src_emb: Tensor, tgt_emb: Tensor,
                   position: int, chosen: int, alternative: int) -> tuple[np.ndarray, np.ndarray]:
    """For each point alpha of the path: the gradient of the difference at alpha * embeddings, times the
    embeddings, summed over the model dimension: source (R, S), prefix (R, position + 1)."""
    out_src, out_pre = [], []
    for start in range(0, len(alphas), ROWS_PER_PASS):
        a = torch.tensor(alphas[start:start + ROWS_PER_PASS], dtype=src_emb.dtype, device=src_emb.device)
        a = a[:, None, None]
        mode, grad = grad_mode()
        with mode, grad:
            src_rows = (a * src_emb).requires_grad_(True)
            tgt_rows = (a * tgt_emb).requires_grad_(True)
            d = _differences(model, p, src_rows, tgt_rows, position, chosen, alternative)
            g_src, g_tgt = torch.autograd.grad(d.sum(), (src_rows, tgt_rows))
        out_src.append((g_src * src_emb).sum(-1))
        out_pre.append((g_tgt * tgt_emb).sum(-1))
    return torch.cat(out_src).double().cpu().numpy(), torch.cat(out_pre).double().cpu().numpy()


@torch.inference_mode()
def _path(model: Transformer, p: Pass, alphas: np.ndarray, src_emb: Tensor, tgt_emb: Tensor, position: int,
          chosen: int, alternative: int) -> np.ndarray:
    """The difference at alpha * embeddings for each alpha (forward passes only): (len(alphas),)."""
    out = []
    for start in range(0, len(alphas), ROWS_PER_PASS):
        a = torch.tensor(alphas[start:start + ROWS_PER_PASS], dtype=src_emb.dtype, device=src_emb.device)[:, None, None]
        out.append(_differences(model, p, a * src_emb, a * tgt_emb, position, chosen, alternative))
    return torch.cat(out).double().cpu().numpy()


def _integrated(model: Transformer, p: Pass, src_emb: Tensor, tgt_emb: Tensor, position: int, chosen: int,
                alternative: int) -> tuple[np.ndarray, np.ndarray, int, float, float]:
    """Integrated gradients of the difference by the same adaptive midpoint rule as the single-token method
    (gradients.py: cells placed from a forward-only scan of the path, the cells with the largest, exactly
    known, errors split in three until the scores add up to the change within TOLERANCE): (source, prefix,
    points, completeness error, the difference at the baseline)."""
    args = (model, p, src_emb, tgt_emb, position, chosen, alternative)
    scan = _path(model, p, np.linspace(0.0, 1.0, SCAN_POINTS), *args[2:])
    delta = scan[-1] - scan[0]
    q = on_scan(scan, IG_STEPS)
    q.source, q.prefix = _gradient_rows(model, p, q.midpoints, *args[2:])
    error = abs(float(sum(x.sum() for x in q.estimate())) - delta) / max(abs(delta), 1e-6)
    while error > TOLERANCE and len(q.midpoints) + 2 <= MAX_STEPS:
        cells = q.worst(SPLIT_SHARE, (MAX_STEPS - len(q.midpoints)) // 2)
        edges, mids = q.thirds(cells)
        q = q.split(cells, _path(model, p, edges, *args[2:]), *_gradient_rows(model, p, mids, *args[2:]))
        error = abs(float(sum(x.sum() for x in q.estimate())) - delta) / max(abs(delta), 1e-6)
    source, prefix = q.estimate()
    return source, prefix, len(q.midpoints), error, float(scan[0])


@torch.inference_mode()
def _erased(model: Transformer, p: Pass, src_emb: Tensor, tgt_emb: Tensor, position: int, chosen: int,
            alternative: int) -> np.ndarray:
    """The difference with each source token hidden in turn (its column of the attention masks closed): (S,)."""
    s_len = src_emb.size(0)
    hidden_one = ~torch.eye(s_len, dtype=torch.bool, device=src_emb.device)           # row i: token i hidden
    mask = model.src_mask(p.src.expand(s_len, -1)) & hidden_one[:, None, None, :]        # (S, 1, 1, S)
    lp = _next_log_probs(model, p, src_emb.expand(s_len, -1, -1), tgt_emb.expand(s_len, -1, -1), position, mask)
    return (lp[:, chosen] - lp[:, alternative]).double().cpu().numpy()


def alternatives(ckpt: Checkpoint, source: list[int], output: list[int], position: int, k: int = 8) -> list[int]:
    """The k likeliest tokens at `position` other than the one the translation has there, likeliest first."""
    p = Pass.of(ckpt.model, source, output)
    src_emb, tgt_emb = p.embeddings(ckpt.model)
    with torch.inference_mode():
        lp = _next_log_probs(ckpt.model, p, src_emb[None], tgt_emb[None, : position + 1], position)[0]
    chosen = int(p.gold[position])
    return [t for t in lp.topk(k + 1).indices.tolist() if t != chosen][:k]


def runner_up(ckpt: Checkpoint, source: list[int], output: list[int], position: int) -> int:
    """The likeliest token at `position` other than the translation's own (the natural alternative to ask
    about: "why this and not its closest rival?")."""
    return alternatives(ckpt, source, output, position, 1)[0]


def contrast(ckpt: Checkpoint, source: list[int], output: list[int], position: int, alternative: int,
             methods: tuple[str, ...] = METHODS) -> Contrast:
    """Why output[position] (EOS at position len(output)) and not `alternative`, by each of `methods`.
    Raises InputError for a position past the end or an alternative equal to the chosen token."""
    model, cfg = ckpt.model, ckpt.config
    if not 0 <= position <= len(output):
        raise InputError(Later(N_("Position {i} is past the end: this translation has positions 0 to {last}."),
                               i=position, last=len(output)))
    p = Pass.of(model, source, output)
    chosen = int(p.gold[position])
    if alternative == chosen:
        raise InputError(Later(N_("The alternative is the token the model chose; pick another one.")))
    if not 0 <= alternative < cfg.tgt_vocab_size or alternative in (cfg.pad_id, cfg.bos_id):
        raise InputError(Later(N_("The alternative is not a token the model can write.")))
    pieces = ckpt.tgt_tokenizer.pieces
    src_emb, tgt_emb = p.embeddings(model)
    tgt_emb = tgt_emb[: position + 1]
    with torch.inference_mode():
        lp = _next_log_probs(model, p, src_emb[None], tgt_emb[None], position)[0]                  # (V,)
    out = Contrast(position, chosen, alternative, pieces([chosen])[0], pieces([alternative])[0],
                   (float(lp[chosen]), float(lp[alternative])), pieces(source), pieces(p.tgt[: position + 1].tolist()))
    if "grad_x_input" in methods:
        src, pre = _gradient_rows(model, p, np.ones(1), src_emb, tgt_emb, position, chosen, alternative)
        out.scores["grad_x_input"] = (src[0], pre[0])
    if "integrated_gradients" in methods:
        source_, prefix_, out.ig_points, out.ig_completeness_error, out.ig_baseline_difference = _integrated(
            model, p, src_emb, tgt_emb, position, chosen, alternative)
        out.scores["integrated_gradients"] = (source_, prefix_)
    if "erasure" in methods:
        out.scores["erasure"] = (out.difference - _erased(model, p, src_emb, tgt_emb, position, chosen, alternative),
                                 np.zeros(position + 1))
    return out


def contrast_json(c: Contrast) -> dict:
    """The `contrast` part of the attribution JSON (docs/trace-format.md)."""
    r6 = lambda a: np.round(np.asarray(a, dtype=float), 6).tolist()  # noqa: E731
    return {
        "position": c.position,
        "chosen": {"token": c.chosen_token, "id": c.chosen, "log_prob": round(c.log_probs[0], 6)},
        "alternative": {"token": c.alternative_token, "id": c.alternative, "log_prob": round(c.log_probs[1], 6)},
        "difference": round(c.difference, 6), "source_tokens": c.source_tokens, "prefix_tokens": c.prefix_tokens,
        "methods": {k: {"label": LABELS[k], "caveat": CAVEATS[k], "source": r6(s), "prefix": r6(pre)}
                    for k, (s, pre) in c.scores.items()},
        **({"integrated_gradients": {"points": c.ig_points, "completeness_error": round(c.ig_completeness_error, 6),
                                     "baseline_difference": round(c.ig_baseline_difference, 6),
                                     "baseline": "zero token embeddings, positions kept"}}
           if "integrated_gradients" in c.scores else {}),
    }
