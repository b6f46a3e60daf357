"""What the model used for each token it generated, not only where it looked: attribution.

For one translation and every generated token t (the output's tokens, then EOS), each method
scores every source token and every decoder input of the prefix (model/analysis/attribution/scores.py
has the shapes). The methods, from the cheapest reading of attention to gradients:

    key                     method                                       source / prefix from
    attention[.layerL]      raw attention weights, heads (and layers)    cross- / decoder self-attention
                            averaged (per head: raw_attention(trace, L, H))
    rollout                 attention rollout through cross-attention    every attention layer
    value_norm[.layerL]     ||alpha f(x)||, Kobayashi et al. 2020        cross- / decoder self-attention
    alti                    ALTI+, Ferrando et al. 2022                   every sublayer, residual, LayerNorm
    grad_x_input            gradient x input of log p(y_t)               the token embeddings
    integrated_gradients    integrated gradients, baseline 0             the token embeddings

The attention methods read one trace recorded with RECORDING (each head's values and the
residual stream, opt-in like every recording: the fused fast path stays untouched otherwise);
the gradient methods run their own passes. `attribute` computes them all for one translation;
`python -m model.attribution` writes them as JSON (docs/trace-format.md, "attribution");
model/analysis/attribution/faithfulness.py measures which one the model's predictions depend on.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from functools import cached_property
from typing import Any

import numpy as np
import torch

from i18n import N_, _
from model.analysis.attribution.alti import alti_plus
from model.analysis.attribution.attention import cross_rollout, head_agreement, method_key, raw_attention, value_norm
from model.analysis.attribution.gradients import (
    IG_STEPS,
    IntegratedGradients,
    Pass,
    gradient_x_input,
    integrated_gradients,
)
from model.analysis.attribution.scores import Scores, Unavailable
from model.analysis.laps import Laps
from model.inference.decoding import forced_decode
from model.network import names
from model.network.trace import Recording, Trace
from model.network.transformer import Transformer
from model.storage.checkpoint import Checkpoint

RECORDING = Recording(qkv=True, stream=True)     # what the attention methods read from a trace


class Cost(IntEnum):
    """What a method needs, cheapest first; `attribute(..., upto=cost)` computes every method up to it."""
    TRACE = 0          # one teacher-forced pass recorded with RECORDING: a few ms for all of them
    GRADIENT = 1       # one backward pass per generated token
    INTEGRATED = 2     # integrated gradients: many backward passes per token (the slow one)


@dataclass
class Inputs:
    """What the methods compute from, for one translation: made once, each part when a method asks."""
    model: Transformer
    trace: Trace                                   # the traced pass (RECORDING)
    source: list[int]                              # ids, EOS last
    output: list[int]                              # ids, no EOS
    ig_steps: int = IG_STEPS
    on_progress: Callable[[int, int], None] | None = None
    ig: IntegratedGradients | None = None          # integrated gradients' details, for the JSON

    @cached_property
    def gradient_pass(self) -> Pass:
        return Pass.of(self.model, self.source, self.output)


@dataclass(frozen=True)
class MethodSpec:
    """One attribution method, as the registry holds it: what it is called and what to keep in mind
    (texts marked for the catalog, i18n/), what it costs, whether its source and prefix scores are
    parts of one whole (their shares mean something), and how it is computed: compute(inputs, layer)
    -> Scores, where layer is None but for the one-layer variants of a method with `per_layer`."""
    key: str
    name: str
    caveat: str
    cost: Cost
    joint: bool
    compute: Callable[[Inputs, int | None], Scores]
    per_layer: tuple[str, str] | None = None     # the name and caveat of its one-layer variants


def _integrated(inputs: Inputs, layer: int | None) -> Scores:
    inputs.ig = integrated_gradients(inputs.model, inputs.gradient_pass, inputs.ig_steps,
                                     on_progress=inputs.on_progress)
    return inputs.ig.scores


# Every method, in the order pages list them. A new method: a module with its computation in this
# package, and one line here (docs/architecture.md, "where a new piece goes").
REGISTRY: list[MethodSpec] = [
    MethodSpec("attention", N_("Attention (all layers, heads averaged)"),
               N_("Where the heads looked, not what they carried: a head may look hard at a token whose value is "
                  "tiny, and the residual stream bypasses attention altogether."),
               Cost.TRACE, False, lambda i, layer: raw_attention(i.trace, layer),
               per_layer=(N_("Attention"), N_("One layer's weights, heads averaged."))),
    MethodSpec("rollout", N_("Attention rollout (through cross-attention)"),
               N_("Assumes attention and the residual count equally, every head the same, and that values and "
                  "feed-forward layers change nothing."),
               Cost.TRACE, True, lambda i, _layer: cross_rollout(i.trace)),
    MethodSpec("value_norm", N_("Attention × value size (Kobayashi et al.)"),
               N_("Weights each look by the size of what the token sends, ||αf(x)||; still one sublayer at a time, "
                  "without the residual."),
               Cost.TRACE, False, lambda i, layer: value_norm(i.trace, i.model, layer),
               per_layer=(N_("Attention × value size"), N_("One layer."))),
    MethodSpec("alti", N_("ALTI+ (contributions through every layer)"),
               N_("Follows every sublayer, residual and LayerNorm; treats the feed-forward layers as mixing nothing "
                  "and measures closeness by the Manhattan distance."),
               Cost.TRACE, True, lambda i, _layer: alti_plus(i.trace, i.model)),
    MethodSpec("grad_x_input", N_("Gradient × input"),
               N_("A first-order (local) estimate: how log p changes for a small change of each embedding; can be "
                  "noisy."),
               Cost.GRADIENT, True, lambda i, _layer: gradient_x_input(i.model, i.gradient_pass)),
    MethodSpec("integrated_gradients", N_("Integrated gradients (baseline: zero embeddings)"),
               N_("Adds up gradients from a zero-embedding baseline to the input; depends on that baseline."),
               Cost.INTEGRATED, True, _integrated),
]
NOT_ASKED = {Cost.GRADIENT: N_("not computed (gradients not asked for)"),
             Cost.INTEGRATED: N_("not computed (the slow method; ask for it)")}


@dataclass(frozen=True)
class Method:
    """A method as pages list it: a registry entry, or one layer of a method with per-layer variants."""
    key: str
    name: str          # marked for the catalog (i18n/), like the caveat: `shown()` in the reader's language
    caveat: str        # what a student should keep in mind, one sentence
    layer: int | None = None     # a per-layer method's layer

    @property
    def label(self) -> str:
        """The English name with its layer, as files and the command line write it."""
        return self.name if self.layer is None else f"{self.name}, layer {self.layer}"

    def shown(self) -> str:
        """The name in the interface's language (i18n/), with its layer."""
        return _(self.name) if self.layer is None else _("{method}, layer {i}").format(method=_(self.name),
                                                                                      i=self.layer)


def methods(n_layers: int) -> dict[str, Method]:
    """Every method `attribute` computes, in the order pages list them (the registry's, each method with
    per-layer variants followed by one per layer)."""
    out = []
    for spec in REGISTRY:
        out.append(Method(spec.key, spec.name, spec.caveat))
        if spec.per_layer:
            out += [Method(method_key(spec.key, i), *spec.per_layer, i) for i in range(n_layers)]
    return {m.key: m for m in out}


@dataclass
class Attribution:
    """All methods' attribution of one translation (`attribute`)."""
    source_tokens: list[str]            # S pieces, EOS last
    prefix_tokens: list[str]            # T decoder inputs: start symbol, then the output
    generated_tokens: list[str]         # T: the output, then EOS
    log_probs: np.ndarray               # (T,) log p of each generated token
    scores: dict[str, Scores]
    methods: dict[str, Method]
    unavailable: dict[str, str] = field(default_factory=dict)    # method key -> why not, for the user
    ig: IntegratedGradients | None = None
    trace: Trace | None = None          # what a page reads later of the pass the methods read (read_later)
    seconds: dict[str, float] = field(default_factory=dict)      # "attention" (all trace readings, ALTI+
                                                                  # included), "grad_x_input", "integrated_gradients"

    def head_agreement(self, reference: str = "alti") -> np.ndarray | None:
        """(L, H): each cross-attention head's correlation with the reference method (attention.head_agreement)."""
        if reference not in self.scores or self.trace is None:
            return None
        return head_agreement(self.trace, self.scores[reference])


def traced_pass(ckpt: Checkpoint, source: list[int], output: list[int]) -> tuple[Trace, np.ndarray]:
    """The teacher-forced pass over the output that the attention methods read: (trace, log p (T,))."""
    model = ckpt.model
    src = torch.tensor([source], device=next(model.parameters()).device)
    trace = Trace(RECORDING)
    with torch.inference_mode():
        forced = forced_decode(model, src, output, trace)
    trace.source_tokens = [ckpt.src_tokenizer.pieces(source)]
    trace.target_tokens = [ckpt.tgt_tokenizer.pieces([ckpt.config.bos_id] + output)]
    return trace, np.log(np.maximum(np.array(forced.probs, dtype=float), 1e-45))


def attribute(ckpt: Checkpoint, source: list[int], output: list[int], upto: Cost = Cost.INTEGRATED,
              ig_steps: int = IG_STEPS, on_progress: Callable[[int, int], None] | None = None) -> Attribution:
    """Every registered method's attribution of `output` (ids, no EOS) given `source` (ids with EOS), up to
    the cost `upto` (Cost.TRACE: what one traced pass gives, a few ms; Cost.INTEGRATED: all, integrated
    gradients with on_progress(done, total) per token). Methods above it, or that cannot be computed for
    this model, are in `unavailable` with the reason."""
    model, cfg = ckpt.model, ckpt.config
    clock = Laps()
    trace, log_probs = traced_pass(ckpt, source, output)
    inputs = Inputs(model, trace, source, output, ig_steps, on_progress)
    scores, unavailable = _compute(inputs, [s for s in REGISTRY if s.cost == Cost.TRACE])
    clock.lap("attention")                               # every trace reading, ALTI+ included
    for spec in sorted((s for s in REGISTRY if s.cost > Cost.TRACE), key=lambda s: s.cost):
        if spec.cost > upto:
            unavailable[spec.key] = NOT_ASKED[spec.cost]
            continue
        got, failed = _compute(inputs, [spec])
        scores.update(got)
        unavailable.update(failed)
        clock.lap(spec.key)
    order = methods(cfg.n_decoder_layers)
    return Attribution(trace.source_tokens[0], trace.target_tokens[0], ckpt.tgt_tokenizer.pieces(output + [cfg.eos_id]),
                       log_probs, {k: scores[k] for k in order if k in scores}, order, unavailable, inputs.ig,
                       trace.keeping(read_later(cfg.n_decoder_layers)), clock.laps)


def read_later(n_decoder_layers: int) -> list[str]:
    """What an Attribution keeps of its traced pass: each decoder layer's attention weights and values (a
    head's raw_attention and value_norm, head_agreement) and the masks. The rest (the encoder's, the residual
    stream, the logits: ~90 % of the recording) is read by the methods and then dropped: the app keeps one
    Attribution per sentence in its caches (app/resources.py)."""
    weights = [names.sublayer("decoder", i, sub) for i in range(n_decoder_layers)
               for sub in ("self_attn", "cross_attn")]
    return [*weights, *(names.part(w, "v") for w in weights),
            *(names.mask(k) for k in ("encoder_self", "decoder_self", "cross"))]


def _compute(inputs: Inputs, specs: list[MethodSpec]) -> tuple[dict[str, Scores], dict[str, str]]:
    """The scores of `specs` (each per-layer variant too), and the methods that could not be computed,
    with why."""
    scores, unavailable = {}, {}
    for spec in specs:
        layers = (None, *range(inputs.model.cfg.n_decoder_layers)) if spec.per_layer else (None,)
        try:
            for layer in layers:
                got = spec.compute(inputs, layer)
                scores[got.method] = got
        except Unavailable as exc:
            unavailable[spec.key] = str(exc)
    return scores, unavailable


def trace_methods(trace: Trace, model: Transformer) -> tuple[dict[str, Scores], dict[str, str]]:
    """What one trace recorded with RECORDING gives (every Cost.TRACE method), and the methods that cannot
    be computed for this model, with why."""
    return _compute(Inputs(model, trace, [], []), [s for s in REGISTRY if s.cost == Cost.TRACE])


def attribution_json(att: Attribution) -> dict[str, Any]:
    """The `attribution` part of the trace format (docs/trace-format.md)."""
    r6 = lambda a: np.round(np.asarray(a, dtype=float), 6).tolist()  # noqa: E731
    out: dict[str, Any] = {
        "format": "transformer-attribution/1",
        "source_tokens": att.source_tokens,
        "prefix_tokens": att.prefix_tokens,
        "generated_tokens": att.generated_tokens,
        "log_probs": r6(att.log_probs),
        "methods": {},
        "unavailable": dict(att.unavailable),
    }
    for key, s in att.scores.items():
        share = s.source_share()
        out["methods"][key] = {"label": att.methods[key].label, "caveat": att.methods[key].caveat,
                               "joint": s.joint, "signed": s.signed, "source": r6(s.source), "prefix": r6(s.prefix),
                               "source_share": None if share is None else r6(share)}
    if att.ig is not None:
        out["integrated_gradients"] = {"steps": [int(n) for n in att.ig.steps],
                                       "baseline": "zero token embeddings, positions kept",
                                       "baseline_log_probs": r6(att.ig.baseline_log_probs),
                                       "completeness_error": r6(att.ig.completeness_error)}
    agreement = att.head_agreement()
    if agreement is not None:
        out["head_agreement"] = {"reference": "alti", "cross_attention": [[None if np.isnan(v) else round(float(v), 6)
                                                                            for v in row] for row in agreement]}
    return out


__all__ = ["RECORDING", "IG_STEPS", "Attribution", "Method", "Scores", "attribute", "attribution_json", "methods",
           "raw_attention", "value_norm", "cross_rollout", "alti_plus", "gradient_x_input", "integrated_gradients",
           "Pass", "traced_pass", "head_agreement", "Cost", "REGISTRY", "MethodSpec", "Inputs"]
