"""Fixtures for the evaluation tests."""

from __future__ import annotations

import pytest
import structlog


@pytest.fixture(autouse=True)
def _logging_reset():
    """The CLI configures structlog onto the stderr pytest captured for one test: undo it."""
    yield
    structlog.reset_defaults()
