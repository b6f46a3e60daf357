"""Attribution: what each generated token used, by every method (registry.py: the registry and the
entry points; alti.py, attention.py, gradients.py: the computations; scores.py: their common form;
faithfulness.py: how faithful each is). The package re-exports registry.py."""
from model.analysis.attribution.registry import (  # noqa: F401
    NOT_ASKED,
    RECORDING,
    REGISTRY,
    Attribution,
    Cost,
    Inputs,
    Method,
    MethodSpec,
    attribute,
    attribution_json,
    methods,
    trace_methods,
    traced_pass,
)
