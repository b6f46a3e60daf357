"""Fast CPU inference: a copy of the model whose linear layers hold int8 weights (issue 43, item 1).

Two of PyTorch's own routes, no kernels of ours; everything but the chosen linear layers (embeddings,
LayerNorm, softmax, the attention itself) stays fp32:

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

from model.network.transformer import Transformer

FP32 = "fp32"
EVERY = ("w_q", "w_k", "w_v", "w_o", "w_1", "w_2", "generator")
SCHEMES: dict[str, tuple[str, ...]] = {             # scheme -> the linears it quantises (name suffixes)
    "int8w": EVERY,
    "int8": EVERY,
    "int8-ffn": ("w_1", "w_2", "generator"),
    "int8-ffn1": ("w_1", "w_2"),
}
PRECISIONS = (FP32, *SCHEMES)


def linears(model: nn.Module, scheme: str) -> list[str]:
    """The names of the linear layers `scheme` quantises in `model`."""
    wanted = SCHEMES[scheme]
    return [name for name, m in model.named_modules()
            if isinstance(m, nn.Linear) and name.rsplit(".", 1)[-1] in wanted]


def quantized(model: Transformer, scheme: str) -> Transformer:
    """A copy of `model` (in eval mode, on the CPU) with `scheme`'s linears int8; `model` is untouched."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown precision {scheme!r}: one of {', '.join(PRECISIONS)}")
    copied = copy.deepcopy(model).cpu().eval()
    if scheme == "int8w":
        for name in linears(copied, scheme):
            parent, _, child = name.rpartition(".")
            owner = copied.get_submodule(parent) if parent else copied
            setattr(owner, child, Int8WeightLinear(getattr(owner, child)))
        return copied
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic
    spec = {name: per_channel_dynamic_qconfig for name in linears(copied, scheme)}
    return quantize_dynamic(copied, qconfig_spec=spec, dtype=torch.qint8)


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
    """Bytes of the model's weights as held in memory (int8 packed weights counted as stored)."""
    state = model.state_dict()
    total = 0
    for value in state.values():
        if isinstance(value, torch.Tensor):
            total += value.numel() * value.element_size()
        elif isinstance(value, tuple):                                  # a packed (weight, bias) pair
            total += sum(v.numel() * v.element_size() for v in value if isinstance(v, torch.Tensor))
    return total
