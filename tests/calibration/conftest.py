"""Fixtures for the calibration tests."""

from __future__ import annotations

import pytest
import structlog


@pytest.fixture
def logs():
    """Captured structlog event dicts, whatever an earlier test configured (a CLI test sets the
    level to error, which would drop the warnings asserted on here)."""
    structlog.reset_defaults()
    with structlog.testing.capture_logs() as captured:
        yield captured
    structlog.reset_defaults()
