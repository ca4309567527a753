"""Fixtures of the planner tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def db():
    from gpusim.hwdb import load

    return load()
