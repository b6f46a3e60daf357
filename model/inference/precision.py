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

    fp16w       fp32 arithmetic, every linear's weights held in fp16 (FBGEMM's fp16-weight kernel, the one
                torch.ao's fp16 dynamic quantisation calls: each weight turned back into fp32 as it is multiplied).
                The shipped checkpoints store their weights in fp16, so these are the very numbers fp32 holds; the
                sums come in another order (within ~1e-5). Decoding reads every decoder weight at every step, a few
                rows at a time, where this kernel is 2.2-2.4x faster than nn.Linear's on session 40's CPU (one
                sentence as the app decodes it). Its packed matrices take ~4 bytes a weight in memory (measured:
                ten of 8,000 x 256 add 78.7 MB), as much as an fp32 copy
    fp16w-dec   the same for the decoder and the output layer only (what every step reads); the encoder, run once
                a sentence, stays nn.Linear's (shared with the fp32 model), so the copy holds about half as much

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
FP16W = "fp16w"
FP16W_DEC = "fp16w-dec"
HALF_WEIGHTS = (FP16W, FP16W_DEC)                    # fp32 arithmetic on fp16 weights (Fp16WeightLinear)
SCHEMES: dict[str, tuple[str, ...]] = {             # scheme -> the linears it replaces: a name's last part, or
    ONEDNN: EVERY,                                  # (ending in ".") the start of its name
    ONEDNN_OUT: ("generator",),
    FP16W: EVERY,
    FP16W_DEC: ("decoder.", "generator"),
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
    FP16W: N_("fp32 arithmetic on every weight held in fp16, the very numbers the checkpoint stores"),
    FP16W_DEC: N_("fp32 arithmetic on the decoder's and output layer's weights held in fp16, the very numbers the "
                  "checkpoint stores"),
    "int8w": N_("int8 weights, fp32 arithmetic"),
    "int8": N_("int8 weights and inputs (dynamic quantisation)"),
    "int8-ffn": N_("int8 in the feed-forward and output layers"),
    "int8-ffn1": N_("int8 in the feed-forward layers"),
}


def linears(model: nn.Module, scheme: str) -> list[str]:
    """The names of the linear layers `scheme` quantises in `model`."""
    wanted = SCHEMES[scheme]
    return [name for name, m in model.named_modules()
            if isinstance(m, nn.Linear) and any(_names(name, part) for part in wanted)]


def _names(name: str, part: str) -> bool:
    return name.startswith(part) if part.endswith(".") else name.rsplit(".", 1)[-1] == part


def available(scheme: str) -> bool:
    """Whether this PyTorch build can run `scheme` (oneDNN is in every x86 CPU wheel, FBGEMM in every x86 one
    too; neither in every build; FBGEMM's fp16 kernel is deprecated and may leave a later PyTorch)."""
    if scheme in LAID_OUT:
        return torch.backends.mkldnn.is_available()
    if scheme in HALF_WEIGHTS:
        return "fbgemm" in torch.backends.quantized.supported_engines and \
            hasattr(torch.ops.aten, "fbgemm_linear_fp16_weight_fp32_activation") and \
            torch.backends.cpu.get_cpu_capability().startswith(("AVX2", "AVX512"))    # FBGEMM's kernels need AVX2
    return True


def quantized(model: Transformer, scheme: str) -> Transformer:
    """A copy of `model` (in eval mode, on the CPU) with `scheme`'s linears replaced; `model` is untouched. The
    copy shares every tensor it does not replace with `model` (the embeddings, norms, the linears the scheme leaves):
    it costs only the replaced weights' bytes. It runs under torch.inference_mode only (no gradients through it:
    attribution reads the fp32 model), and a model trained further afterwards needs a new copy."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown precision {scheme!r}: one of {', '.join(PRECISIONS)}")
    if not available(scheme):
        raise ValueError(f"precision {scheme!r} needs a PyTorch built with "
                         f"{'FBGEMM' if scheme in HALF_WEIGHTS else 'oneDNN (torch.backends.mkldnn)'}")
    if any(t.device.type != "cpu" for t in model.parameters()):
        model = copy.deepcopy(model).cpu()                                  # the original stays on its device
    shared = {id(t): t for t in (*model.parameters(), *model.buffers())}    # what the scheme leaves is not copied
    copied = copy.deepcopy(model, memo=shared).eval()
    if kind := _REPLACEMENT.get(scheme):
        for name in linears(copied, scheme):
            parent, _, child = name.rpartition(".")
            owner = copied.get_submodule(parent) if parent else copied
            setattr(owner, child, kind(getattr(owner, child)))
        return copied
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic
    spec = {name: per_channel_dynamic_qconfig for name in linears(copied, scheme)}
    return quantize_dynamic(copied, qconfig_spec=spec, dtype=torch.qint8, inplace=True)


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


class Fp16WeightLinear(nn.Module):
    """nn.Linear whose weight is held in fp16, packed once for FBGEMM's kernel, which turns each weight back into
    fp32 as it multiplies: y = x W^T + b in fp32, the sums in FBGEMM's order. Exact for weights that fp16 holds
    exactly (a checkpoint stored in fp16); for others, W rounded to fp16 first."""

    BYTES_PER_WEIGHT = 4               # what the packed matrix takes in memory (measured, session 40), not fp16's 2

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        w = linear.weight.detach().float().contiguous()                       # (out, in)
        # deprecated, not gone (torch 2.13): torch's C++ side logs one line saying so, once a process
        self.packed = torch.ops.aten.fbgemm_pack_gemm_matrix_fp16(w)         # opaque: cannot be read back
        self.bias = linear.bias.detach().float().clone() if linear.bias is not None else torch.zeros(w.size(0))
        self.in_features, self.out_features = linear.in_features, linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:                       # (..., in) -> (..., out)
        flat = x.reshape(-1, self.in_features).float()                        # (N, in)
        y = torch.ops.aten.fbgemm_linear_fp16_weight_fp32_activation(flat, self.packed, self.bias)   # (N, out)
        return y.reshape(*x.shape[:-1], self.out_features)


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


def added_bytes(model: nn.Module) -> int:
    """Bytes a fast copy holds beyond the fp32 model it shares the rest with: its replaced linears' weights."""
    total = 0
    for m in model.modules():
        if isinstance(m, PackedLinear):
            total += 4 * m.in_features * m.out_features
        elif isinstance(m, Fp16WeightLinear):
            total += Fp16WeightLinear.BYTES_PER_WEIGHT * m.in_features * m.out_features
        elif isinstance(m, Int8WeightLinear) or type(m).__module__.startswith("torch.ao.nn.quantized"):
            total += getattr(m, "in_features", 0) * getattr(m, "out_features", 0)
    return total


# the schemes whose linears are replaced by a module of ours (the int8 ones by torch.ao's quantize_dynamic)
_REPLACEMENT: dict[str, type[nn.Module]] = {ONEDNN: PackedLinear, ONEDNN_OUT: PackedLinear, FP16W: Fp16WeightLinear,
                                            FP16W_DEC: Fp16WeightLinear, "int8w": Int8WeightLinear}
