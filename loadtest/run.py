"""Headless load test: start Redis, the API and workers on loopback, drive them with Locust, write a report.

    .venv/bin/python loadtest/run.py                       # 50 tickets/s for 60 s, 1 worker
    .venv/bin/python loadtest/run.py --rate 20 --duration 120 --workers 2 --threads 1

It stops by itself. Steps:
1. start a private Redis (append-only, own port), `triage serve` and N `triage worker`, and wait
   until /readyz counts every worker (model loaded);
2. run loadtest/locustfile.py headless at --rate for --duration: helpdesk users POST corpus
   tickets, two operators poll the red/yellow queues and post decisions. Meanwhile, sample the
   stream backlog, pending entries, queue depths and finished results every 2 s;
3. let the workers drain for at most --drain seconds, then locate every accepted ticket:
   finished, or still in the stream. Anything else is lost;
4. back-pressure: a second API with TRIAGE_STREAM_MAX=--bound and no worker must answer 429
   with Retry-After once the bound is reached;
5. write report.json and report.md (accept p50/p95/p99, error rate, processed per minute,
   end-to-end latency, queue growth, lost tickets, L2 capacity per worker, targets met) into
   --out (default var/loadtest/<timestamp>/).

Locust comes from the `loadtest` extra (locked in requirements/dev.txt, installed by
`make setup`); the serving images never carry it. Loopback only.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import harness  # noqa: E402
import plots  # noqa: E402

from service.l2.classifier import DEFAULT_MODE  # noqa: E402

TARGETS = {"accept_p99_ms": 50.0, "server_errors": 0, "lost": 0}


def ensure_locust() -> Path:
    """The locust script beside this interpreter (the `loadtest` extra)."""
    locust = Path(sys.executable).parent / "locust"
    if not locust.exists():
        raise SystemExit(
            f"loadtest: {locust} is missing: install the `loadtest` extra "
            "(`make setup`, or pip install -e '.[loadtest]')"
        )
    return locust


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def quantiles(values: list[float]) -> dict[str, float | None]:
    return {
        "p50": _ms(harness.percentile(values, 50)),
        "p95": _ms(harness.percentile(values, 95)),
        "p99": _ms(harness.percentile(values, 99)),
        "max": _ms(max(values) if values else None),
        "n": len(values),
    }


class Sampler(threading.Thread):
    """Backlog, pending, queue depths and finished results every `interval` seconds."""

    def __init__(self, stack: harness.Stack, interval: float = 2.0) -> None:
        super().__init__(daemon=True, name="sampler")
        self.stack, self.interval = stack, interval
        self.samples: list[dict[str, Any]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        keys, client = self.stack.keys, self.stack.client
        while not self.halt.is_set():
            try:
                pipe = client.pipeline(transaction=False)
                pipe.xlen(keys.stream)
                pipe.xlen(keys.results)
                pipe.zcard(keys.queue("yellow"))
                pipe.zcard(keys.queue("red"))
                backlog, results, yellow, red = pipe.execute()
                try:
                    pending = int(client.xpending(keys.stream, "workers")["pending"])
                except Exception:  # no group yet
                    pending = 0
                self.samples.append(
                    {
                        "t": time.time(),
                        "backlog": backlog,
                        "pending": pending,
                        "results": results,
                        "yellow": yellow,
                        "red": red,
                        "load1": os.getloadavg()[0],
                    }
                )
            except Exception as error:  # a sampling hiccup must not end the run
                self.samples.append({"t": time.time(), "error": type(error).__name__})
            self.halt.wait(self.interval)


def run_locust(stack: harness.Stack, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    locust = ensure_locust()
    out = workdir / "locust-outcomes.json"
    users = args.users + 2  # + the two fixed operators
    env = {
        **os.environ,
        "TRIAGE_LT_INGEST": stack.ingest,
        "TRIAGE_LT_OPERATOR": stack.operator,
        "TRIAGE_LT_RATE": str(args.rate),
        "TRIAGE_LT_HELPDESK_USERS": str(args.users),
        "TRIAGE_LT_CORPUS": str(args.corpus),
        "TRIAGE_LT_OUT": str(out),
    }
    command = [
        str(locust),
        "-f",
        str(HERE / "locustfile.py"),
        "--headless",
        "-u",
        str(users),
        "-r",
        str(users),
        "-t",
        f"{args.duration}s",
        "--host",
        stack.base_url,
        "--stop-timeout",
        "5",
        "--only-summary",
        "--csv",
        str(workdir / "locust"),
        "--loglevel",
        "WARNING",
    ]
    with (workdir / "locust.log").open("wb") as log:
        done = subprocess.run(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=args.duration + 120, cwd=harness.ROOT
        )
    if not out.exists():
        raise RuntimeError(f"locust wrote no outcomes (exit {done.returncode}); see {workdir / 'locust.log'}")
    data = json.loads(out.read_text())
    data["exit_code"] = done.returncode
    return data


def backpressure(stack: harness.Stack, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """A second API on the same Redis (own prefix, no worker) with a small stream bound."""
    probe = harness.Stack(
        workdir / "backpressure",
        redis_url=stack.redis_url,
        env={"TRIAGE_STREAM_MAX": str(args.bound), "TRIAGE_RETRY_AFTER_S": "7"},
    )
    try:
        probe.start_api()
        tickets = harness.load_corpus(args.corpus, limit=args.bound + 10)
        statuses: Counter[int] = Counter()
        first_429: dict[str, Any] | None = None
        with probe.http() as http:
            for ticket in tickets:
                response = http.post("/v1/tickets", json=ticket, headers=probe.headers())
                statuses[response.status_code] += 1
                if response.status_code == 429 and first_429 is None:
                    first_429 = {
                        "after_accepted": statuses[202],
                        "retry_after": response.headers.get("Retry-After"),
                        "content_type": response.headers.get("content-type"),
                        "body": response.json(),
                    }
        ok = (
            statuses[202] == args.bound
            and first_429 is not None
            and first_429["retry_after"] == "7"
            and statuses[429] == len(tickets) - args.bound
        )
        return {"bound": args.bound, "statuses": dict(statuses), "first_429": first_429, "ok": ok}
    finally:
        probe.stop()


def analyse(
    stack: harness.Stack,
    args: argparse.Namespace,
    outcomes: dict[str, Any],
    samples: list[dict[str, Any]],
    load_start: float,
    load_end: float,
    drained_at: float,
) -> dict[str, Any]:
    posts = outcomes["posts"]
    statuses = Counter(status for _, _, status, _ in posts)
    accepted = [ticket_id for _, _, status, ticket_id in posts if status == 202 and ticket_id]
    server_errors = sum(n for status, n in statuses.items() if status >= 500 or status == 0)
    errors = sum(n for status, n in statuses.items() if status not in (202, 429))
    audit = stack.audit_ids(accepted)

    e2e, l2, wait = [], [], []
    pipe = stack.client.pipeline(transaction=False)
    for ticket_id in accepted:
        pipe.hmget(stack.keys.ticket(ticket_id), ["accepted_at", "completed_at", "result"])
    methods: Counter[str] = Counter()
    levels: Counter[str] = Counter()
    completions = []
    for accepted_at, completed_at, result in pipe.execute():
        if not (accepted_at and completed_at and result):
            continue
        done_at = float(completed_at)
        completions.append(done_at)
        e2e.append((done_at - float(accepted_at)) * 1000)
        parsed = json.loads(result)
        timings = parsed.get("timings_ms") or {}
        l2.append(float(timings.get("l2", 0.0)))
        wait.append(float(timings.get("queue_wait", 0.0)))
        methods[parsed.get("l2", {}).get("method", "?")] += 1
        levels[parsed.get("final_level", "?")] += 1

    load_minutes = (load_end - load_start) / 60
    in_load = sum(1 for t in completions if load_start <= t <= load_end)
    total_minutes = max(1e-9, (drained_at - load_start) / 60)
    # Capacity: completions per minute while work was waiting (the backlog never ran dry).
    busy = [s for s in samples if "backlog" in s and s["t"] >= load_start and s["backlog"] > 0]
    capacity = None
    if len(busy) >= 2 and busy[-1]["t"] > busy[0]["t"]:
        capacity = (busy[-1]["results"] - busy[0]["results"]) / ((busy[-1]["t"] - busy[0]["t"]) / 60)
    per_worker = None if capacity is None else capacity / args.workers
    backlog = [s for s in samples if "backlog" in s and load_start <= s["t"] <= load_end]
    growth = None
    if len(backlog) >= 2:
        growth = (backlog[-1]["backlog"] - backlog[0]["backlog"]) / max(1e-9, (backlog[-1]["t"] - backlog[0]["t"]) / 60)
    accept_ms = [ms for _, ms, status, _ in posts if status in (202, 429)]
    offered = len(posts) / max(1e-9, load_end - load_start)
    accept_histogram = plots.histogram(accept_ms)
    decisions = Counter(status for status, _ in outcomes.get("decisions", []))
    return {
        "accept_ms": quantiles(accept_ms),
        "accept_histogram": accept_histogram,
        "requests": {
            "total": len(posts),
            "per_second": round(offered, 2),
            "by_status": {str(k): v for k, v in sorted(statuses.items())},
            "server_errors": server_errors,
            "error_rate": round(errors / max(1, len(posts)), 5),
        },
        "decisions": {str(k): v for k, v in sorted(decisions.items())},
        "processed": {
            "during_load": in_load,
            "per_minute_during_load": round(in_load / max(1e-9, load_minutes), 2),
            "total": len(completions),
            "per_minute_overall": round(len(completions) / total_minutes, 2),
            "by_final_level": dict(levels),
            "by_method": dict(methods),
        },
        "capacity": {
            "tickets_per_minute": None if capacity is None else round(capacity, 2),
            "per_worker": None if per_worker is None else round(per_worker, 2),
            "l2_ms": quantiles(l2),
        },
        "end_to_end_ms": quantiles(e2e),
        "queue_wait_ms": quantiles(wait),
        "queue_growth": {
            "backlog_start": backlog[0]["backlog"] if backlog else None,
            "backlog_end_of_load": backlog[-1]["backlog"] if backlog else None,
            "backlog_max": max((s["backlog"] for s in backlog), default=None),
            "per_minute": None if growth is None else round(growth, 1),
        },
        "integrity": {
            **audit,
            "lost": len(audit["lost"]),
            "lost_ids": audit["lost"][:20],
            "all_have_results": audit["by_status"].get("done", 0) + audit["by_status"].get("failed", 0)
            == len(accepted),
        },
    }


def workers_needed(tickets_per_minute: float, per_worker: float | None) -> int | None:
    if not per_worker:
        return None
    return math.ceil(tickets_per_minute / per_worker)


def render_markdown(report: dict[str, Any], pictures: list[str] | tuple[str, ...] = ()) -> str:
    r, cfg, t = report["results"], report["config"], report["targets"]
    a, req, proc, cap = r["accept_ms"], r["requests"], r["processed"], r["capacity"]
    e2e, growth, integ = r["end_to_end_ms"], r["queue_growth"], r["integrity"]
    bp = report.get("backpressure") or {}
    mark = {True: "met", False: "NOT met", None: "not measured"}
    lines = [
        f"# Load test {report['started']}",
        "",
        f"{cfg['rate']} tickets/s offered for {cfg['duration_s']} s by {cfg['users']} helpdesk "
        f"users (+2 operators), {cfg['workers']} worker(s) x {cfg['threads']} thread(s), model "
        f"{cfg['model_size']}, on {report['machine']['cpus']} CPUs (load average "
        f"{report['machine']['load_before']} before, {report['machine']['load_after']} after: "
        "other processes share this machine).",
        "",
        "## Targets",
        "",
        "| target | measured | |",
        "|---|---|---|",
        f"| accept p99 < {TARGETS['accept_p99_ms']:.0f} ms at {cfg['rate']}/s | {a['p99']} ms | "
        f"{mark[t['accept_p99']]} |",
        f"| zero 5xx | {req['server_errors']} | {mark[t['no_5xx']]} |",
        f"| zero lost | {integ['lost']} of {integ['accepted']} accepted | {mark[t['none_lost']]} |",
        f"| 429 + Retry-After at the queue bound | {bp.get('statuses')} | {mark[t['backpressure']]} |",
        "",
        "## Accept (POST /v1/tickets)",
        "",
        f"p50 {a['p50']} ms, p95 {a['p95']} ms, p99 {a['p99']} ms, max {a['max']} ms over "
        f"{a['n']} requests ({req['per_second']}/s achieved). Statuses {req['by_status']}; "
        f"error rate {req['error_rate']:.3%} (anything but 202 and 429). Operator decisions "
        f"{r['decisions']}.",
        "",
        "## Processing",
        "",
        f"- Finished during the load: {proc['during_load']} "
        f"({proc['per_minute_during_load']}/min); after the drain window: {proc['total']} "
        f"({proc['per_minute_overall']}/min overall).",
        f"- By final level {proc['by_final_level']}; by L2 method {proc['by_method']}.",
        f"- L2 time per ticket: p50 {cap['l2_ms']['p50']} ms, p95 {cap['l2_ms']['p95']} ms.",
        f"- **L2 capacity: {cap['tickets_per_minute']} tickets/min, {cap['per_worker']} per "
        f"worker** (finished per minute while the backlog was never empty).",
        f"- End to end (202 to stored result): p50 {e2e['p50']} ms, p95 {e2e['p95']} ms, "
        f"p99 {e2e['p99']} ms over {e2e['n']} finished tickets; queue wait p50 "
        f"{r['queue_wait_ms']['p50']} ms.",
        f"- Stream backlog: {growth['backlog_start']} at the start, "
        f"{growth['backlog_end_of_load']} at the end of the load (max {growth['backlog_max']}), "
        f"growing {growth['per_minute']}/min.",
        "",
        "## Every accepted ticket",
        "",
        f"{integ['accepted']} accepted: {integ['by_status']}; {integ['in_stream']} still in the "
        f"stream ({integ['pending']} delivered, not acknowledged). Lost: {integ['lost']}. "
        f"Every accepted ticket has a result: {'yes' if integ['all_have_results'] else 'no'}"
        + (
            ""
            if integ["all_have_results"]
            else " (the rest wait in the stream; at the measured capacity the backlog takes "
            f"{report['sizing']['drain_minutes']} more minutes)"
        )
        + ".",
        "",
        "## Sizing",
        "",
        f"At {cap['per_worker']} tickets/min per worker: "
        + ", ".join(f"{k} tickets/min need {v} worker(s)" for k, v in report["sizing"]["workers_for"].items())
        + f"; 1,000 tickets an hour need {report['sizing'].get('workers_per_1000_tickets_per_hour')}. "
        f"Workers decode in mode {cfg.get('l2_mode', 'fused')}, {cfg.get('tickets_per_decode', 1)} ticket(s) "
        "per decode call.",
        "",
        f"Raw samples and Locust's CSVs: `{report['workdir']}`.",
    ]
    if pictures:
        lines += ["", "## Pictures", ""] + [f"![{name}]({name})" for name in pictures]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=50.0, help="ticket POSTs per second")
    parser.add_argument("--duration", type=int, default=60, help="seconds of load")
    parser.add_argument("--users", type=int, default=10, help="helpdesk users")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="TRIAGE_N_THREADS per worker")
    parser.add_argument("--model-size", default="0.5b", choices=("0.5b", "1.5b"))
    parser.add_argument("--drain", type=int, default=120, help="seconds to let workers finish after the load")
    parser.add_argument("--bound", type=int, default=25, help="stream bound of the 429 check")
    parser.add_argument("--corpus", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None, help="report folder")
    args = parser.parse_args(argv)
    if args.duration > 3600 or args.rate > 500 or args.drain > 3600:
        parser.error("bounded runs only: --duration and --drain <= 3600 s, --rate <= 500/s")
    args.corpus = args.corpus or harness.default_corpus()
    started = time.strftime("%Y%m%d-%H%M%S")
    out = args.out or harness.ROOT / "var" / "loadtest" / started
    out.mkdir(parents=True, exist_ok=True)
    load_before = round(os.getloadavg()[0], 2)

    stack = harness.Stack(
        out / "stack",
        env={
            # The limiter is per token and 50/s by default: lift it so the test measures latency,
            # not the limiter (the limiter has its own tests).
            "TRIAGE_INGEST_RATE": str(max(100.0, args.rate * 2)),
            "TRIAGE_INGEST_BURST": str(int(max(200, args.rate * 4))),
            "TRIAGE_N_THREADS": str(args.threads),
            "TRIAGE_MODEL_SIZE": args.model_size,
            "TRIAGE_LOG_LEVEL": "warning",
        },
    )
    report: dict[str, Any] = {}
    try:
        print(f"loadtest: starting Redis, API and {args.workers} worker(s) in {out}", flush=True)
        stack.start_redis()
        stack.start_api()
        for _ in range(args.workers):
            stack.start_worker()
        stack.wait_ready(workers=args.workers, timeout=900)
        sampler = Sampler(stack)
        sampler.start()
        print(f"loadtest: {args.rate}/s for {args.duration} s", flush=True)
        load_start = time.time()
        outcomes = run_locust(stack, args, out)
        load_end = time.time()
        accepted = [i for _, _, s, i in outcomes["posts"] if s == 202 and i]
        print(f"loadtest: {len(accepted)} accepted; draining up to {args.drain} s", flush=True)
        stack.wait_done(accepted, timeout=args.drain)
        drained_at = time.time()
        sampler.halt.set()
        sampler.join(10)
        results = analyse(stack, args, outcomes, sampler.samples, load_start, load_end, drained_at)
        print("loadtest: back-pressure check", flush=True)
        bp = backpressure(stack, args, out)
        per_worker = results["capacity"]["per_worker"]
        remaining = results["integrity"]["accepted"] - results["processed"]["total"]
        report = {
            "started": started,
            "workdir": str(out),
            "config": {
                "rate": args.rate,
                "duration_s": args.duration,
                "users": args.users,
                "workers": args.workers,
                "threads": args.threads,
                "model_size": args.model_size,
                # what produced the worker's throughput: the decode mode and one ticket at a time
                # (cross-ticket batching is measured by `triage bench --only batching`, not shipped)
                "l2_mode": DEFAULT_MODE,
                "tickets_per_decode": 1,
                "drain_s": args.drain,
                "bound": args.bound,
                "corpus": str(args.corpus),
            },
            "machine": {
                "cpus": os.cpu_count(),
                "load_before": load_before,
                "load_after": round(os.getloadavg()[0], 2),
                "python": platform.python_version(),
            },
            "load_window": {"start": load_start, "end": load_end},
            "results": results,
            "backpressure": bp,
            "sizing": {
                "workers_for": {str(n): workers_needed(n, per_worker) for n in (10, 30, 60, 120, 300)},
                # a helpdesk counts its traffic per hour: 1,000 tickets an hour is 16.7 a minute
                "workers_per_1000_tickets_per_hour": workers_needed(1000 / 60, per_worker),
                "drain_minutes": None if not per_worker else round(remaining / (per_worker * args.workers), 1),
            },
            "samples": sampler.samples,
        }
        report["targets"] = {
            "accept_p99": (
                results["accept_ms"]["p99"] is not None and results["accept_ms"]["p99"] < TARGETS["accept_p99_ms"]
            ),
            "no_5xx": results["requests"]["server_errors"] == 0,
            "none_lost": results["integrity"]["lost"] == 0,
            "backpressure": bp["ok"],
        }
    finally:
        stack.stop()
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    try:
        pictures = [p.name for p in plots.draw(report, out)]
    except ImportError:  # matplotlib is the offline extra's
        pictures = []
    (out / "report.md").write_text(render_markdown(report, pictures))
    print((out / "report.md").read_text())
    print(f"loadtest: report in {out}/report.md and report.json")
    return 0 if all(report["targets"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
