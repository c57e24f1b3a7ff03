"""Container health probe for both roles of the triage image (Docker HEALTHCHECK, k8s exec probe).

    python healthcheck.py [api|worker] [--max-age SECONDS] [--timeout SECONDS]

api:    GET http://127.0.0.1:$TRIAGE_PORT/healthz must answer 200.
worker: GET http://127.0.0.1:$TRIAGE_METRICS_PORT/metrics must carry a heartbeat
        (triage_worker_heartbeat_timestamp_seconds) and a main-loop stamp
        (triage_worker_loop_timestamp_seconds: the loop took a ticket or waited on the stream)
        both younger than --max-age, default twice TRIAGE_HEARTBEAT_TTL_S plus
        TRIAGE_L2_TIMEOUT_S (one ticket may hold the loop that long). The heartbeat thread
        alone would go on beating with the loop stuck. A worker still loading its model has
        neither yet: the HEALTHCHECK start period (and the k8s startupProbe) cover that.
Without a role the probe reads PID 1's command line (`triage serve|run|worker ...`); one-shot
commands (fetch-model, recalibrate, audit...) have nothing to probe and count as healthy.
Exit 0 healthy, 1 unhealthy; one line on stdout says why (Docker keeps it).
Standard library only: it runs in the slim image and in tests without the service installed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence

HEARTBEAT = "triage_worker_heartbeat_timestamp_seconds"
LOOP = "triage_worker_loop_timestamp_seconds"
ROLES = {"serve": "api", "run": "api", "worker": "worker"}


def role_from_cmdline(argv: Sequence[str]) -> str | None:
    """The role for a `triage <command>` command line, also behind an init (tini, docker-init)."""
    for index, arg in enumerate(argv):
        if os.path.basename(arg) == "triage" and index + 1 < len(argv):
            return ROLES.get(argv[index + 1])
    return None


def read_pid1_cmdline() -> list[str]:
    try:
        with open("/proc/1/cmdline", "rb") as handle:
            raw = handle.read()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def heartbeat_timestamp(exposition: str, metric: str = HEARTBEAT) -> float | None:
    """The newest value of a timestamp gauge in a Prometheus text exposition (None when it
    was never set)."""
    newest: float | None = None
    for line in exposition.splitlines():
        if not line.startswith(metric):
            continue
        name_and_labels, _, rest = line.partition(" ")
        if name_and_labels.split("{", 1)[0] != metric:
            continue
        try:
            value = float(rest.split()[0])
        except (IndexError, ValueError):
            continue
        if value > 0 and (newest is None or value > newest):
            newest = value
    return newest


def check_worker(exposition: str, now: float, max_age: float) -> tuple[bool, str]:
    stamp = heartbeat_timestamp(exposition)
    if stamp is None:
        return False, "worker: no heartbeat yet (model loading, or Redis unreachable since start)"
    age = now - stamp
    if age > max_age:
        return False, f"worker: last heartbeat {age:.0f}s ago (limit {max_age:.0f}s)"
    loop = heartbeat_timestamp(exposition, LOOP)
    if loop is None:
        return False, "worker: heartbeat, but the main loop never ran"
    loop_age = now - loop
    if loop_age > max_age:
        return False, (
            f"worker: heartbeat, but the main loop is stuck: last round {loop_age:.0f}s ago (limit {max_age:.0f}s)"
        )
    return True, f"worker: heartbeat {age:.0f}s ago, main loop {loop_age:.0f}s ago"


def _get(url: str, timeout: float) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (loopback)
            return response.status, response.read(4 << 20).decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        return error.code, ""


def probe(
    role: str, *, port: int, metrics_port: int, max_age: float, timeout: float, now: float | None = None
) -> tuple[bool, str]:
    try:
        if role == "api":
            status, _ = _get(f"http://127.0.0.1:{port}/healthz", timeout)
            return status == 200, f"api: /healthz answered {status}"
        status, body = _get(f"http://127.0.0.1:{metrics_port}/metrics", timeout)
        if status != 200:
            return False, f"worker: /metrics answered {status}"
        return check_worker(body, time.time() if now is None else now, max_age)
    except (OSError, urllib.error.URLError) as error:
        reason = getattr(error, "reason", error)
        return False, f"{role}: not answering ({reason})"


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("role", nargs="?", choices=("api", "worker"))
    parser.add_argument("--max-age", type=float, default=0.0, help="worker: oldest acceptable heartbeat in seconds")
    parser.add_argument("--timeout", type=float, default=3.0)
    args = parser.parse_args(argv)
    role = args.role or role_from_cmdline(read_pid1_cmdline())
    if role is None:
        # Docker reserves exit code 2; a job container is judged by its exit code instead.
        print("healthcheck: not a serve/run/worker container; nothing to probe")
        return 0
    max_age = args.max_age or (2.0 * _env_int("TRIAGE_HEARTBEAT_TTL_S", 30) + _env_int("TRIAGE_L2_TIMEOUT_S", 30))
    healthy, reason = probe(
        role,
        port=_env_int("TRIAGE_PORT", 8000),
        metrics_port=_env_int("TRIAGE_METRICS_PORT", 9108),
        max_age=max_age,
        timeout=args.timeout,
    )
    print(reason)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
