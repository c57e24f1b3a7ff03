"""deploy/healthcheck.py against real HTTP servers on loopback and the service's real exposition."""

from __future__ import annotations

import importlib.util
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from prometheus_client import generate_latest

from service import metrics
from tests.deploy import support as h

spec = importlib.util.spec_from_file_location("healthcheck", h.DEPLOY / "healthcheck.py")
hc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hc)


@pytest.mark.parametrize(
    ("argv", "role"),
    [
        (["/usr/local/bin/triage", "serve"], "api"),
        (["/usr/local/bin/python", "/usr/local/bin/triage", "worker", "--burst"], "worker"),
        (["/sbin/docker-init", "--", "triage", "run"], "api"),
        (["triage", "recalibrate"], None),
        (["python", "-m", "http.server"], None),
        ([], None),
    ],
)
def test_role_from_pid1(argv, role):
    assert hc.role_from_cmdline(argv) == role


def test_heartbeat_is_read_from_the_real_worker_exposition():
    before = metrics.worker_heartbeat_timestamp._value.get()
    try:
        metrics.worker_heartbeat_timestamp.set(1_700_000_123.5)
        text = generate_latest(metrics.REGISTRY).decode()
    finally:
        metrics.worker_heartbeat_timestamp.set(before)
    assert hc.heartbeat_timestamp(text) == 1_700_000_123.5


@pytest.mark.parametrize(
    ("text", "stamp"),
    [
        ("triage_worker_heartbeat_timestamp_seconds 0.0\n", None),  # never beat
        ("# HELP triage_worker_heartbeat_timestamp_seconds x\n", None),
        ("triage_worker_heartbeat_timestamp_seconds_other 5.0\n", None),
        (
            'triage_worker_heartbeat_timestamp_seconds{pod="a"} 10.0\n'
            'triage_worker_heartbeat_timestamp_seconds{pod="b"} 12.0\n',
            12.0,
        ),
    ],
)
def test_heartbeat_parsing(text, stamp):
    assert hc.heartbeat_timestamp(text) == stamp


class _Server:
    """A tiny HTTP server on 127.0.0.1 answering fixed (status, body) per path."""

    def __init__(self, routes: dict[str, tuple[int, str]]):
        routes_ = routes

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                status, body = routes_.get(self.path, (404, ""))
                self.send_response(status)
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def harness_free_port() -> int:
    with _Server({}) as server:
        return server.port


def _probe(role, port, **kw):
    return hc.probe(role, port=port, metrics_port=port, max_age=kw.pop("max_age", 60.0), timeout=2.0, **kw)


def test_api_healthy_and_unhealthy():
    with _Server({"/healthz": (200, '{"status":"ok"}')}) as server:
        assert _probe("api", server.port)[0] is True
    with _Server({"/healthz": (503, "")}) as server:
        healthy, reason = _probe("api", server.port)
        assert not healthy and "503" in reason


def test_nothing_listening_is_unhealthy():
    with _Server({}) as server:
        port = server.port
    healthy, reason = _probe("api", port)
    assert not healthy and "not answering" in reason


def test_worker_heartbeat_age_decides():
    now = time.time()
    body = f"triage_worker_heartbeat_timestamp_seconds {now - 10}\ntriage_worker_loop_timestamp_seconds {now - 5}\n"
    with _Server({"/metrics": (200, body)}) as server:
        assert _probe("worker", server.port, now=now)[0] is True
        healthy, reason = _probe("worker", server.port, now=now + 120)
        assert not healthy and "limit 60s" in reason
    with _Server({"/metrics": (200, "triage_worker_heartbeat_timestamp_seconds 0.0\n")}) as server:
        healthy, reason = _probe("worker", server.port)
        assert not healthy and "no heartbeat" in reason


def test_a_stuck_main_loop_is_unhealthy_though_the_heartbeat_is_fresh():
    now = time.time()
    stuck = f"triage_worker_heartbeat_timestamp_seconds {now - 2}\ntriage_worker_loop_timestamp_seconds {now - 400}\n"
    with _Server({"/metrics": (200, stuck)}) as server:
        healthy, reason = _probe("worker", server.port, now=now, max_age=300.0)
        assert not healthy and "main loop is stuck" in reason
    never = f"triage_worker_heartbeat_timestamp_seconds {now - 2}\n"
    with _Server({"/metrics": (200, never)}) as server:
        healthy, reason = _probe("worker", server.port, now=now)
        assert not healthy and "never ran" in reason


def test_main_exit_codes(monkeypatch, capsys):
    with _Server({"/healthz": (200, "ok")}) as server:
        monkeypatch.setenv("TRIAGE_PORT", str(server.port))
        assert hc.main(["api"]) == 0
    assert "200" in capsys.readouterr().out
    monkeypatch.setattr(hc, "read_pid1_cmdline", lambda: ["triage", "recalibrate"])
    assert hc.main([]) == 0  # one-shot jobs: nothing to probe
    assert "nothing to probe" in capsys.readouterr().out
    monkeypatch.setattr(hc, "read_pid1_cmdline", lambda: ["triage", "worker"])
    monkeypatch.setenv("TRIAGE_METRICS_PORT", str(harness_free_port()))
    assert hc.main([]) == 1  # a worker that does not answer is unhealthy
