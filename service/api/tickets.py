"""POST /v1/tickets (validate, L1, enqueue) and GET /v1/tickets/{id}."""

from __future__ import annotations

import hashlib
import secrets
import time
from urllib.parse import urlsplit

import msgspec
import structlog
from litestar import Request, Response, get, post
from litestar.datastructures import State
from litestar.openapi.datastructures import ResponseSpec

from .. import metrics
from ..errors import (
    CallbackNotAllowed,
    EmptyTicket,
    IdempotencyConflict,
    InvalidTicket,
    NotFound,
    QueueFull,
    TooLarge,
)
from ..l1 import evaluate as evaluate_rules
from ..results import TicketIn, TriageResult, ticket_text
from ..store import StoredTicket
from .auth import require
from .schemas import L1Summary, TicketAccepted, TicketPending, problem_responses

log = structlog.get_logger()
_encoder = msgspec.json.Encoder()


def new_ticket_id() -> str:
    """Time-ordered and unguessable: t_<ms since epoch, hex><48 random bits>."""
    return f"t_{int(time.time() * 1000):011x}{secrets.token_hex(6)}"


async def _reject_empty_request(request: Request) -> None:
    body = await request.body()
    if not body.strip():
        raise EmptyTicket("the request has no body; send a JSON ticket with a non-empty `body`", field="body")


def _check_callback(url: str | None, allowed: tuple[str, ...]) -> None:
    if url is None:
        return
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise InvalidTicket("callback_url is not a valid URL", field="callback_url") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidTicket("callback_url must be an absolute http(s) URL", field="callback_url")
    host = parts.hostname.lower()
    candidates = {host} if port is None else {host, f"{host}:{port}"}
    if not candidates & {h.lower() for h in allowed}:
        raise CallbackNotAllowed(f"callback host {host!r} is not in TRIAGE_CALLBACK_HOSTS", field="callback_url")


def _check_ticket(ticket: TicketIn, max_text_bytes: int) -> None:
    if not ticket.body.strip():
        raise EmptyTicket("`body` is empty", field="body")
    size = len(ticket.body.encode()) + len((ticket.subject or "").encode())
    if size > max_text_bytes:
        raise TooLarge(f"subject + body is {size} bytes; the limit is {max_text_bytes}", field="body")
    for name in ("subject", "language", "customer_id", "channel"):
        value = getattr(ticket, name)
        if value is not None and len(value) > 1024:
            raise InvalidTicket(f"`{name}` is longer than 1024 characters", field=name)
    if ticket.metadata and len(ticket.metadata) > 64:
        raise InvalidTicket("`metadata` has more than 64 entries", field="metadata")


def _idempotency_key(request: Request) -> str | None:
    key = request.headers.get("idempotency-key")
    if key is None:
        return None
    # Header bytes arrive Latin-1 decoded: outside ASCII the same key could be read two ways.
    if not 1 <= len(key) <= 200 or not (key.isascii() and key.isprintable()):
        raise InvalidTicket("Idempotency-Key must be 1-200 printable ASCII characters", field="Idempotency-Key")
    return key


@post(
    "/v1/tickets",
    guards=[require("ingest")],
    before_request=_reject_empty_request,
    status_code=202,
    summary="Submit a ticket for triage",
    tags=["tickets"],
    responses={
        200: ResponseSpec(
            data_container=TicketAccepted,
            description="The same Idempotency-Key and payload again: the ticket it created",
        ),
        **problem_responses(400, 401, 403, 404, 409, 413, 422, 429, 503),
    },
)
async def create_ticket(data: TicketIn, request: Request, state: State) -> Response[TicketAccepted]:
    settings = state.settings
    _check_ticket(data, settings.max_text_bytes)
    _check_callback(data.callback_url, settings.callback_hosts)
    idem_key = _idempotency_key(request)
    payload = _encoder.encode(data)
    payload_sha = hashlib.sha256(payload).hexdigest()

    started = time.perf_counter()
    l1 = evaluate_rules(state.rules.pack, ticket_text(data.subject, data.body))
    l1_seconds = time.perf_counter() - started
    metrics.l1_seconds.observe(l1_seconds)

    ticket_id = new_ticket_id()
    accepted_at = time.time()
    ticket = StoredTicket(
        id=ticket_id,
        status="queued",
        request=data,
        l1=l1,
        accepted_at=accepted_at,
        l1_ms=l1_seconds * 1000,
        callback=bool(data.callback_url),
    )
    try:
        outcome = await state.store.accept(ticket, payload_sha, idem_key)
    except QueueFull as full:
        raise QueueFull(
            f"{full.backlog} tickets are waiting (bound {settings.stream_max_len})",
            backlog=full.backlog,
            headers={"Retry-After": str(settings.retry_after_s)},
        ) from None
    location = f"/v1/tickets/{outcome.ticket_id}"
    if not outcome.created:
        if outcome.payload_sha != payload_sha:
            raise IdempotencyConflict("this Idempotency-Key was used with a different payload", field="Idempotency-Key")
        existing = await state.store.ticket(outcome.ticket_id)
        if existing is None or existing.l1 is None:
            raise NotFound("the ticket of this Idempotency-Key has expired")
        body = TicketAccepted(
            id=outcome.ticket_id,
            status=existing.status,  # type: ignore[arg-type]
            l1=L1Summary(level=existing.l1.level, rules=existing.l1.rules),
        )
        return Response(body, status_code=200, headers={"Location": location})
    structlog.contextvars.bind_contextvars(ticket_id=ticket_id)
    log.info("ticket_accepted", l1_level=l1.level, rules=[hit.id for hit in l1.rules], idempotent=idem_key is not None)
    return Response(
        TicketAccepted(id=ticket_id, status="queued", l1=L1Summary(level=l1.level, rules=l1.rules)),
        status_code=202,
        headers={"Location": location},
    )


@get(
    "/v1/tickets/{ticket_id:str}",
    guards=[require("ingest", "operator")],
    summary="A ticket's state",
    tags=["tickets"],
    responses=problem_responses(400, 401, 403, 404, 429, 503),
)
async def read_ticket(ticket_id: str, state: State) -> TriageResult | TicketPending:
    stored = await state.store.ticket(ticket_id)
    if stored is None or stored.status is None:
        raise NotFound(f"no ticket {ticket_id!r}", field="ticket_id")
    if stored.result is not None and stored.finished:
        return msgspec.structs.replace(stored.result, status=stored.status)  # type: ignore[arg-type]
    return TicketPending(
        id=ticket_id,
        status=stored.status,  # type: ignore[arg-type]
        l1=stored.l1,
        accepted_at=stored.accepted_at,
    )  # type: ignore[arg-type]
