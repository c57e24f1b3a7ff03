"""Console sign-in, sessions and CSRF over real HTTP: who gets in, and what a forged form gets."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.console.support import csrf_of, finish, post_ticket, sign_in
from tests.support import INGEST, OPERATOR


def _set_cookies(response: httpx.Response) -> dict[str, str]:
    """Set-Cookie headers by cookie name (the raw header: attributes are what is under test)."""
    return {header.split("=", 1)[0]: header.lower() for header in response.headers.get_list("set-cookie")}


def test_login_page_is_public_and_binds_its_form_to_a_nonce(browser_client):
    response = browser_client.get("/ui/login")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    nonce = _set_cookies(response)["triage_login"]
    assert "httponly" in nonce and "samesite=strict" in nonce and "path=/ui/login" in nonce
    assert csrf_of(response.text)
    # every control has a label
    for control in re.findall(r'<input id="([^"]+)"', response.text):
        assert f'<label for="{control}"' in response.text


def test_operator_token_signs_in_with_strict_httponly_cookies(browser_client):
    response = sign_in(browser_client, OPERATOR, "ana")
    assert response.status_code == 303
    assert response.headers["location"] == "/ui"
    cookies = _set_cookies(response)
    for name in ("triage_session", "triage_operator"):
        assert "httponly" in cookies[name] and "samesite=strict" in cookies[name]
        assert "path=/ui;" in cookies[name] + ";"
        assert "secure" not in cookies[name]  # plain http: a Secure cookie would never come back
    assert browser_client.get("/ui").status_code == 303  # → a queue, not the login page
    assert browser_client.get("/ui").headers["location"].startswith("/ui/queues/")


def test_behind_https_the_cookies_are_secure(browser_client):
    form = browser_client.get("/ui/login")
    response = browser_client.post(
        "/ui/login",
        headers={"X-Forwarded-Proto": "https"},
        data={"csrf": csrf_of(form.text), "name": "ana", "token": OPERATOR},
    )
    assert response.status_code == 303
    assert "secure" in _set_cookies(response)["triage_session"]


@pytest.mark.parametrize(
    "token, status, message",
    [
        ("not-a-token-at-all-0000", 401, "Unknown token"),
        (INGEST, 403, "not an operator token"),
        ("", 401, "Unknown token"),
    ],
)
def test_wrong_and_ingest_tokens_are_refused(browser_client, token, status, message):
    response = sign_in(browser_client, token, "ana")
    assert response.status_code == status
    assert message in response.text
    assert "triage_session" not in _set_cookies(response)
    assert browser_client.get("/ui/queues/red").status_code == 303  # still signed out


def test_a_name_is_required(browser_client):
    response = sign_in(browser_client, OPERATOR, "   ")
    assert response.status_code == 400
    assert "triage_session" not in _set_cookies(response)


def test_bearer_tokens_do_not_open_the_console(api):
    for token in (OPERATOR, INGEST):
        response = httpx.get(f"{api.url}/ui/queues/red", headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 303
        assert response.headers["location"].startswith("/ui/login")


def test_every_console_route_but_login_and_static_redirects_when_signed_out(api, browser_client):
    checked = []
    for route in api.app.routes:
        if not route.path.startswith("/ui") or route.path.startswith(("/ui/login", "/ui/static")):
            continue
        path = re.sub(r"\{[^}]+\}", "t_anything", route.path)
        for method in sorted(route.methods - {"HEAD", "OPTIONS"}):
            response = browser_client.request(method, path)
            assert response.status_code == 303, (method, route.path, response.status_code)
            assert response.headers["location"].startswith("/ui/login"), (method, route.path)
            checked.append((method, route.path))
    # the list is the app's own, so a route added later is covered; make sure it was not empty
    assert ("GET", "/ui/queues/{queue:str}") in checked
    assert ("POST", "/ui/tickets/{ticket_id:str}/decision") in checked
    assert ("POST", "/ui/logout") in checked
    assert browser_client.get("/ui/static/console.css").status_code == 200


def test_the_login_redirect_keeps_where_you_were_going_but_only_inside_the_console(browser_client):
    response = browser_client.get("/ui/queues/yellow")
    assert response.headers["location"] == "/ui/login?next=/ui/queues/yellow"
    form = browser_client.get("/ui/login", params={"next": "/ui/queues/yellow"})
    assert 'name="next" value="/ui/queues/yellow"' in form.text
    for target, expected in (
        ("/ui/queues/yellow", "/ui/queues/yellow"),
        ("https://evil.example/", "/ui"),
        ("//evil.example/ui", "/ui"),
        ("/uix", "/ui"),
    ):
        browser_client.cookies.clear()
        form = browser_client.get("/ui/login")
        response = browser_client.post(
            "/ui/login", data={"csrf": csrf_of(form.text), "name": "ana", "token": OPERATOR, "next": target}
        )
        assert response.headers["location"] == expected, target


def test_forged_or_mismatched_session_cookies_are_signed_out(console, api):
    session = console.cookies.get("triage_session")
    name = console.cookies.get("triage_operator")
    forged = session[:-4] + ("0000" if not session.endswith("0000") else "1111")
    for cookies in (
        {"triage_session": forged, "triage_operator": name},
        {"triage_session": session, "triage_operator": "Ym9i.0000"},  # "bob", bad MAC
        {"triage_session": session},
    ):
        response = httpx.get(f"{api.url}/ui/queues/red", cookies=cookies)
        assert response.status_code == 303, cookies


def test_login_without_or_with_a_wrong_csrf_token_is_403(browser_client):
    browser_client.get("/ui/login")  # the nonce cookie is set, the token is not sent back
    for data in ({"name": "ana", "token": OPERATOR}, {"name": "ana", "token": OPERATOR, "csrf": "0" * 40}):
        response = browser_client.post("/ui/login", data=data)
        assert response.status_code == 403
        assert "triage_session" not in _set_cookies(response)


def test_decision_without_or_with_a_wrong_csrf_token_is_403_and_records_nothing(console, ingest, prefix, redis_client):
    ticket_id = post_ticket(ingest, "Refund", "Please refund my last invoice")
    finish(prefix, ticket_id, "red")
    page = console.get(f"/ui/tickets/{ticket_id}")
    assert page.status_code == 200
    other_session_token = console.cookies.get("triage_session")[::-1][:40]
    for csrf in (None, "", "0" * 40, other_session_token):
        data = {"action": "approve", "queue": "red"}
        if csrf is not None:
            data["csrf"] = csrf
        response = console.post(f"/ui/tickets/{ticket_id}/decision", data=data)
        assert response.status_code == 403, csrf
    assert redis_client.xlen(f"{prefix}:decisions") == 0
    assert redis_client.zscore(f"{prefix}:queue:red", ticket_id) is not None


def test_a_csrf_token_from_another_session_is_refused(api, console, ingest, prefix, redis_client):
    ticket_id = post_ticket(ingest, "Refund", "Please refund my last invoice")
    finish(prefix, ticket_id, "red")
    stolen = csrf_of(console.get(f"/ui/tickets/{ticket_id}").text)
    with httpx.Client(base_url=api.url, timeout=10) as other:
        assert sign_in(other, OPERATOR, "bob").status_code == 303
        response = other.post(
            f"/ui/tickets/{ticket_id}/decision", data={"action": "approve", "queue": "red", "csrf": stolen}
        )
        assert response.status_code == 403
    assert redis_client.xlen(f"{prefix}:decisions") == 0


def test_logout_needs_the_csrf_token_and_ends_the_session(console):
    page = console.get("/ui/queues/red")
    assert console.post("/ui/logout", data={"csrf": "nope"}).status_code == 403
    assert console.get("/ui/queues/red").status_code == 200
    response = console.post("/ui/logout", data={"csrf": csrf_of(page.text)})
    assert response.status_code == 303 and response.headers["location"] == "/ui/login"
    cleared = _set_cookies(response)
    assert "max-age=0" in cleared["triage_session"] and "max-age=0" in cleared["triage_operator"]
    assert console.get("/ui/queues/red").status_code == 303


def test_console_pages_are_not_cached_framed_or_scriptable_inline(console):
    response = console.get("/ui/queues/red")
    assert response.headers["cache-control"] == "no-store"
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    assert "script-src 'self'" in response.headers["content-security-policy"]
    assert "<script>" not in response.text and "style=" not in response.text


def test_non_ascii_cookies_and_form_tokens_are_refused_not_crashed(api, console, ingest, prefix):
    """hmac.compare_digest raises on non-ASCII str: such input must be a plain refusal."""
    ticket_id = post_ticket(ingest, "Refund", "Please refund my last invoice")
    finish(prefix, ticket_id, "red")
    response = console.post(f"/ui/tickets/{ticket_id}/decision", data={"action": "approve", "csrf": "é" * 40})
    assert response.status_code == 403
    session = console.cookies.get("triage_session")
    raw = f"triage_session={session[:-2]}\u00e9\u00e9".encode("latin-1")
    response = httpx.get(f"{api.url}/ui/queues/red", headers={"Cookie": raw})
    assert response.status_code == 303
    with httpx.Client(base_url=api.url, timeout=10) as fresh:
        assert sign_in(fresh, "jeton-opérateur-invalide", "ana").status_code == 401
        form = fresh.get("/ui/login")
        response = fresh.post("/ui/login", data={"csrf": "ü" * 40, "name": "ana", "token": OPERATOR})
        assert response.status_code == 403
        assert form.status_code == 200
