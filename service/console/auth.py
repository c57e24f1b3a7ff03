"""Console sign-in: the session cookie, the operator's name, CSRF checks and the login guard.

The session itself is the API's SessionSigner (app.state.sessions): a signed, expiring cookie that
only an operator token can obtain. The operator's name, recorded with every decision, travels in a
second cookie whose MAC binds it to that session, so it cannot be swapped under a live session.
"""

from __future__ import annotations

import base64
import binascii
import secrets
import unicodedata
from urllib.parse import quote

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.datastructures import Cookie
from litestar.handlers.base import BaseRouteHandler

from ..api.sessions import SESSION_COOKIE, SESSION_TTL_S, SessionSigner
from ..errors import CsrfRejected, LoginRequired

OPERATOR_COOKIE = "triage_operator"
LOGIN_COOKIE = "triage_login"  # pre-session nonce: the login form's own CSRF token is bound to it
COOKIE_PATH = "/ui"
NAME_MAX = 64


def is_secure(connection: ASGIConnection) -> bool:
    """Secure cookies when the browser talks https, directly or through a TLS-terminating proxy.

    Trusting X-Forwarded-Proto here can only ever *add* the Secure attribute, which a forged
    header would turn against its own sender only.
    """
    forwarded = connection.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return connection.url.scheme == "https" or forwarded == "https"


def make_cookie(connection: ASGIConnection, key: str, value: str, max_age: int, path: str = COOKIE_PATH) -> Cookie:
    return Cookie(
        key=key, value=value, max_age=max_age, path=path, httponly=True, samesite="strict", secure=is_secure(connection)
    )


def expired(connection: ASGIConnection, key: str, path: str = COOKIE_PATH) -> Cookie:
    return make_cookie(connection, key, "", 0, path)


def clean_name(raw: str) -> str | None:
    """An operator name fit for the decisions stream: 1..64 printable characters, trimmed."""
    name = " ".join(raw.split())
    if not name or len(name) > NAME_MAX:
        return None
    if any(unicodedata.category(ch).startswith("C") for ch in name):
        return None
    return name


def _name_mac(signer: SessionSigner, session: str, name: str) -> str:
    # csrf_token is the signer's keyed MAC over a string; the prefix keeps this use apart from
    # the form tokens, whose input is the bare session cookie.
    return signer.csrf_token(f"operator-name\n{session}\n{name}")


def session_cookies(connection: ASGIConnection, signer: SessionSigner, name: str) -> list[Cookie]:
    """A fresh session for `name`, and the login nonce dropped."""
    session = signer.issue()
    encoded = base64.urlsafe_b64encode(name.encode()).decode().rstrip("=")
    return [
        make_cookie(connection, SESSION_COOKIE, session, SESSION_TTL_S),
        make_cookie(connection, OPERATOR_COOKIE, f"{encoded}.{_name_mac(signer, session, name)}", SESSION_TTL_S),
        expired(connection, LOGIN_COOKIE, "/ui/login"),
    ]


def logout_cookies(connection: ASGIConnection) -> list[Cookie]:
    return [expired(connection, SESSION_COOKIE), expired(connection, OPERATOR_COOKIE)]


def ascii_or_none(value: str | None) -> str | None:
    """SessionSigner compares with hmac.compare_digest on str, which raises TypeError on
    non-ASCII input; cookies and form fields are the client's, so only ASCII gets that far."""
    return value if value is not None and value.isascii() else None


def operator_of(connection: ASGIConnection) -> str | None:
    """The signed-in operator's name, or None without a valid session and a matching name."""
    signer: SessionSigner = connection.app.state.sessions
    session = ascii_or_none(connection.cookies.get(SESSION_COOKIE))
    if "operator" not in signer.roles(session):
        return None
    encoded, _, mac = connection.cookies.get(OPERATOR_COOKIE, "").partition(".")
    try:
        name = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    assert session is not None  # roles() is empty without a cookie
    if not mac or not secrets.compare_digest(mac.encode(), _name_mac(signer, session, name).encode()):
        return None
    return name


def require_session(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    """Guard for every console route but login and static: no session → 303 to the login page."""
    if operator_of(connection) is None:
        path = connection.url.path
        if connection.scope.get("method", "GET") == "GET" and connection.url.query:
            path += "?" + connection.url.query
        raise LoginRequired(path if connection.scope.get("method", "GET") == "GET" else "/ui")


def csrf_token(request: Request) -> str:
    return request.app.state.sessions.csrf_token(request.cookies.get(SESSION_COOKIE, ""))


def check_csrf(request: Request, form_token: str | None, cookie: str = SESSION_COOKIE) -> None:
    """403 unless the form carries the token of this session (or, for `cookie`=LOGIN_COOKIE, of
    the login form's nonce)."""
    signer: SessionSigner = request.app.state.sessions
    if not signer.check_csrf(ascii_or_none(request.cookies.get(cookie)), ascii_or_none(form_token)):
        raise CsrfRejected("the form's CSRF token does not match this session")


def safe_next(raw: str | None) -> str:
    """Only a path inside the console: never an absolute or protocol-relative URL (open redirect)."""
    if not raw or "\\" in raw or not (raw == "/ui" or raw.startswith(("/ui/", "/ui?"))):
        return "/ui"
    if raw.startswith("/ui/login") or any(ord(ch) < 0x20 for ch in raw):
        return "/ui"
    return raw


def login_location(next_path: str) -> str:
    target = safe_next(next_path)
    return "/ui/login" if target == "/ui" else f"/ui/login?next={quote(target, safe='/')}"
