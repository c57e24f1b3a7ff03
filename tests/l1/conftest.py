"""The shipped rule pack, loaded once per test session (loading runs every example)."""

from __future__ import annotations

import pytest

from service.l1 import RulePack, load_pack
from tests.l1.support import RULES


@pytest.fixture(scope="session")
def pack() -> RulePack:
    return load_pack(RULES)
