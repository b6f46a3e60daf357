"""Fast CPU inference: a copy of the model whose linear layers compute faster (issue 43, item 1).

PyTorch's own routes, no kernels of ours; everything but the chosen linear layers (embeddings, LayerNorm,
softmax, the attention itself) stays as it is:

    onednn      fp32 still: every linear's weights laid out once, at load, for oneDNN's matrix kernel
                (torch.ops.mkldnn, what torch.compile's frozen CPU graphs call). The same sums in another
                order (within ~1e-6 of nn.Linear's); decoding is matrix-bound on the CPU and a few rows at a
                time, where the laid-out weights are read 2-3x faster on some CPUs (BENCHMARKS.md, session 25)
    onednn-out  the same for the output layer alone (d_model -> vocabulary, the largest product of a step); the
                other linears stay nn.Linear's: on CPUs whose MKL computes a few rows of the small products
                faster than oneDNN's kernel (session 36's machine: every linear laid out decoded 10-25 % slower
                than fp32, the output layer alone about as fast)

    int8w       weight-only: every linear's weights int8 (one scale per output channel), its input and output
                fp32, multiplied by PyTorch's CPU kernel for that (aten._weight_int8pack_mm, the one torchao's
                int8 weight-only configuration uses)
    int8        dynamic quantisation (torch.ao.quantization.quantize_dynamic, per-channel weights): every
                linear's input is quantised to int8 on the fly too: attention projections, FFN, output layer
    int8-ffn    the same for the FFN and the output layer only (attention projections stay fp32)
    int8-ffn1   the same for the FFN only

The fp32 model is kept beside it: what reads weights (attribution, head statistics) reads fp32's, and a link
may ask for fp32 (`python -m model.precision` measures which scheme a checkpoint may use: model/commands).
"""
from __future__ import annotations

import copy

import torch
from torch import nn

from i18n import N_
from model.network.transformer import Transformer

FP32 = "fp32"
EVERY = ("w_q", "w_k", "w_v", "w_o", "w_1", "w_2", "generator")
ONEDNN = "onednn"
ONEDNN_OUT = "onednn-out"
LAID_OUT = (ONEDNN, ONEDNN_OUT)                      # fp32, its weights laid out for oneDNN (PackedLinear)
SCHEMES: dict[str, tuple[str, ...]] = {             # scheme -> the linears it replaces (name suffixes)
    ONEDNN: EVERY,
    ONEDNN_OUT: ("generator",),
    "int8w": EVERY,
    "int8": EVERY,
    "int8-ffn": ("w_1", "w_2", "generator"),
    "int8-ffn1": ("w_1", "w_2"),
}
PRECISIONS = (FP32, *SCHEMES)
DESCRIPTIONS = {                                     # what each does, said in the app and on the model card
    FP32: N_("plain fp32, PyTorch's own linear layers"),
    ONEDNN: N_("fp32 with its weights laid out once for oneDNN's matrix kernel (the same sums in another order)"),
    ONEDNN_OUT: N_("fp32, the output layer's weights laid out once for oneDNN's matrix kernel (the same sums in "
                   "another order)"),
    "int8w": N_("int8 weights, fp32 arithmetic"),
    "int8": N_("int8 weights and inputs (dynamic quantisation)"),
    "int8-ffn": N_("int8 in the feed-forward and output layers"),
    "int8-ffn1": N_("int8 in the feed-forward layers"),
}


def linears(model: nn.Module, scheme: str) -> list[str]:
    """The names of the linear layers `scheme` quantises in `model`."""
    wanted = SCHEMES[scheme]
    return [name for name, m in model.named_modules()
            if isinstance(m, nn.Linear) and name.rsplit(".", 1)[-1] in wanted]


def available(scheme: str) -> bool:
    """Whether this PyTorch build can run `scheme` (oneDNN is in every x86 CPU wheel, not in every build)."""
    return scheme not in LAID_OUT or torch.backends.mkldnn.is_available()


def quantized(model: Transformer, scheme: str) -> Transformer:
    """A copy of `model` (in eval mode, on the CPU) with `scheme`'s linears replaced; `model` is untouched.
    The copy runs under torch.inference_mode only (no gradients through it: attribution reads the fp32 model)."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown precision {scheme!r}: one of {', '.join(PRECISIONS)}")
    if not available(scheme):
        raise ValueError(f"precision {scheme!r} needs a PyTorch built with oneDNN (torch.backends.mkldnn)")
    copied = copy.deepcopy(model).cpu().eval()
    if scheme == "int8w" or scheme in LAID_OUT:
        kind = Int8WeightLinear if scheme == "int8w" else PackedLinear
        for name in linears(copied, scheme):
            parent, _, child = name.rpartition(".")
            owner = copied.get_submodule(parent) if parent else copied
            setattr(owner, child, kind(getattr(owner, child)))
        return copied
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic
    spec = {name: per_channel_dynamic_qconfig for name in linears(copied, scheme)}
    return quantize_dynamic(copied, qconfig_spec=spec, dtype=torch.qint8)


class PackedLinear(nn.Module):
    """nn.Linear in fp32 whose weight is laid out once for oneDNN (blocked for its kernel: an opaque tensor,
    which cannot be copied or read back); y = x W^T + b as nn.Linear, the sums in oneDNN's order."""

    ROWS_HINT = 4                      # the rows the layout is tuned for: a beam of 4, one token each

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        w = linear.weight.detach().float().contiguous()                       # (out, in)
        self.packed = torch.ops.mkldnn._reorder_linear_weight(w, self.ROWS_HINT)
        self.bias = None if linear.bias is None else linear.bias.detach().float().clone()
        self.in_features, self.out_features = linear.in_features, linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:                       # (..., in) -> (..., out)
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")


class Int8WeightLinear(nn.Module):
    """nn.Linear with int8 weights, one fp32 scale per output channel (absmax / 127); input and output fp32."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        w = linear.weight.detach().float()                                   # (out, in)
        scale = w.abs().amax(dim=1).clamp(min=1e-12) / 127                   # (out,)
        self.register_buffer("weight_int8", torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8))
        self.register_buffer("scale", scale)
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().float().clone())
        self.in_features, self.out_features = linear.in_features, linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features).contiguous()                  # (N, in)
        y = torch.ops.aten._weight_int8pack_mm(flat, self.weight_int8, self.scale)   # (N, out)
        y = y.reshape(*x.shape[:-1], self.out_features)
        return y if self.bias is None else y + self.bias


def size_bytes(model: nn.Module) -> int:
    """Bytes of the model's weights as held in memory (int8 packed weights counted as stored; oneDNN's laid-out
    fp32 weights as fp32)."""
    state = model.state_dict()
    total = sum(4 * m.in_features * m.out_features for m in model.modules() if isinstance(m, PackedLinear))
    for value in state.values():
        if isinstance(value, torch.Tensor):
            total += value.numel() * value.element_size()
        elif isinstance(value, tuple):                                  # a packed (weight, bias) pair
            total += sum(v.numel() * v.element_size() for v in value if isinstance(v, torch.Tensor))
    return total
