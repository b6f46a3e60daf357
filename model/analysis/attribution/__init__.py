"""Attribution: what each generated token used, by every method (methods.py: the registry and the
entry points; alti.py, attention.py, gradients.py: the computations; scores.py: their common form;
faithfulness.py: how faithful each is). The package re-exports methods.py."""
from model.analysis.attribution.methods import (  # noqa: F401
    METHODS,
    PER_LAYER,
    RECORDING,
    Attribution,
    Method,
    attribute,
    attribution_json,
    methods,
    trace_methods,
    traced_pass,
)
