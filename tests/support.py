"""Test support: shared data paths, settings under a private key prefix, the API on real HTTP."""

from __future__ import annotations

import importlib.util
import os
import socket
import threading
import time
from pathlib import Path

from service.settings import Settings, load_settings

# The labelled dev set and the public corpus, where the settings say (TRIAGE_DEV_SET, TRIAGE_CORPUS).
DEV_SET = Path(os.environ.get("TRIAGE_DEV_SET") or Settings().dev_set)
CORPUS = Path(os.environ.get("TRIAGE_CORPUS") or Settings().corpus)
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
INGEST = "ingest-token-for-tests-0001"
OPERATOR = "operator-token-for-tests-01"


def load_script(name: str):
    """A file of scripts/ (not a package) as a module, to test its functions."""
    path = Path(__file__).resolve().parent.parent / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_settings(prefix: str, **overrides):
    env = {
        "REDIS_URL": REDIS_URL,
        "TRIAGE_REDIS_PREFIX": prefix,
        "TRIAGE_INGEST_TOKENS": INGEST,
        "TRIAGE_OPERATOR_TOKENS": OPERATOR,
    }
    return load_settings(env, **overrides)


class ApiServer:
    """The real app under uvicorn on a free loopback port, in a background thread."""

    def __init__(self, settings, redis_url: str | None = None, extra_routes=None) -> None:
        import uvicorn

        from service.api import create_app
        from service.l1 import PackHolder

        self.settings = settings
        self.holder = PackHolder(settings.rules_dir)
        self.port = free_port()
        self.app = create_app(settings, redis_url or settings.redis_url, self.holder, extra_route_handlers=extra_routes)
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=self.port, log_level="warning", access_log=False, lifespan="on"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ApiServer:
        self.thread.start()
        deadline = time.time() + 15
        while not self.server.started:
            if time.time() > deadline:
                raise RuntimeError("API did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
