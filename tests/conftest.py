"""Shared fixtures: a real Redis under a private key prefix, settings, and the API on real HTTP."""

from __future__ import annotations

import uuid

import httpx
import pytest
import redis

from tests.support import INGEST, OPERATOR, REDIS_URL, ApiServer, make_settings


@pytest.fixture
def redis_client():
    client = redis.Redis.from_url(REDIS_URL)
    client.ping()
    yield client
    client.close()


@pytest.fixture
def prefix(redis_client):
    """A key prefix of this test's own; every key under it is deleted afterwards."""
    name = f"test-{uuid.uuid4().hex[:10]}"
    yield name
    keys = list(redis_client.scan_iter(f"{name}:*", count=1000))
    if keys:
        redis_client.delete(*keys)


@pytest.fixture
def settings(prefix):
    return make_settings(prefix)


@pytest.fixture
def api(settings):
    with ApiServer(settings) as server:
        yield server


def _client(api, token: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=api.url, headers=headers, timeout=10)


@pytest.fixture
def ingest(api):
    with _client(api, INGEST) as client:
        yield client


@pytest.fixture
def operator(api):
    with _client(api, OPERATOR) as client:
        yield client


@pytest.fixture
def anonymous(api):
    with _client(api, None) as client:
        yield client


def pytest_terminal_summary(terminalreporter):
    """Tests skipped for a missing system package, and which one: one line, just above pytest's
    closing counts (which stay the last line: CI reads them)."""
    from tests.system import summary

    reasons = []
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reasons.append(longrepr[2] if isinstance(longrepr, tuple) else str(longrepr))
    line = summary(reasons)
    if line:
        terminalreporter.write_line(line, yellow=True, bold=True)
