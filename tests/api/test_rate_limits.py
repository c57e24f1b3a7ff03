"""Rate limits live in Redis: two API replicas share one bucket; buckets expire; tokens and
addresses are not stored in clear; the client address comes from the trusted header only."""

from __future__ import annotations

import time

import httpx

from service.console import route_handlers as console_routes
from service.ratelimit import client_address
from tests.console.support import sign_in
from tests.support import INGEST, ApiServer, make_settings


def test_two_replicas_share_one_ingest_bucket(prefix, redis_client):
    settings = make_settings(prefix, ingest_rate_per_s=0.01, ingest_burst=3)
    with ApiServer(settings) as one, ApiServer(settings) as two:
        codes = []
        for n in range(8):  # alternate replicas, as a load balancer does
            url = (one if n % 2 == 0 else two).url
            codes.append(
                httpx.post(
                    f"{url}/v1/tickets", json={"body": f"hello {n}"}, headers={"Authorization": f"Bearer {INGEST}"}
                ).status_code
            )
        limited = httpx.post(
            f"{one.url}/v1/tickets", json={"body": "again"}, headers={"Authorization": f"Bearer {INGEST}"}
        )
    assert codes.count(202) == 3 and codes.count(429) == 5, codes
    assert limited.status_code == 429 and int(limited.headers["Retry-After"]) >= 1
    assert limited.json()["type"] == "urn:triage:problem:rate-limited"
    buckets = list(redis_client.scan_iter(f"{prefix}:ratelimit:*"))
    assert len(buckets) == 1
    ttl = redis_client.ttl(buckets[0])
    assert 0 < ttl <= 3 / 0.01 + 1  # gone once it would be full again: memory stays bounded
    stored = b" ".join(buckets) + b" ".join(v for key in buckets for v in redis_client.hgetall(key).values())
    assert INGEST.encode() not in stored


def test_login_attempts_are_limited_per_address_across_replicas(prefix):
    from service.api.app import LOGIN_BURST, LOGIN_RATE_PER_S

    settings = make_settings(prefix, client_ip_header="X-Forwarded-For")
    with (
        ApiServer(settings, extra_routes=console_routes()) as one,
        ApiServer(settings, extra_routes=console_routes()) as two,
    ):
        statuses = []
        started = time.monotonic()
        while 429 not in statuses and len(statuses) < 4 * LOGIN_BURST:
            server = one if len(statuses) % 2 == 0 else two
            with httpx.Client(base_url=server.url, headers={"X-Forwarded-For": "198.51.100.7, 203.0.113.9"}) as browser:
                statuses.append(sign_in(browser, "not-a-token-0123456789").status_code)
        elapsed = time.monotonic() - started
        with httpx.Client(base_url=one.url, headers={"X-Forwarded-For": "203.0.113.10"}) as other:
            elsewhere = sign_in(other, "not-a-token-0123456789").status_code
    refused = statuses.index(429)
    # One bucket for both replicas: the burst, plus what refilled meanwhile (two buckets, one
    # per replica, would have let twice the burst through).
    assert LOGIN_BURST <= refused <= LOGIN_BURST + LOGIN_RATE_PER_S * elapsed + 1, statuses
    assert set(statuses[:refused]) == {401}
    assert elsewhere == 401  # another address has its own bucket


def test_client_address_believes_only_the_configured_header_and_its_last_entry():
    headers = {"x-forwarded-for": "10.0.0.1, 203.0.113.9", "x-real-ip": "192.0.2.1"}
    assert client_address("127.0.0.1", headers, "") == "127.0.0.1"  # no proxy configured
    assert client_address("127.0.0.1", headers, "X-Forwarded-For") == "203.0.113.9"
    assert client_address("127.0.0.1", headers, "X-Real-IP") == "192.0.2.1"
    assert client_address("127.0.0.1", {}, "X-Real-IP") == "127.0.0.1"
    assert client_address(None, {}, "") == "unknown"
