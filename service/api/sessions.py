"""Signed, expiring operator sessions for the browser console, and their CSRF tokens.

The signing key is derived from the configured operator tokens, so sessions work across API
replicas and restarts, and rotating the tokens ends every session. Nothing is stored server-side.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Iterable

SESSION_COOKIE = "triage_session"
SESSION_TTL_S = 12 * 3600


def _b(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


class SessionSigner:
    def __init__(self, operator_tokens: Iterable[str]) -> None:
        material = "\n".join(sorted(operator_tokens)).encode()
        self._key = hashlib.sha256(b"triage-session\n" + material).digest() if material else b""

    def _sign(self, payload: str) -> str:
        # Cookies and form fields are client-controlled: compare bytes, since compare_digest
        # refuses non-ASCII str and a 500 on odd input is a defect.
        return hmac.new(self._key, _b(payload), hashlib.sha256).hexdigest()

    def issue(self, now: float | None = None) -> str:
        expires = int((now or time.time()) + SESSION_TTL_S)
        payload = f"v1.{expires}.{secrets.token_hex(8)}"
        return f"{payload}.{self._sign(payload)}"

    def roles(self, cookie: str | None, now: float | None = None) -> set[str]:
        if not cookie or not self._key:
            return set()
        payload, _, signature = cookie.rpartition(".")
        parts = payload.split(".")
        if len(parts) != 3 or parts[0] != "v1":
            return set()
        if not hmac.compare_digest(_b(self._sign(payload)), _b(signature)):
            return set()
        try:
            if int(parts[1]) < (now or time.time()):
                return set()
        except ValueError:
            return set()
        return {"operator"}

    def csrf_token(self, cookie: str) -> str:
        return self._sign("csrf:" + cookie)[:40]

    def check_csrf(self, cookie: str | None, token: str | None) -> bool:
        if not cookie or not token:
            return False
        return hmac.compare_digest(_b(self.csrf_token(cookie)), _b(token))
