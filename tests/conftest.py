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
