"""Shared fixtures: the shipped hardware database, loaded once."""

from __future__ import annotations

import os

import pytest

os.environ.pop("GPUSIM_HWDB", None)  # tests see the shipped database only, unless they set it themselves


@pytest.fixture(scope="session")
def db():
    from gpusim.hwdb import load

    return load()
