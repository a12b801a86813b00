"""Fast unit tests of the workflow rules: plain functions and plain classes over
``HandleState``, no Temporal server and no workflow context (collaborators are fakes)."""

from __future__ import annotations

import pytest

from tests.unit.fakes import FakeLog, FakeSignals


@pytest.fixture
def log() -> FakeLog:
    return FakeLog()


@pytest.fixture
def signals() -> FakeSignals:
    return FakeSignals()
