"""The start-up objects leave the collector's generations (service/heap.py says why)."""

from __future__ import annotations

import gc

from service.heap import freeze_startup_objects


def test_objects_alive_at_startup_are_frozen_and_new_ones_are_not():
    gc.unfreeze()
    built_at_startup = [object()]
    try:
        frozen = freeze_startup_objects()
        built_later = [object()]
        assert frozen == gc.get_freeze_count() > 0
        tracked = gc.get_objects()  # the collector's generations, not the frozen objects
        assert not any(obj is built_at_startup for obj in tracked)
        assert any(obj is built_later for obj in tracked)
    finally:
        gc.unfreeze()
