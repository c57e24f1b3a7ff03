"""One exception hierarchy: every exception the service raises on purpose is a `TriageError`.

`ProblemError` and its subclasses are what the API answers with an RFC 9457 problem body; the
API maps them in one place (service/api/app.py), and any other exception there is a logged 500.
The rest are raised by start-up, the model, calibration and the offline jobs and caught by the
CLI, each keeping the builtin base its callers catch (ValueError for unusable input or data,
RuntimeError for a resource that failed). The console's own two, `LoginRequired` and
`CsrfRejected`, become a redirect to the sign-in page and a 403 page (service/console/routes.py).
"""

from __future__ import annotations


class TriageError(Exception):
    """Base of every exception the service raises on purpose."""


# --- what the API answers with a problem body ----------------------------------------------------


class ProblemError(TriageError):
    """Carries the HTTP status, a stable machine-readable type and the field at fault."""

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


class InvalidTicket(ProblemError):
    status, type, title = 400, "invalid-request", "The request is not valid"


class EmptyTicket(ProblemError):
    status, type, title = 422, "empty-ticket", "The ticket has no text to triage"


class TooLarge(ProblemError):
    status, type, title = 413, "too-large", "The request or its text is too large"


class IdempotencyConflict(ProblemError):
    status, type, title = 409, "idempotency-conflict", "Idempotency-Key reused with another payload"


class QueueFull(ProblemError):
    """The stream backlog is at its bound (raised by the store); nothing was accepted."""

    status, type, title = 429, "queue-full", "Too many tickets waiting; retry later"

    def __init__(self, detail: str, backlog: int, **kwargs) -> None:
        super().__init__(detail, **kwargs)
        self.backlog = backlog


class RateLimited(ProblemError):
    status, type, title = 429, "rate-limited", "Too many requests for this token; retry later"


class NotFound(ProblemError):
    status, type, title = 404, "not-found", "No such resource"


class Unauthorized(ProblemError):
    status, type, title = 401, "unauthorized", "A valid bearer token is required"


class Forbidden(ProblemError):
    status, type, title = 403, "forbidden", "This token's role may not do that"


class StoreUnavailable(ProblemError):
    status, type, title = 503, "store-unavailable", "Redis is unreachable; nothing was accepted"


class CallbackNotAllowed(InvalidTicket):
    type, title = "callback-not-allowed", "callback_url's host is not on the allow-list"


# --- the console's sign-in and forms ---------------------------------------------------------------


class LoginRequired(TriageError):
    """No valid session: the console answers with a 303 to the login page."""

    def __init__(self, next_path: str = "/ui") -> None:
        super().__init__(next_path)
        self.next_path = next_path


class CsrfRejected(TriageError):
    """A form without the CSRF token of this session (or the login nonce): 403."""


# --- settings and the data files the service reads -------------------------------------------------


class SettingsError(TriageError, ValueError):
    """A setting could not be parsed; the message names the environment variable."""


class SecretError(TriageError, ValueError):
    """A secret that is not `whsec_` + base64 of 24..64 bytes."""


class LabelledFileError(TriageError, ValueError):
    """A labelled file that cannot be used; the message names the file and line."""


class PackError(TriageError, ValueError):
    """A rule pack cannot be used; `problems` has one line per fault, each naming its place."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


class PromptError(TriageError, ValueError):
    """The prompt data is missing or malformed; the message names the file and the field."""


class RubricError(TriageError, ValueError):
    """The rubric folder is missing a file or a file does not validate; the message says where."""


class ArtifactError(TriageError, ValueError):
    """An artifact is missing, unreadable or inconsistent; the message names the file and why."""


# --- the model, Redis, the judge -------------------------------------------------------------------


class ModelError(TriageError, RuntimeError):
    """The model could not be provisioned or verified."""


class RunnerError(ModelError):
    """The model could not be loaded or a decode failed (a ModelError: the CLI maps it once)."""


class AliasError(TriageError, ValueError):
    """An answer alias is not exactly one token of the model's vocabulary."""


class DeadlineExceeded(TriageError, RuntimeError):
    """The per-ticket deadline passed (between decode calls or inside one, via abort)."""


class RedisUnavailable(TriageError, RuntimeError):
    """No Redis to talk to; the message is one line naming where it was looked for."""


class JudgeUnavailable(TriageError, RuntimeError):
    """The judge model failed or timed out on one ticket; the ticket stays unjudged."""


# --- calibration and the offline jobs --------------------------------------------------------------


class CalibrationMismatch(TriageError, ValueError):
    """The artifact cannot map an answer it covers (options, log-probs or hidden state differ)."""


class DegenerateFit(TriageError, ValueError):
    """The optimiser ran to the edge of its range or failed: the data cannot support this fit."""


class Refused(TriageError):
    """The labels cannot support a calibration; the message says which question and why."""


class RecalibrateError(TriageError):
    """Input the recalibrate job cannot use (a malformed labelled file, no model); the message
    says where."""


class ReplayError(TriageError):
    """The replay cannot run as asked (a calibrated or mismatched classifier)."""


class EvalError(TriageError):
    """The evaluation cannot grade the service as served; the message says why, in one line."""
