"""Shared fixtures: the shipped hardware database, loaded once."""

from __future__ import annotations

import os

import pytest

os.environ.pop("GPUSIM_HWDB", None)  # tests see the shipped database only, unless they set it themselves


@pytest.fixture(scope="session")
def db():
    from gpusim.hwdb import load

    return load()


@pytest.fixture(scope="session")
def load_tool():
    """``load_tool(name)``: the script ``tools/<name>.py`` as a module (registered in ``sys.modules``: its dataclasses
    look their module up)."""
    import importlib.util
    import sys
    from pathlib import Path

    def load(name: str):
        path = Path(__file__).resolve().parent.parent / "tools" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        return mod

    return load


@pytest.fixture(scope="session")
def run_row():
    """``run_row(**fields)``: one row of a published-runs table (``validation/runs_*.csv``'s columns, as strings) for
    :func:`gpusim.validation_runs.predict_row`: a 10 s step of an open row, ``strategy=zero1`` in the notes, and
    the given fields (``gpus=64``, ``notes="..."``, ...) over those defaults."""
    base = {"run_id": "x", "source_id": "S", "source": "s", "holdout": "0", "model": "llama3-8b", "gpu": "h100-sxm",
            "gpus": "8", "gpus_per_node": "8", "tp": "1", "pp": "1", "vp": "", "cp": "1", "ep": "", "etp": "",
            "micro_batch": "1", "global_batch": "128", "seq_len": "8192", "precision": "bf16", "recompute": "",
            "metric": "step_time_s", "value": "10", "unit": "s", "notes": "strategy=zero1"}

    def make(**fields):
        return {**base, **{k: str(v) for k, v in fields.items()}}

    return make
