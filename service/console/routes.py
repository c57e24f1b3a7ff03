"""The console's routes under /ui: login/logout, queue tabs, the ticket view and its decision form.

Decisions go through service.operators.apply_decision and queue pages through the API's
queue_listing, so a decision made here is validated, recorded, counted and logged exactly like POST
/v1/tickets/{id}/decision, lands in the decisions stream and takes the ticket out of its queues.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

import structlog
from litestar import Request, Response, Router, get, post
from litestar.datastructures import CacheControlHeader, State
from litestar.response import Redirect
from litestar.static_files import create_static_files_router

from ..api.operators import queue_listing
from ..errors import ProblemError, RateLimited
from ..operators import apply_decision
from ..policy import vocabulary
from ..ratelimit import client_address
from ..results import LEVELS, RED_FLAGS
from ..store import AsyncStore, StoredTicket
from . import auth
from .render import STATIC, page
from .views import decision_from_form, downgraded, escalated, status_strip
from .views import ticket_view as build_ticket_view

log = structlog.get_logger()
PAGE_SIZE = 50
# Tab order, and where the console opens: red (nothing leaves without approval) first.
QUEUES = ("red", "yellow", "audit")
# The form's default button (see ticket.html): submitted by Enter in a field, it records nothing.
STAY = "stay"
# Failed sign-ins are cheap to try; tokens are long, but there is no reason to allow a stream.


# --- shared page parts -----------------------------------------------------------------------------


async def _chrome(request: Request, store: AsyncStore, active: str | None) -> dict[str, Any]:
    """What every signed-in page shows: the operator, the CSRF token, tabs and the status strip."""
    gauges = await store.gauges()
    workers = await store.workers()
    return {
        "operator": auth.operator_of(request),
        "csrf": auth.csrf_token(request),
        "status": status_strip(gauges, workers, time.time()),
        "queues": QUEUES,
        "active": active,
    }


def _fields(form: Any) -> dict[str, str]:
    return {key: value for key, value in form.items() if isinstance(value, str)}


async def _flash(store: AsyncStore, decided: str | None) -> dict[str, Any] | None:
    """The decision just recorded, read back from the ticket (never echoed from the URL)."""
    if not decided:
        return None
    stored = await store.ticket(decided)
    if stored is None or stored.decision is None or stored.request is None:
        return None
    view = build_ticket_view(stored, time.time())
    return {"id": decided, "subject": view.subject, "decision": view.decision}


def _error(status_code: int, title: str, message: str) -> Response[str]:
    return page(
        "error.html",
        status_code,
        title=title,
        message=message,
        operator=None,
        status=None,
        queues=QUEUES,
        active=None,
        csrf=None,
    )


def _not_found(what: str) -> Response[str]:
    return _error(404, "Not found", what)


# --- sign-in ---------------------------------------------------------------------------------------


def _login_page(
    request: Request,
    nonce: str,
    status_code: int = 200,
    error: str | None = None,
    name: str = "",
    next_path: str = "/ui",
) -> Response[str]:
    cookie = auth.make_cookie(request, auth.LOGIN_COOKIE, nonce, 3600, "/ui/login")
    return page(
        "login.html",
        status_code,
        cookies=[cookie],
        title="Sign in",
        error=error,
        name=name,
        next_path=auth.safe_next(next_path),
        csrf=request.app.state.sessions.csrf_token(nonce),
        operator=None,
        status=None,
        queues=QUEUES,
        active=None,
    )


@get("/", name="console_login_form")
async def login_form(request: Request, next: str | None = None) -> Response[Any]:
    if auth.operator_of(request) is not None:
        return Redirect(auth.safe_next(next), status_code=303)
    nonce = auth.ascii_or_none(request.cookies.get(auth.LOGIN_COOKIE)) or secrets.token_urlsafe(18)
    return _login_page(request, nonce, next_path=next or "/ui")


@post("/", name="console_login", status_code=303)
async def login(request: Request, state: State) -> Response[Any]:
    form = _fields(await request.form())
    auth.check_csrf(request, form.get("csrf"), auth.LOGIN_COOKIE)  # the form is stale or cookies are off
    nonce = request.cookies[auth.LOGIN_COOKIE]
    name_field, next_path = form.get("name", ""), form.get("next", "/ui")
    address = client_address(
        request.client.host if request.client else None, request.headers, state.settings.client_ip_header
    )
    try:
        await state.login_limiter.take(address)
    except RateLimited:
        return _login_page(request, nonce, 429, "Too many sign-in attempts; wait a minute.", name_field, next_path)
    token = auth.ascii_or_none(form.get("token", "").strip())  # tokens are ASCII; see ascii_or_none
    roles = state.tokens.roles(token) if token else set()
    if "operator" not in roles:
        if roles:  # a real token, but an ingest one: it must never reach the console
            log.warning("console_login_refused", reason="not an operator token")
            return _login_page(
                request,
                nonce,
                403,
                "This token cannot open the console: it is not an operator token.",
                name_field,
                next_path,
            )
        log.warning("console_login_refused", reason="unknown token")
        return _login_page(request, nonce, 401, "Unknown token.", name_field, next_path)
    name = auth.clean_name(name_field)
    if name is None:
        return _login_page(
            request,
            nonce,
            400,
            f"Give your name (1 to {auth.NAME_MAX} characters): it is recorded with each decision.",
            name_field,
            next_path,
        )
    log.info("console_login", operator=name)
    return Redirect(
        auth.safe_next(next_path), status_code=303, cookies=auth.session_cookies(request, state.sessions, name)
    )


@post("/logout", name="console_logout", status_code=303)
async def logout(request: Request) -> Response[Any]:
    auth.check_csrf(request, _fields(await request.form()).get("csrf"))
    return Redirect("/ui/login", status_code=303, cookies=auth.logout_cookies(request))


# --- queues ----------------------------------------------------------------------------------------


@get("/", name="console_home")
async def home(state: State) -> Redirect:
    """Open where the work is: the first non-empty queue, red before yellow before audit."""
    depths = (await state.store.gauges())["queues"]
    target = next((q for q in QUEUES if depths.get(q)), QUEUES[0])
    return Redirect(f"/ui/queues/{target}", status_code=303)


@get("/queues/{queue:str}", name="console_queue")
async def queue_page(
    request: Request, state: State, queue: str, cursor: str | None = None, decided: str | None = None
) -> Response[str]:
    if queue not in QUEUES:
        return _not_found(f"There is no {queue!r} queue; the queues are {', '.join(QUEUES)}.")
    try:
        listing = await queue_listing(state.store, queue, PAGE_SIZE, cursor)
    except ProblemError as error:  # a mangled cursor: the API's own 400
        return _error(error.status, error.title, error.detail)
    return page(
        "queue.html",
        title=f"{queue.capitalize()} queue",
        listing=listing,
        cursor=cursor,
        now=time.time(),
        flash=await _flash(state.store, decided),
        **await _chrome(request, state.store, queue),
    )


# --- one ticket ------------------------------------------------------------------------------------


async def _queue_context(store: AsyncStore, ticket_id: str, requested: str | None, level: str) -> str:
    """The queue the operator is working through: as asked, else the one holding the ticket."""
    if requested in QUEUES:
        return requested  # type: ignore[return-value]
    held = await store.queues_holding(ticket_id)
    holding = [q for q in QUEUES if q in held]  # in the console's tab order
    if holding:
        return holding[0]
    return level if level in QUEUES else "audit"


def _form_defaults(view: Any) -> dict[str, Any]:
    # A guessed category is not offered as the label: one keystroke would confirm it.
    category = "" if "category" in view.guesses else view.category or ""
    return {
        "level": view.level,
        "category": category,
        "flags": {flag: flag in view.suggested_flags for flag in RED_FLAGS},
        "false_green": False,
        "note": "",
    }


def _form_from_fields(fields: dict[str, str]) -> dict[str, Any]:
    return {
        "level": fields.get("level", ""),
        "category": fields.get("category", ""),
        "flags": {flag: fields.get(f"flag_{flag}") == "on" for flag in RED_FLAGS},
        "false_green": fields.get("false_green") == "on",
        "note": fields.get("note", ""),
    }


async def _ticket_page(
    request: Request,
    state: State,
    ticket_id: str,
    stored: StoredTicket,
    queue: str | None,
    status_code: int = 200,
    error: ProblemError | None = None,
    fields: dict[str, str] | None = None,
    decided: str | None = None,
) -> Response[str]:
    view = build_ticket_view(stored, time.time())
    context = await _queue_context(state.store, ticket_id, queue, view.level)
    return page(
        "ticket.html",
        status_code,
        title=view.subject or ticket_id,
        ticket=view,
        queue=context,
        position=await state.store.position(context, ticket_id),
        form=_form_from_fields(fields) if fields else _form_defaults(view),
        error=error,
        levels=LEVELS,
        categories=vocabulary(state.settings.prompts_dir).categories,
        red_flags=RED_FLAGS,
        escalate_to=escalated(view.level),
        downgrade_to=downgraded(view.level),
        flash=await _flash(state.store, decided),
        **await _chrome(request, state.store, context),
    )


@get("/tickets/{ticket_id:str}", name="console_ticket")
async def ticket_page(
    request: Request, state: State, ticket_id: str, queue: str | None = None, decided: str | None = None
) -> Response[str]:
    stored = await state.store.ticket(ticket_id)
    if stored is None or stored.request is None:
        return _not_found(f"No ticket {ticket_id!r}: it may have expired.")
    return await _ticket_page(request, state, ticket_id, stored, queue, decided=decided)


@post("/tickets/{ticket_id:str}/decision", name="console_decide", status_code=303)
async def decide(request: Request, state: State, ticket_id: str) -> Response[Any]:
    fields = _fields(await request.form())
    auth.check_csrf(request, fields.get("csrf"))
    stored = await state.store.ticket(ticket_id)
    if stored is None or stored.request is None:
        return _not_found(f"No ticket {ticket_id!r}: it may have expired.")
    view = build_ticket_view(stored, time.time())
    queue = await _queue_context(state.store, ticket_id, fields.get("queue"), view.level)
    operator = auth.operator_of(request)
    assert operator is not None  # the router's guard let us in
    if fields.get("action") == STAY:  # Enter pressed in a field: no decision, the form as filled
        return await _ticket_page(request, state, ticket_id, stored, queue, fields=fields)
    try:
        data = decision_from_form(fields, view.level, operator)
        rank = await state.store.queue_rank(queue, ticket_id)
        # The API's handler itself: same checks, Decision, store.decide, metrics and log line.
        await apply_decision(state.store, ticket_id, data, vocabulary(state.settings.prompts_dir))
    except ProblemError as error:
        return await _ticket_page(request, state, ticket_id, stored, queue, error.status, error, fields)
    # The next ticket is the one that followed this one; past the end, the oldest left (one
    # the operator skipped); none left, the queue page.
    next_id = await state.store.queue_member(queue, rank) if rank is not None else None
    next_id = next_id or await state.store.queue_member(queue, 0)
    if next_id is None:
        return Redirect(f"/ui/queues/{queue}?decided={ticket_id}", status_code=303)
    return Redirect(f"/ui/tickets/{next_id}?queue={queue}&decided={ticket_id}", status_code=303)


# --- wiring ----------------------------------------------------------------------------------------


def _to_login(_: Request, exc: auth.LoginRequired) -> Response[Any]:
    return Redirect(auth.login_location(exc.next_path), status_code=303)


def _csrf_rejected(_: Request, exc: auth.CsrfRejected) -> Response[str]:
    return _error(
        403,
        "Form expired",
        "This form is no longer valid for your session (it was "
        "opened before you signed in again, or it did not come from the console). "
        "Reload the page and try again.",
    )


EXCEPTIONS = {auth.LoginRequired: _to_login, auth.CsrfRejected: _csrf_rejected}


def route_handlers() -> list:
    """Fresh routers for one app: the guarded console, the sign-in pages and the static assets."""
    console = Router(
        path="/ui",
        route_handlers=[home, queue_page, ticket_page, decide, logout],
        guards=[auth.require_session],
        exception_handlers=EXCEPTIONS,
        include_in_schema=False,
    )
    sign_in = Router(
        path="/ui/login", route_handlers=[login_form, login], exception_handlers=EXCEPTIONS, include_in_schema=False
    )
    static = create_static_files_router(
        path="/ui/static",
        directories=[STATIC],
        name="console_static",
        cache_control=CacheControlHeader(max_age=86400),  # URLs carry ?v=<content hash>
        include_in_schema=False,
    )
    return [console, sign_in, static]
