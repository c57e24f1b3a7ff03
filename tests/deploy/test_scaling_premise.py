"""Why the workers scale on XLEN (KEDA streamLength) and not on the consumer group's lag: shown on a real Redis.

The worker's store acknowledges and deletes each entry (XACK + XDEL). Two facts follow, which
deploy/k8s/keda.yaml and the TriageStreamBacklogGrowing alert rely on:
1. XLEN of the stream is exactly the outstanding work: undelivered plus in flight.
2. As soon as entries finish out of order, XINFO GROUPS reports the group's lag as NULL, which
   KEDA's lag mode would read as 0.
If the store stops deleting entries, test 1 fails and the scaling config must change with it.
"""

from __future__ import annotations

import redis

from service.store import WORKER_GROUP, Keys, WorkerStore


def _group(client: redis.Redis, stream: str) -> dict:
    return next(g for g in client.xinfo_groups(stream) if g["name"].decode() == WORKER_GROUP)


def test_xlen_is_outstanding_work_and_group_lag_goes_null(redis_client, prefix):
    keys = Keys(prefix)
    store = WorkerStore(redis_client, keys, result_ttl_s=60)
    store.ensure_group()
    for n in range(5):
        redis_client.xadd(keys.stream, {"id": f"t{n}"})
    first = store.next_delivery("worker-a", claim_idle_ms=60_000, block_ms=10)
    second = store.next_delivery("worker-b", claim_idle_ms=60_000, block_ms=10)
    assert (first.ticket_id, second.ticket_id) == ("t0", "t1")
    assert _group(redis_client, keys.stream)["lag"] == 3

    store.acknowledge(second)  # finishes before the older entry: out of order
    assert redis_client.xlen(keys.stream) == 4  # 3 undelivered + 1 in flight
    assert _group(redis_client, keys.stream)["lag"] is None  # what KEDA would read as 0

    store.acknowledge(first)
    assert redis_client.xlen(keys.stream) == 3
    assert _group(redis_client, keys.stream)["pending"] == 0
