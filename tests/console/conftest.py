"""The API with the console's routes, on real HTTP, with the console tests' own small rule pack."""

from __future__ import annotations

import httpx
import pytest

from service.console import route_handlers
from tests.console.support import RULES, sign_in
from tests.support import OPERATOR, ApiServer, make_settings


@pytest.fixture
def settings(prefix):
    return make_settings(prefix, rules_dir=str(RULES))


@pytest.fixture
def api(settings):
    with ApiServer(settings, extra_routes=route_handlers()) as server:
        yield server


@pytest.fixture
def browser_client(api):
    """A cookie-keeping client that has not signed in."""
    with httpx.Client(base_url=api.url, timeout=10, follow_redirects=False) as client:
        yield client


@pytest.fixture
def console(browser_client):
    """A cookie-keeping client signed in to the console as operator "ana"."""
    response = sign_in(browser_client, OPERATOR, "ana")
    assert response.status_code == 303, response.text
    return browser_client
