"""Dead letters on the real Redis, without the model: a failed ticket calls back, and a dead
letter never overwrites a result another delivery stored first."""

from __future__ import annotations

import time

import msgspec
import redis

from service.pipeline import combine, unavailable
from service.results import L1Result, ModelInfo, TicketIn, Timings
from service.store import WORKER_GROUP, Delivery, Keys, WorkerStore
from service.worker import Worker
from tests.support import REDIS_URL, make_settings
from tests.test_worker_liveness import HangingClassifier

MODEL = ModelInfo(name="stand-in", sha256="0" * 64)
L1 = L1Result(level="none", rules=[], rules_sha="r" * 64)


def _accept(client: redis.Redis, keys: Keys, ticket_id: str, callback: bool) -> None:
    request = TicketIn(body="The export crashes.", callback_url="http://127.0.0.1:9/hook" if callback else None)
    client.hset(
        keys.ticket(ticket_id),
        mapping={
            "id": ticket_id,
            "status": "queued",
            "request": msgspec.json.encode(request),
            "l1": msgspec.json.encode(L1),
            "accepted_at": repr(time.time()),
            "callback": "1" if callback else "0",
        },
    )
    client.xadd(keys.stream, {"id": ticket_id})


def _deliveries(client: redis.Redis, keys: Keys, consumer: str) -> Delivery:
    entry_id, fields = client.xreadgroup(WORKER_GROUP, consumer, {keys.stream: ">"}, count=1)[0][1][0]
    return Delivery(entry_id=entry_id.decode(), ticket_id=fields[b"id"].decode(), deliveries=1, claimed=False)


def _result(ticket_id: str, status: str = "done"):
    return combine(ticket_id, L1, unavailable("test"), MODEL, "p", Timings(), time.time(), status=status)


def test_a_dead_lettered_ticket_with_a_callback_url_calls_back(prefix, redis_client):
    settings = make_settings(prefix, max_deliveries=1, claim_idle_ms=100, l2_timeout_s=0.05)
    keys = Keys(prefix)
    worker = Worker(settings, redis.Redis.from_url(REDIS_URL), HangingClassifier(), consumer="w-dl")
    worker.store.ensure_group()
    _accept(redis_client, keys, "t_dl_cb", callback=True)
    redis_client.xreadgroup(WORKER_GROUP, "ghost", {keys.stream: ">"}, count=1)  # died with it
    time.sleep(0.15)
    worker.run(burst=True)  # claims it: second delivery > max_deliveries
    stored = redis_client.hgetall(keys.ticket("t_dl_cb"))
    assert stored[b"status"] == b"failed"
    assert [f[b"id"] for _, f in redis_client.xrange(keys.callbacks)] == [b"t_dl_cb"]
    assert [f[b"id"] for _, f in redis_client.xrange(keys.deadletter)] == [b"t_dl_cb"]
    assert redis_client.xlen(keys.stream) == 0


def test_a_dead_letter_after_a_stored_result_changes_nothing(prefix, redis_client):
    keys = Keys(prefix)
    store = WorkerStore(redis_client, keys, 3600)
    store.ensure_group()
    _accept(redis_client, keys, "t_race", callback=True)
    slow = _deliveries(redis_client, keys, "slow")
    # Another worker claimed the same entry and stored its result first.
    assert store.store_result(slow, _result("t_race"), b"", True, time.time())
    before = redis_client.hgetall(keys.ticket("t_race"))
    assert not store.dead_letter(slow, _result("t_race", "failed"), "too many deliveries", time.time(), True)
    assert redis_client.hgetall(keys.ticket("t_race")) == before
    assert redis_client.xlen(keys.deadletter) == 0
    assert redis_client.xlen(keys.callbacks) == 1  # the stored result's, not a second one
    assert redis_client.zscore(keys.queue("yellow"), "t_race") is not None


def test_a_dead_letter_without_a_callback_url_schedules_none(prefix, redis_client):
    keys = Keys(prefix)
    store = WorkerStore(redis_client, keys, 3600)
    store.ensure_group()
    _accept(redis_client, keys, "t_dl_none", callback=False)
    delivery = _deliveries(redis_client, keys, "w")
    assert store.dead_letter(delivery, _result("t_dl_none", "failed"), "x", time.time(), False)
    assert redis_client.hget(keys.ticket("t_dl_none"), "status") == b"failed"
    assert redis_client.xlen(keys.callbacks) == 0
