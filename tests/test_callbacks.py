"""Callbacks: signed POSTs to an allowed host, retried with backoff, dead-lettered when down,
never dropped because Redis hiccuped, and a sender that restarts itself."""

from __future__ import annotations

import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import msgspec
import pytest
import redis

from service import metrics, webhooks
from service.callbacks import CallbackSender, host_allowed
from service.results import TicketIn
from tests.support import make_settings

SECRET = "whsec_" + "c2VjcmV0LWtleS1mb3ItY2FsbGJhY2stdGVzdHMtMDE="  # 32-byte key
NEW_SECRET = webhooks.new_secret()
DOC = Path(__file__).resolve().parents[1] / "docs" / "callbacks.md"


def doc_verify():
    """The receiver example in docs/callbacks.md, run as written."""
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    namespace: dict = {}
    exec(compile(code, str(DOC), "exec"), namespace)  # noqa: S102 (our own documentation)
    return namespace["verify"]


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
        self.server.server_close()  # the listening socket, else closed by the GC with a warning


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


def _settings(prefix: str, **overrides):
    values = {
        "callback_hosts": ("127.0.0.1",),
        "callback_secret": (SECRET,),
        "callback_backoff_s": 0.05,
        "callback_attempts": 4,
        **overrides,
    }
    return make_settings(prefix, **values)


def test_signed_callback_is_retried_until_delivered(redis_client, prefix):
    helpdesk = Helpdesk(failures=2)
    body = _enqueue(redis_client, prefix, "t_cb1", helpdesk.url)
    sender = CallbackSender(_settings(prefix), redis_client, "test")
    _run_until(sender, lambda: len(helpdesk.calls) >= 3)
    helpdesk.close()
    assert len(helpdesk.calls) == 3
    delivered, headers = helpdesk.calls[-1]
    assert delivered == body
    headers = {k.lower(): v for k, v in headers.items()}
    assert headers["webhook-id"] == "t_cb1"
    assert abs(int(headers["webhook-timestamp"]) - time.time()) < 30
    assert doc_verify()([SECRET], headers, delivered)
    assert redis_client.xlen(f"{prefix}:callbacks:dead") == 0
    assert redis_client.xlen(f"{prefix}:callbacks") == 0


def test_signatures_follow_standard_webhooks_and_rotate(redis_client, prefix):
    """Checked by the docs' example and by the reference `standardwebhooks` library; both
    secrets of a rotation verify; a changed body, an old timestamp or another secret do not."""
    standardwebhooks = pytest.importorskip("standardwebhooks")
    helpdesk = Helpdesk(failures=0)
    _enqueue(redis_client, prefix, "t_rot", helpdesk.url)
    sender = CallbackSender(_settings(prefix, callback_secret=(SECRET, NEW_SECRET)), redis_client, "test")
    _run_until(sender, lambda: len(helpdesk.calls) >= 1)
    helpdesk.close()
    body, raw_headers = helpdesk.calls[0]
    headers = {k.lower(): v for k, v in raw_headers.items()}
    assert len(headers["webhook-signature"].split()) == 2
    verify = doc_verify()
    for secret in (SECRET, NEW_SECRET):
        assert verify([secret], headers, body)
        standardwebhooks.Webhook(secret).verify(body, headers)  # raises when it does not verify
    assert not verify([SECRET], headers, body + b" ")
    assert not verify([webhooks.new_secret()], headers, body)
    stale = {**headers, "webhook-timestamp": str(int(headers["webhook-timestamp"]) - 3600)}
    assert not verify([SECRET], stale, body)
    with pytest.raises(standardwebhooks.webhooks.WebhookVerificationError):
        standardwebhooks.Webhook(SECRET).verify(body, stale)
    # The signature covers id and timestamp: the same body under another id is refused.
    assert not verify([SECRET], {**headers, "webhook-id": "t_other"}, body)


def test_unreachable_callback_is_dead_lettered_with_a_reason(redis_client, prefix):
    settings = _settings(prefix, callback_backoff_s=0.02, callback_attempts=3, callback_timeout_s=0.5)
    _enqueue(redis_client, prefix, "t_cb2", "http://127.0.0.1:9/hook")  # discard port: refused
    sender = CallbackSender(settings, redis_client, "test")
    _run_until(sender, lambda: redis_client.xlen(f"{prefix}:callbacks:dead") > 0)
    dead = redis_client.xrange(f"{prefix}:callbacks:dead")
    assert [d[1][b"id"] for d in dead] == [b"t_cb2"]
    assert dead[0][1][b"outcome"] == b"failed"
    assert dead[0][1][b"reason"].startswith(b"3 attempts, last: ")
    assert redis_client.hget(f"{prefix}:ticket:t_cb2", "result")


class FlakyRedis(redis.Redis):
    """The real Redis, whose chosen commands fail the first `n` times as if Redis restarted."""

    def __init__(self, *args, fail: dict[str, int], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fail = dict(fail)

    def _trip(self, name: str) -> None:
        if self.fail.get(name, 0) > 0:
            self.fail[name] -= 1
            raise redis.ConnectionError(f"injected: {name}")

    def hmget(self, *args, **kwargs):
        self._trip("hmget")
        return super().hmget(*args, **kwargs)

    def xautoclaim(self, *args, **kwargs):
        self._trip("xautoclaim")
        return super().xautoclaim(*args, **kwargs)

    def pipeline(self, *args, **kwargs):
        pipe = super().pipeline(*args, **kwargs)
        execute, trip = pipe.execute, self._trip

        def failing_execute(*a, **k):
            trip("pipeline")
            return execute(*a, **k)

        pipe.execute = failing_execute
        return pipe


def _flaky(redis_client, **fail: int) -> FlakyRedis:
    return FlakyRedis(connection_pool=redis_client.connection_pool, fail=fail)


def test_a_redis_error_reading_the_result_is_retried_not_dead_lettered(redis_client, prefix):
    helpdesk = Helpdesk(failures=0)
    _enqueue(redis_client, prefix, "t_hm", helpdesk.url)
    sender = CallbackSender(_settings(prefix), _flaky(redis_client, hmget=2), "test")
    _run_until(sender, lambda: redis_client.xlen(f"{prefix}:callbacks") == 0)
    helpdesk.close()
    assert [call[0] for call in helpdesk.calls] == [redis_client.hget(f"{prefix}:ticket:t_hm", "result")]
    assert redis_client.xlen(f"{prefix}:callbacks:dead") == 0


def test_a_redis_error_recording_the_outcome_neither_kills_the_sender_nor_posts_twice(redis_client, prefix):
    helpdesk = Helpdesk(failures=0)
    _enqueue(redis_client, prefix, "t_pipe1", helpdesk.url)
    sender = CallbackSender(_settings(prefix), _flaky(redis_client, pipeline=2), "test")
    thread = threading.Thread(target=sender.run, daemon=True)
    thread.start()
    deadline = time.time() + 20
    while redis_client.xlen(f"{prefix}:callbacks") and time.time() < deadline:
        time.sleep(0.05)
    _enqueue(redis_client, prefix, "t_pipe2", helpdesk.url)  # the sender is still running
    while len(helpdesk.calls) < 2 and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    alive = thread.is_alive()
    sender.close()
    thread.join(timeout=5)
    helpdesk.close()
    assert alive
    assert sorted(h["X-Triage-Ticket"] for _, h in helpdesk.calls) == ["t_pipe1", "t_pipe2"]
    assert redis_client.xlen(f"{prefix}:callbacks:dead") == 0


def test_the_sender_loop_is_restarted_after_a_crash(redis_client, prefix, capsys):
    class Buggy(FlakyRedis):
        def xautoclaim(self, *args, **kwargs):
            if self.fail.get("bug", 0) > 0:
                self.fail["bug"] -= 1
                raise RuntimeError("injected bug")
            return super().xautoclaim(*args, **kwargs)

    helpdesk = Helpdesk(failures=0)
    _enqueue(redis_client, prefix, "t_crash", helpdesk.url)
    before = metrics.callback_sender_restarts_total._value.get()
    client = Buggy(connection_pool=redis_client.connection_pool, fail={"bug": 1})
    sender = CallbackSender(_settings(prefix), client, "test")
    _run_until(sender, lambda: len(helpdesk.calls) >= 1)
    helpdesk.close()
    assert metrics.callback_sender_restarts_total._value.get() == before + 1
    assert len(helpdesk.calls) == 1
    logged = capsys.readouterr()
    assert "callback_sender_crashed" in logged.out + logged.err


def test_host_allow_list_helper():
    assert host_allowed("https://hooks.example.com/x", ("hooks.example.com",))
    assert host_allowed("http://127.0.0.1:8080/x", ("127.0.0.1:8080",))
    assert not host_allowed("http://127.0.0.1:8081/x", ("127.0.0.1:8080",))
    assert not host_allowed("file:///etc/passwd", ("localhost",))
    assert not host_allowed("http://evil.example.com/x", ("example.com",))


@pytest.mark.parametrize("secret", ["plain-secret", "whsec_not*base64", "whsec_" + "QUJD"])
def test_malformed_secrets_are_refused(secret):
    with pytest.raises(webhooks.SecretError):
        webhooks.decode_secret(secret)
