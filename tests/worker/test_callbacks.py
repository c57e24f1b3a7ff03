"""Callbacks: signed POSTs to an allowed host, retried with backoff, dead-lettered when down."""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import msgspec

from service.callbacks import CallbackSender, host_allowed, sign
from service.results import TicketIn
from tests.support import make_settings


class Helpdesk:
    """A real HTTP endpoint on loopback that fails its first `failures` calls."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls: list[tuple[bytes, dict[str, str]]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.calls.append((body, dict(self.headers)))
                self.send_response(503 if len(outer.calls) <= outer.failures else 204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self) -> None:
        self.server.shutdown()


def _enqueue(client, prefix: str, ticket_id: str, url: str) -> bytes:
    result = b'{"id": "%s", "final_level": "yellow"}' % ticket_id.encode()
    request = msgspec.json.encode(TicketIn(body="hello", callback_url=url))
    client.hset(f"{prefix}:ticket:{ticket_id}", mapping={"request": request, "result": result})
    client.xadd(f"{prefix}:callbacks", {"id": ticket_id})
    return result


def _run_until(sender: CallbackSender, condition, timeout: float = 20.0) -> None:
    thread = threading.Thread(target=sender.run, daemon=True)
    thread.start()
    deadline = time.time() + timeout
    while not condition() and time.time() < deadline:
        time.sleep(0.05)
    sender.close()
    thread.join(timeout=5)


def test_signed_callback_is_retried_until_delivered(redis_client, prefix):
    helpdesk = Helpdesk(failures=2)
    settings = make_settings(prefix, callback_hosts=("127.0.0.1",), callback_secret="s3cret",
                             callback_backoff_s=0.05, callback_attempts=4)
    body = _enqueue(redis_client, prefix, "t_cb1", helpdesk.url)
    sender = CallbackSender(settings, redis_client, "test")
    _run_until(sender, lambda: len(helpdesk.calls) >= 3)
    helpdesk.close()
    assert len(helpdesk.calls) == 3
    delivered, headers = helpdesk.calls[-1]
    assert delivered == body
    expected = "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert headers["X-Triage-Signature"] == expected
    assert redis_client.xlen(f"{prefix}:callbacks:dead") == 0
    assert redis_client.xlen(f"{prefix}:callbacks") == 0


def test_unreachable_callback_is_dead_lettered_and_result_kept(redis_client, prefix):
    settings = make_settings(prefix, callback_hosts=("127.0.0.1",), callback_backoff_s=0.02,
                             callback_attempts=3, callback_timeout_s=0.5)
    _enqueue(redis_client, prefix, "t_cb2", "http://127.0.0.1:9/hook")  # discard port: refused
    sender = CallbackSender(settings, redis_client, "test")
    _run_until(sender, lambda: redis_client.xlen(f"{prefix}:callbacks:dead") > 0)
    dead = redis_client.xrange(f"{prefix}:callbacks:dead")
    assert [d[1][b"id"] for d in dead] == [b"t_cb2"]
    assert redis_client.hget(f"{prefix}:ticket:t_cb2", "result")


def test_host_allow_list_and_signature_helpers():
    assert host_allowed("https://hooks.example.com/x", ("hooks.example.com",))
    assert host_allowed("http://127.0.0.1:8080/x", ("127.0.0.1:8080",))
    assert not host_allowed("http://127.0.0.1:8081/x", ("127.0.0.1:8080",))
    assert not host_allowed("file:///etc/passwd", ("localhost",))
    assert not host_allowed("http://evil.example.com/x", ("example.com",))
    assert sign("k", b"body") == "sha256=" + hmac.new(b"k", b"body", hashlib.sha256).hexdigest()
