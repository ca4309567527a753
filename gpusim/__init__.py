"""gpusim: predict and explain multi-GPU training performance before you buy, rent or tune GPUs.

The public API is imported lazily so that ``import gpusim`` (and the CLI) start fast and never pull in
torch or streamlit::

    import gpusim
    db = gpusim.load_hwdb()
    result = gpusim.simulate(gpusim.Scenario(model="resnet50", gpu="h100-sxm", gpus=8, per_gpu_batch=256))
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# name -> module that defines it
_LAZY = {
    "load_hwdb": ("gpusim.hwdb", "load"),
    "HardwareDB": ("gpusim.hwdb", "HardwareDB"),
    "GpusimError": ("gpusim.errors", "GpusimError"),
    "Workload": ("gpusim.workload", "Workload"),
    "get_workload": ("gpusim.workload", "get_workload"),
    "Strategy": ("gpusim.strategy", "Strategy"),
    "ModelParams": ("gpusim.params", "ModelParams"),
    "Scenario": ("gpusim.scenario", "Scenario"),
    "StepResult": ("gpusim.simulation", "StepResult"),
    "simulate": ("gpusim.simulation", "simulate"),
    "scaling_curve": ("gpusim.simulation", "scaling_curve"),
    "collective": ("gpusim.simulation", "collective"),
    "sweep": ("gpusim.sweeps", "sweep"),
    "plan": ("gpusim.planning", "plan"),
    "compare": ("gpusim.comparison", "compare"),
    "search_layouts": ("gpusim.search", "search_layouts"),
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'gpusim' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted(__all__)
