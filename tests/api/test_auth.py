"""Auth on every route, enumerated from the app itself: 401 without a token, 403 with the wrong role."""

from __future__ import annotations

import re

import pytest

from service.api import PUBLIC_PATHS
from tests.support import INGEST, OPERATOR


def _routes(app):
    for route in app.routes:
        for method in sorted(getattr(route, "methods", set()) - {"HEAD", "OPTIONS"}):
            yield method, route.path


def _concrete(path: str) -> str:
    return re.sub(r"\{(\w+):\w+\}", lambda m: "yellow" if m.group(1) == "queue" else "t_x", path)


def test_every_non_public_route_requires_a_token(api, anonymous):
    checked = 0
    for method, path in _routes(api.app):
        if path.startswith(PUBLIC_PATHS) or path.startswith("/ui/static"):
            continue
        if path in ("/ui/login",):
            continue  # the login form itself is public
        response = anonymous.request(method, _concrete(path), json={})
        if path.startswith("/ui"):
            assert response.status_code in (302, 303, 401), (method, path)
        else:
            assert response.status_code == 401, (method, path, response.text)
            assert response.headers.get("www-authenticate", "").startswith("Bearer")
        checked += 1
    assert checked >= 4


def test_public_routes_need_no_token(anonymous):
    assert anonymous.get("/healthz").status_code == 200
    assert anonymous.get("/metrics").status_code == 200
    assert anonymous.get("/schema/openapi.json").status_code == 200


def test_unknown_token_is_401_and_is_not_echoed(anonymous):
    response = anonymous.post(
        "/v1/tickets", json={"body": "hi"}, headers={"Authorization": "Bearer not-a-real-token-123456"}
    )
    assert response.status_code == 401
    assert "not-a-real-token" not in response.text


@pytest.mark.parametrize(
    ("token", "method", "path"),
    [
        (INGEST, "GET", "/v1/queues/yellow"),
        (INGEST, "POST", "/v1/tickets/t_x/decision"),
        (OPERATOR, "POST", "/v1/tickets"),
    ],
)
def test_wrong_role_is_403(anonymous, token, method, path):
    response = anonymous.request(method, path, json={"body": "x"}, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 403


def test_ingest_rate_limit(prefix):
    import httpx

    from tests.support import ApiServer, make_settings

    settings = make_settings(prefix, ingest_rate_per_s=0.5, ingest_burst=2)
    with (
        ApiServer(settings) as server,
        httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {INGEST}"}) as client,
    ):
        codes = [client.post("/v1/tickets", json={"body": "hello"}).status_code for _ in range(3)]
        assert codes[:2] == [202, 202]
        assert codes[2] == 429
