"""A worker's heartbeat in real Redis: written by WorkerStore, read back by the API's store."""

from __future__ import annotations

import asyncio

from service.store import AsyncStore, Heartbeat, Keys, WorkerCalibration, WorkerStore
from tests.support import REDIS_URL, make_settings


def _workers(prefix: str) -> list[Heartbeat]:
    async def go():
        store = AsyncStore.connect(REDIS_URL, make_settings(prefix))
        try:
            return await store.workers()
        finally:
            await store.aclose()

    return asyncio.run(go())


def test_a_heartbeat_round_trips_and_expires_with_its_worker(redis_client, prefix):
    keys = Keys(prefix)
    store = WorkerStore(redis_client, keys, result_ttl_s=3600)
    beat = Heartbeat(
        worker="w1",
        pid=7,
        at=1000.5,
        model="m.gguf",
        sha256="0" * 64,
        prompt_sha="p",
        processed=3,
        calibration=WorkerCalibration(version="v1", age_s=60.0, stale=False, error=None),
    )
    bare = Heartbeat(worker="w2", pid=8, at=1001.0, model="m.gguf", sha256="0" * 64, prompt_sha="p")
    store.heartbeat(beat, ttl_s=30)
    store.heartbeat(bare, ttl_s=30)
    # Something else under the heartbeat pattern is not a worker the API can count on.
    redis_client.set(keys.heartbeat("junk"), b"not json", ex=30)

    assert sorted(_workers(prefix), key=lambda b: b.worker) == [beat, bare]
    assert 0 < redis_client.ttl(keys.heartbeat("w1")) <= 30
    assert b"calibration" not in redis_client.get(keys.heartbeat("w2"))  # no watcher, no field

    store.clear_heartbeat("w1")
    assert [b.worker for b in _workers(prefix)] == ["w2"]
