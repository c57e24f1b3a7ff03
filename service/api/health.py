"""Public probes and metrics: /healthz (up), /readyz (Redis and a loaded worker), /metrics."""

from __future__ import annotations

import time

from litestar import MediaType, Response, get
from litestar.datastructures import State
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .. import metrics


@get("/healthz", summary="Liveness", tags=["health"])
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@get("/readyz", summary="Readiness: Redis reachable and a worker with a loaded model", tags=["health"])
async def readyz(state: State) -> Response[dict[str, object]]:
    checks: dict[str, object] = {}
    try:
        checks["redis"] = await state.store.ping()
    except Exception as error:  # readiness reports, it never raises
        checks["redis"] = False
        checks["redis_error"] = type(error).__name__
    workers = []
    if checks["redis"]:
        try:
            workers = await state.store.workers()
        except Exception:
            workers = []
    checks["workers"] = len(workers)
    checks["models"] = sorted({w.model for w in workers})
    ready = bool(checks["redis"]) and len(workers) > 0
    return Response({"ready": ready, **checks}, status_code=200 if ready else 503)


async def refresh_gauges(state: State) -> None:
    """Queue depths, backlog and audit state live in Redis; read them at scrape time."""
    try:
        gauges = await state.store.gauges()
    except Exception:
        return  # Redis down: keep the last values; the 503s show it elsewhere
    for queue, depth in gauges["queues"].items():
        metrics.queue_depth.labels(queue=queue).set(depth)
    metrics.stream_backlog.set(gauges["backlog"])
    metrics.stream_pending.set(gauges["pending"])
    metrics.workers_alive.set(gauges["workers"])
    audit = gauges["audit"]
    for field, gauge in metrics.AUDIT_STATE_GAUGES.items():
        if field in audit:
            try:
                gauge.set(float(audit[field]))
            except ValueError:
                pass


@get("/metrics", summary="Prometheus metrics", tags=["health"], media_type=MediaType.TEXT, include_in_schema=True)
async def metrics_endpoint(state: State) -> Response[bytes]:
    await refresh_gauges(state)
    state.last_scrape = time.time()
    return Response(generate_latest(metrics.REGISTRY), media_type=CONTENT_TYPE_LATEST)
