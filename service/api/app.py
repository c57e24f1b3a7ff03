"""The Litestar application factory: routes, error mapping, metrics middleware, lifespan."""

from __future__ import annotations

import re
import secrets
import time
from contextlib import asynccontextmanager
from typing import Any

import redis
import structlog
from litestar import Litestar, Request, Response
from litestar.datastructures import State
from litestar.exceptions import (
    HTTPException,
    NotAuthorizedException,
    NotFoundException,
    PermissionDeniedException,
    ValidationException,
)
from litestar.openapi import OpenAPIConfig
from litestar.status_codes import HTTP_413_REQUEST_ENTITY_TOO_LARGE
from litestar.types import ASGIApp, Receive, Scope, Send

from .. import metrics
from ..errors import ProblemError, StoreUnavailable
from ..settings import Settings
from ..store import AsyncStore
from .auth import TokenTable
from .health import healthz, metrics_endpoint, readyz
from .operators import list_queue, record_decision
from .schemas import Problem
from .sessions import SessionSigner
from .tickets import create_ticket, read_ticket

log = structlog.get_logger()
# Console sign-in: per client address, across replicas; a person needs a few tries at most.
LOGIN_RATE_PER_S, LOGIN_BURST = 0.2, 10
PUBLIC_PATHS = ("/healthz", "/readyz", "/metrics", "/schema")


def problem(
    status: int,
    type_: str,
    title: str,
    detail: str,
    field: str | None = None,
    errors: list[dict[str, str]] | None = None,
    headers: dict[str, str] | None = None,
) -> Response[Problem]:
    body = Problem(
        type=f"urn:triage:problem:{type_}", title=title, status=status, detail=detail, field=field, errors=errors or []
    )
    return Response(body, status_code=status, media_type="application/problem+json", headers=headers or {})


def _field_of(key: str, message: str) -> str:
    """msgspec names the whole body `data` for unknown or missing fields: name the field."""
    named = re.search(r"field `([^`]+)`", message)
    if key in ("", "data") and named:
        return named.group(1)
    return key.replace("[...]", "")


def _validation_problem(_: Request, exc: ValidationException) -> Response[Problem]:
    errors = []
    for item in exc.extra or []:
        if isinstance(item, dict):
            error = {k: str(v) for k, v in item.items() if k in ("key", "message", "source")}
            error["key"] = _field_of(error.get("key", ""), error.get("message", ""))
            errors.append(error)
    field = next((e["key"] for e in errors if e.get("key")), None)
    detail = "; ".join(e.get("message", "") for e in errors) or str(exc.detail)
    if "utf-8" in detail.lower() or "decode" in detail.lower():
        detail = f"the body is not valid UTF-8 JSON: {detail}"
    return problem(400, "invalid-request", "The request is not valid", detail, field, errors)


def _triage_problem(_: Request, exc: ProblemError) -> Response[Problem]:
    return problem(exc.status, exc.type, exc.title, exc.detail, exc.field, exc.errors, exc.headers)


def _redis_problem(_: Request, exc: redis.RedisError) -> Response[Problem]:
    log.error("redis_unavailable", error=type(exc).__name__)
    err = StoreUnavailable("Redis did not answer; the request was not accepted, retry later")
    return problem(err.status, err.type, err.title, err.detail, headers={"Retry-After": "5"})


def _http_problem(_: Request, exc: HTTPException) -> Response[Problem]:
    status = exc.status_code
    if status == HTTP_413_REQUEST_ENTITY_TOO_LARGE:
        return problem(
            413,
            "too-large",
            "The request is too large",
            "the request body exceeds the limit (TRIAGE_MAX_REQUEST_BYTES)",
        )
    if status == 400:
        return problem(
            400, "invalid-request", "The request is not valid", f"the body could not be decoded: {exc.detail}"
        )
    kinds = {
        NotFoundException: "not-found",
        NotAuthorizedException: "unauthorized",
        PermissionDeniedException: "forbidden",
    }
    kind = next((v for k, v in kinds.items() if isinstance(exc, k)), "http-error")
    return problem(status, kind, str(exc.detail), str(exc.detail), headers=exc.headers)


def _too_deep_problem(_: Request, exc: RecursionError) -> Response[Problem]:
    # msgspec refuses JSON nested beyond Python's recursion limit: the client's input, not a 500.
    return problem(400, "invalid-request", "The request is not valid", "the JSON body is nested too deeply")


def _internal_problem(_: Request, exc: Exception) -> Response[Problem]:
    log.exception("unhandled_error", error=type(exc).__name__)
    return problem(500, "internal", "Internal error", "an unexpected error; it has been logged")


# A client's X-Request-ID is kept only when it is short, printable ASCII without spaces:
# anything else (not UTF-8, control characters, too long) is replaced, never an error.
_REQUEST_ID = re.compile(rb"[!-~]{1,64}")
REQUEST_ID_HEADER = b"x-request-id"
_REQUEST_ID_STATE = "triage_request_id"


def request_id_of(headers: list[tuple[bytes, bytes]]) -> str:
    """The client's request id if it is fit to log and echo, else a fresh one."""
    for name, value in headers:
        if name.lower() == REQUEST_ID_HEADER and _REQUEST_ID.fullmatch(value):
            return value.decode("ascii")
    return f"r{time.time_ns():x}{secrets.token_hex(3)}"


def metrics_middleware(app: ASGIApp) -> ASGIApp:
    """Counts requests by route template and status, times them, and binds the request id."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        started = time.perf_counter()
        status_holder = {"status": 500}
        structlog.contextvars.clear_contextvars()
        request_id = request_id_of(scope.get("headers", []))
        scope.setdefault("state", {})[_REQUEST_ID_STATE] = request_id  # type: ignore[typeddict-unknown-key]
        structlog.contextvars.bind_contextvars(request_id=request_id)

        async def send_wrapper(message: Any) -> None:
            if message["type"] == "http.response.start":
                status_holder["status"] = message["status"]
            await send(message)

        try:
            await app(scope, receive, send_wrapper)
        finally:
            route = scope.get("path_template") or "unmatched"
            metrics.requests_total.labels(route=route, status=str(status_holder["status"])).inc()
            metrics.request_seconds.labels(route=route).observe(time.perf_counter() - started)

    return middleware


async def echo_request_id(message: Any, scope: Scope) -> None:
    """A before-send hook, so that every answer carries X-Request-ID, also a 404 or a 405 that
    no route (and so no route middleware) saw; those are counted here, as route "unmatched"."""
    if message["type"] != "http.response.start":
        return
    request_id = scope.get("state", {}).get(_REQUEST_ID_STATE)
    if request_id is None:
        request_id = request_id_of(scope.get("headers", []))
        metrics.requests_total.labels(route="unmatched", status=str(message["status"])).inc()
    headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != REQUEST_ID_HEADER]
    message["headers"] = [*headers, (REQUEST_ID_HEADER, request_id.encode())]


def create_app(settings: Settings, redis_url: str, rules: Any, extra_route_handlers: list | None = None) -> Litestar:
    """Build the app. `rules` is the L1 PackHolder (its `.pack` is read per request)."""

    @asynccontextmanager
    async def lifespan(app: Litestar):
        app.state.store = store = AsyncStore.connect(redis_url, settings)
        app.state.rate_limiter = store.rate_limiter(
            "ingest", settings.ingest_rate_per_s, settings.ingest_burst, "ingest rate limit for this token exceeded"
        )
        app.state.login_limiter = store.rate_limiter(
            "login", LOGIN_RATE_PER_S, LOGIN_BURST, "too many sign-in attempts from this address"
        )
        try:
            yield
        finally:
            await app.state.store.aclose()

    state = State(
        {
            "settings": settings,
            "rules": rules,
            "tokens": TokenTable(settings.ingest_tokens, settings.operator_tokens),
            "sessions": SessionSigner(settings.operator_tokens),
        }
    )
    return Litestar(
        route_handlers=[
            create_ticket,
            read_ticket,
            list_queue,
            record_decision,
            healthz,
            readyz,
            metrics_endpoint,
            *(extra_route_handlers or []),
        ],
        lifespan=[lifespan],
        state=state,
        middleware=[metrics_middleware],
        before_send=[echo_request_id],
        exception_handlers={
            ProblemError: _triage_problem,
            ValidationException: _validation_problem,
            redis.RedisError: _redis_problem,
            HTTPException: _http_problem,
            RecursionError: _too_deep_problem,
            Exception: _internal_problem,
        },
        request_max_body_size=settings.max_request_bytes,
        openapi_config=OpenAPIConfig(
            title="triage",
            version="0.1.0",
            path="/schema",
            description="Ticket triage: L1 rules + L2 logits classifier",
        ),
        debug=False,
    )
