"""Everything the service keeps in Redis, and the only code that talks to Redis.

- `keys`: every key, stream and group, with what it holds and its expiry (the data model).
- `records`: the stored records, typed: `StoredTicket` (the ticket hash), `Heartbeat` (a live
  worker), the audit's queued entries and checks, the hidden-state blob.
- `scripts`: the Lua scripts that make accept, store-result and decide atomic.
- `api`: `AsyncStore`, the API's side (accept, read, queues and positions, decide, gauges).
- `worker`: `WorkerStore`, a worker's side (claim, mark, store the result, dead-letter, beat).
- `callbacks`: `CallbackStore`, the callback sender's stream.
- `reads`: blocking readers shared by worker and jobs (`load_ticket`, `load_features`,
  `decisions_since`).
- `audit`: `AuditStore`, the audit job's side (sample, queue, checks, state), and the judge's
  verdict cache.
- `ratelimit`: token buckets every API replica shares.
- `connection`: which Redis to use (REDIS_URL, local, embedded) and opening a client.

It imports `results` and `settings` only; nothing here knows about HTTP, rules or the model.
"""

from .api import AcceptOutcome, AsyncStore, DecideOutcome, Position
from .audit import AuditStore, RedisVerdictCache
from .callbacks import CallbackEntry, CallbackPayload, CallbackStore
from .keys import QUEUES, WORKER_GROUP, Keys, Queue
from .reads import DecisionEntry, decisions_since, load_features, load_ticket
from .records import Heartbeat, StoredTicket, WorkerCalibration, decode_features, encode_features
from .worker import Delivery, WorkerStore

__all__ = [
    "QUEUES",
    "WORKER_GROUP",
    "AcceptOutcome",
    "AsyncStore",
    "AuditStore",
    "CallbackEntry",
    "CallbackPayload",
    "CallbackStore",
    "DecideOutcome",
    "DecisionEntry",
    "Delivery",
    "Heartbeat",
    "Keys",
    "Position",
    "Queue",
    "RedisVerdictCache",
    "StoredTicket",
    "WorkerCalibration",
    "WorkerStore",
    "decisions_since",
    "decode_features",
    "encode_features",
    "load_features",
    "load_ticket",
]
