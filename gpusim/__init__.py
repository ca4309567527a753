"""gpusim: predict and explain multi-GPU training performance before you buy, rent or tune GPUs.

The public API is imported lazily so that ``import gpusim`` (and the CLI) start fast and never pull in
torch or streamlit::

    import gpusim
    db = gpusim.load_hwdb()
    result = gpusim.simulate(gpusim.Scenario(model="resnet50", gpu="h100-sxm", gpus=8, per_gpu_batch=256))

and mirrors the CLI, one function per command with options named as its flags (:mod:`gpusim.api`)::

    gpusim.predict(model="resnet50", gpu="h100-sxm", gpus=8, per_gpu_batch=256).to_dict()  # == predict --json
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
    # the CLI's commands, one function each, options named as the flags (gpusim.api)
    "predict": ("gpusim.api", "predict"),
    "sweep": ("gpusim.api", "sweep"),
    "plan": ("gpusim.api", "plan"),
    "compare": ("gpusim.api", "compare"),
    "comm": ("gpusim.api", "comm"),
    "scale": ("gpusim.api", "scale"),
    # the data-parallel hardware grid (was gpusim.sweep) and the layout search on a Scenario
    "hardware_sweep": ("gpusim.api", "hardware_sweep"),
    "search_layouts": ("gpusim.search", "search_layouts"),
}

__all__ = ["__version__", *_LAZY]


class _CheckoutPackages:
    """[issue 19] In a checkout, ``hwdb/`` and ``calibrate/`` are the packages ``gpusim.hwdb_data`` and
    ``gpusim.calibrate_bench`` (pyproject's ``package-dir``; a wheel installs them in place). The editable install
    (``pip install -e . --config-settings editable_mode=compat``, as the Makefile does) puts the checkout on
    ``sys.path`` with a plain ``.pth`` entry, so that a regular package ``gpusim`` beats a directory named
    ``gpusim`` in the working directory (setuptools' default editable finder runs after the path finder and
    loses to it); this finder, consulted last, maps the two renamed folders."""

    _DIRS = {"gpusim.hwdb_data": "hwdb", "gpusim.calibrate_bench": "calibrate"}

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        folder = cls._DIRS.get(name)
        if folder is None:
            return None
        import importlib.util
        import os

        root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), folder)
        init = os.path.join(root, "__init__.py")
        if not os.path.isfile(init):
            return None
        return importlib.util.spec_from_file_location(name, init, submodule_search_locations=[root])


def _install_checkout_packages() -> None:
    import sys

    if not any(f is _CheckoutPackages for f in sys.meta_path):
        sys.meta_path.append(_CheckoutPackages)


_install_checkout_packages()


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
