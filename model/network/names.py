"""The names of a trace's tensors, made in one place: the model writes under them, pages and
readings look them up by them (the list of what each holds: model/network/trace/record.py).

    side(s, what)            "source.embedding", "target.input", ...   s: source | target
    sublayer(stack, i, sub)  "encoder.0.self_attn", "decoder.2.feed_forward", ...
    part(name, what)         "<sublayer>.scores", "<sublayer>.norm.mean", ...
    layer(stack, i), head(attention, h), mask(kind), LOGITS
    stack_output(stack, n)   the last of n layers' output: the encoder's memory, the decoder's final vectors
"""
from __future__ import annotations

SIDES = {"encoder": "source", "decoder": "target"}
LOGITS = "output.logits"


def side(which: str, what: str) -> str:
    """which: "source" | "target"; what: "embedding" | "positional" | "input"."""
    return f"{which}.{what}"


def layer(stack: str, i: int) -> str:
    """"encoder.0", "decoder.2", ...: the prefix of everything layer i of a stack records."""
    return f"{stack}.{i}"


def sublayer(stack: str, i: int, sub: str) -> str:
    """stack: "encoder" | "decoder"; sub: "self_attn" | "cross_attn" | "feed_forward"."""
    return part(layer(stack, i), sub)


def head(attention: str, h: int) -> str:
    """One head of an attention sublayer, e.g. "decoder.1.cross_attn.3" (the knockout's names)."""
    return part(attention, str(h))


def part(name: str, what: str) -> str:
    return f"{name}.{what}"


def mask(kind: str) -> str:
    return f"masks.{kind}"


def stack_output(stack: str, n_layers: int) -> str:
    """What the stack's last layer hands on (post-norm: its FFN's Add & Norm output)."""
    return part(sublayer(stack, n_layers - 1, "feed_forward"), "out")
