"""One exception hierarchy; the API maps it to RFC 9457 problem bodies in one place."""

from __future__ import annotations


class TriageError(Exception):
    """Base: carries the HTTP status, a stable machine-readable type and the field at fault."""

    status = 500
    type = "internal"
    title = "Internal error"

    def __init__(
        self,
        detail: str,
        field: str | None = None,
        headers: dict[str, str] | None = None,
        errors: list[dict[str, str]] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.field = field
        self.headers = headers or {}
        self.errors = errors or []


class InvalidTicket(TriageError):
    status, type, title = 400, "invalid-request", "The request is not valid"


class EmptyTicket(TriageError):
    status, type, title = 422, "empty-ticket", "The ticket has no text to triage"


class TooLarge(TriageError):
    status, type, title = 413, "too-large", "The request or its text is too large"


class IdempotencyConflict(TriageError):
    status, type, title = 409, "idempotency-conflict", "Idempotency-Key reused with another payload"


class QueueFull(TriageError):
    """The stream backlog is at its bound (raised by the store); nothing was accepted."""

    status, type, title = 429, "queue-full", "Too many tickets waiting; retry later"

    def __init__(self, detail: str, backlog: int, **kwargs) -> None:
        super().__init__(detail, **kwargs)
        self.backlog = backlog


class RateLimited(TriageError):
    status, type, title = 429, "rate-limited", "Too many requests for this token; retry later"


class NotFound(TriageError):
    status, type, title = 404, "not-found", "No such resource"


class Unauthorized(TriageError):
    status, type, title = 401, "unauthorized", "A valid bearer token is required"


class Forbidden(TriageError):
    status, type, title = 403, "forbidden", "This token's role may not do that"


class StoreUnavailable(TriageError):
    status, type, title = 503, "store-unavailable", "Redis is unreachable; nothing was accepted"


class CallbackNotAllowed(InvalidTicket):
    type, title = "callback-not-allowed", "callback_url's host is not on the allow-list"
