"""Generate the Grafana dashboard deploy/grafana/dashboards/triage.json from the panel list below.

    python deploy/grafana/build_dashboard.py           # rewrite the JSON
    python deploy/grafana/build_dashboard.py --check   # exit 1 if the JSON is out of date

The panel list is the source; the JSON is what Grafana provisions (deploy/grafana/provisioning).
tests/deploy checks that the committed JSON equals this output and that every metric it queries
exists in service.metrics.REGISTRY. Redis-derived gauges are combined with max() (every API
replica exports them; workers export the unset ones as 0), counters and histograms with sum().
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "dashboards" / "triage.json"
DS = {"type": "prometheus", "uid": "${datasource}"}
ACCEPT = 'route="/v1/tickets"'

# Objectives, mirrored from deploy/prometheus/rules/triage.rules.yml (tests/deploy compares).
ACCEPT_P99_OBJECTIVE_S = 0.05
END_TO_END_P95_OBJECTIVE_S = 60
KAPPA_MIN = 0.6


def quantiles(metric: str, selector: str = "") -> list[dict]:
    sel = "{" + selector + "}" if selector else ""
    return [
        {
            "expr": f"histogram_quantile({q}, sum by (le) (rate({metric}_bucket{sel}[$__rate_interval])))",
            "legendFormat": f"p{int(q * 100)}",
            "refId": ref,
        }
        for q, ref in ((0.5, "A"), (0.95, "B"), (0.99, "C"))
    ]


def target(expr: str, legend: str = "", ref: str = "A", **extra) -> dict:
    return {"expr": expr, "legendFormat": legend, "refId": ref, **extra}


def thresholds(*steps: tuple[float | None, str]) -> dict:
    return {"mode": "absolute", "steps": [{"color": c, "value": v} for v, c in steps]}


def timeseries(
    title: str,
    targets: list[dict],
    unit: str = "short",
    *,
    description: str = "",
    stack: bool = False,
    threshold: float | None = None,
    width: int = 8,
) -> dict:
    custom: dict = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never", "spanNulls": True}
    if stack:
        custom["stacking"] = {"mode": "normal", "group": "A"}
    defaults: dict = {"unit": unit, "custom": custom}
    if threshold is not None:
        custom["thresholdsStyle"] = {"mode": "line"}
        defaults["thresholds"] = thresholds((None, "green"), (threshold, "red"))
    return {
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": DS,
        "targets": targets,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {
            "legend": {"displayMode": "list", "placement": "bottom"},
            "tooltip": {"mode": "multi", "sort": "none"},
        },
        "_w": width,
        "_h": 8,
    }


def stat(
    title: str,
    targets: list[dict],
    unit: str = "short",
    *,
    description: str = "",
    steps: tuple[tuple[float | None, str], ...] = ((None, "green"),),
    mappings: list | None = None,
    width: int = 4,
) -> dict:
    return {
        "type": "stat",
        "title": title,
        "description": description,
        "datasource": DS,
        "targets": targets,
        "fieldConfig": {
            "defaults": {
                "unit": unit,
                "thresholds": thresholds(*steps),
                "mappings": mappings or [],
                "color": {"mode": "thresholds"},
            },
            "overrides": [],
        },
        "options": {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "background",
            "graphMode": "none",
            "textMode": "auto",
        },
        "_w": width,
        "_h": 5,
    }


def bargauge(title: str, targets: list[dict], *, width: int = 6) -> dict:
    return {
        "type": "bargauge",
        "title": title,
        "description": "",
        "datasource": DS,
        "targets": targets,
        "fieldConfig": {
            "defaults": {"unit": "short", "min": 0, "thresholds": thresholds((None, "blue"))},
            "overrides": [],
        },
        "options": {
            "orientation": "horizontal",
            "displayMode": "basic",
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
        },
        "_w": width,
        "_h": 8,
    }


def heatmap(title: str, targets: list[dict], *, description: str = "", width: int = 8) -> dict:
    return {
        "type": "heatmap",
        "title": title,
        "description": description,
        "datasource": DS,
        "targets": targets,
        "options": {
            "calculate": False,
            "yAxis": {"unit": "percentunit"},
            "cellGap": 1,
            "color": {"mode": "scheme", "scheme": "Oranges"},
            "rowsFrame": {"layout": "auto"},
        },
        "fieldConfig": {"defaults": {}, "overrides": []},
        "_w": width,
        "_h": 8,
    }


def row(title: str) -> dict:
    return {"type": "row", "title": title, "collapsed": False, "panels": [], "_w": 24, "_h": 1}


def panels() -> list[dict]:
    ticket_rate = "sum(rate(triage_tickets_total[$__rate_interval]))"
    return [
        row("Latency"),
        timeseries(
            "Accept latency (POST /v1/tickets)",
            quantiles("triage_request_seconds", ACCEPT),
            "s",
            threshold=ACCEPT_P99_OBJECTIVE_S,
            description="HTTP handling of ticket intake: validation, L1, XADD. Objective p99 < 50 ms.",
        ),
        timeseries(
            "L1 rules latency", quantiles("triage_l1_seconds"), "s", description="RE2 rule-pack evaluation per ticket."
        ),
        timeseries(
            "L2 classification latency",
            quantiles("triage_l2_seconds"),
            "s",
            description="Model time per ticket on a worker.",
        ),
        timeseries(
            "End-to-end latency (202 to stored result)",
            quantiles("triage_end_to_end_seconds"),
            "s",
            threshold=END_TO_END_P95_OBJECTIVE_S,
            width=12,
            description="Objective p95 < 60 s (alert TriageEndToEndSlow).",
        ),
        timeseries("Queue wait (202 to picked up by a worker)", quantiles("triage_queue_wait_seconds"), "s", width=12),
        row("Outcomes and false greens"),
        timeseries(
            "Tickets per minute by final level and method",
            [
                target(
                    "sum by (final_level, method) (rate(triage_tickets_total[$__rate_interval])) * 60",
                    "{{final_level}} / {{method}}",
                )
            ],
            "short",
            stack=True,
            width=12,
        ),
        bargauge(
            "Tickets by final level and method (range)",
            [
                target(
                    "sum by (final_level, method) (increase(triage_tickets_total[$__range]))",
                    "{{final_level}} / {{method}}",
                    instant=True,
                )
            ],
            width=6,
        ),
        stat(
            "False greens (operators, range)",
            [target("sum(increase(triage_false_greens_total[$__range]))", instant=True)],
            steps=((None, "green"), (1, "red")),
            width=3,
            description="Green tickets an operator marked wrong. Objective: zero.",
        ),
        stat(
            "False-green rate (operators)",
            [
                target(
                    "sum(increase(triage_false_greens_total[$__range])) / "
                    'sum(increase(triage_tickets_total{final_level="green"}[$__range]))',
                    instant=True,
                )
            ],
            "percentunit",
            steps=((None, "green"), (0.000001, "red")),
            width=3,
            description="False greens reported by operators per green ticket in the range.",
        ),
        timeseries(
            "False greens per hour (operators) and audit estimate",
            [
                target("sum(increase(triage_false_greens_total[1h]))", "operators, last hour"),
                target("max(triage_audit_false_green_ratio)", "audit false-green rate", "B"),
            ],
            "short",
            width=8,
            description="Operator reports are counts; the audit line is the judge's estimated rate.",
        ),
        timeseries(
            "Fallback and L2-unavailable rate",
            [
                target(
                    f"sum(rate(triage_fallback_total[$__rate_interval])) / {ticket_rate}",
                    "fallback (constrained generation)",
                ),
                target(
                    f"sum by (reason) (rate(triage_l2_unavailable_total[$__rate_interval])) / scalar({ticket_rate})",
                    "unavailable: {{reason}}",
                    "B",
                ),
            ],
            "percentunit",
            width=8,
            description="Share of tickets whose L2 answer came from the fallback path, or had no "
            "L2 answer (left at least yellow).",
        ),
        heatmap(
            "L2 coverage distribution",
            [
                target(
                    "sum by (le) (increase(triage_l2_coverage_ratio_bucket[$__rate_interval]))",
                    "{{le}}",
                    format="heatmap",
                )
            ],
            width=8,
            description="Probability mass on the answer aliases of the risk question; low "
            "coverage sends a ticket to the fallback.",
        ),
        timeseries(
            "Operator decisions per minute by action",
            [target("sum by (action) (rate(triage_decisions_total[$__rate_interval])) * 60", "{{action}}")],
            "short",
            width=12,
        ),
        timeseries(
            "Callbacks per minute by outcome",
            [target("sum by (outcome) (rate(triage_callbacks_total[$__rate_interval])) * 60", "{{outcome}}")],
            "short",
            width=12,
        ),
        row("Queues, stream and workers"),
        timeseries(
            "Operator queue depth", [target("max by (queue) (triage_queue_depth)", "{{queue}}")], "short", width=8
        ),
        timeseries(
            "Stream backlog and pending",
            [
                target("max(triage_stream_backlog)", "backlog (XLEN: accepted, not finished)"),
                target("max(triage_stream_pending)", "pending (delivered, not acked)", "B"),
            ],
            "short",
            width=8,
            description="Backlog is XLEN of the ticket stream (workers delete finished entries): "
            "the outstanding work KEDA scales the workers on.",
        ),
        timeseries(
            "Redeliveries and dead letters per 5 min",
            [
                target("sum(increase(triage_redeliveries_total[5m]))", "redeliveries"),
                target("sum(increase(triage_dead_letter_total[5m]))", "dead letters", "B"),
            ],
            "short",
            width=8,
        ),
        stat(
            "Dead letters (range)",
            [target("sum(increase(triage_dead_letter_total[$__range]))", instant=True)],
            steps=((None, "green"), (1, "orange")),
            width=4,
        ),
        stat(
            "Workers alive",
            [target("max(triage_workers_alive)", instant=True)],
            steps=((None, "red"), (1, "green")),
            width=4,
        ),
        stat(
            "Newest worker heartbeat age",
            [target("time() - max(triage_worker_heartbeat_timestamp_seconds)", instant=True)],
            "s",
            steps=((None, "green"), (60, "orange"), (120, "red")),
            width=4,
        ),
        timeseries(
            "HTTP requests per second by status",
            [target("sum by (status) (rate(triage_requests_total[$__rate_interval]))", "{{status}}")],
            "reqps",
            width=6,
        ),
        timeseries(
            "Rule-pack reloads",
            [target("sum by (outcome) (increase(triage_rules_reload_total[$__rate_interval]))", "{{outcome}}")],
            "short",
            width=6,
        ),
        row("Calibration and audit"),
        timeseries(
            "Calibration ECE by question",
            [target("max by (question) (triage_calibration_ece_ratio)", "{{question}}")],
            "short",
            width=8,
        ),
        stat(
            "Calibration age",
            [target("max(triage_calibration_age_seconds)", instant=True)],
            "s",
            steps=((None, "green"), (2 * 86400, "orange"), (7 * 86400, "red")),
            width=4,
        ),
        stat(
            "Calibration",
            [target("max(triage_calibration_stale)", instant=True)],
            steps=((None, "green"), (1, "red")),
            width=4,
            mappings=[{"type": "value", "options": {"0": {"text": "current"}, "1": {"text": "STALE"}}}],
            description="STALE: the newest artifact does not match the running model or prompts.",
        ),
        stat(
            "Audit kappa",
            [target("max(triage_audit_kappa)", instant=True)],
            steps=((None, "red"), (KAPPA_MIN, "green")),
            width=4,
            description="Cohen's kappa of the judge against human labels; under 0.6 the audit does not gate.",
        ),
        stat(
            "Audit gating",
            [target("max(triage_audit_gating)", instant=True)],
            width=4,
            mappings=[{"type": "value", "options": {"0": {"text": "advisory"}, "1": {"text": "gating"}}}],
        ),
        timeseries(
            "Audit false-green rate and kappa",
            [
                target("max(triage_audit_false_green_ratio)", "false-green rate"),
                target("max(triage_audit_kappa)", "kappa", "B"),
            ],
            "short",
            width=12,
        ),
        stat(
            "Last audit",
            [target("time() - max(triage_audit_last_run_timestamp_seconds)", instant=True)],
            "s",
            steps=((None, "green"), (86400 + 3600, "orange"), (2 * 86400, "red")),
            width=6,
        ),
    ]


def layout(items: list[dict]) -> list[dict]:
    """Flow panels left to right into the 24-column grid, a row header starting a new line."""
    out: list[dict] = []
    x = y = line_height = 0
    for panel_id, item in enumerate(items, start=1):
        panel = {k: v for k, v in item.items() if not k.startswith("_")}
        w, h = item["_w"], item["_h"]
        if panel["type"] == "row" or x + w > 24:
            y += line_height
            x, line_height = 0, 0
        panel["id"] = panel_id
        panel["gridPos"] = {"x": x, "y": y, "w": w, "h": h}
        x += w
        line_height = max(line_height, h)
        if panel["type"] == "row":
            y += h
            x, line_height = 0, 0
        out.append(panel)
    return out


def dashboard() -> dict:
    return {
        "uid": "triage-overview",
        "title": "Triage",
        "description": "Ticket triage: latency, outcomes, false greens, queues, calibration, audit.",
        "tags": ["triage"],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Prometheus",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {"text": "Prometheus", "value": "triage-prometheus"},
                    "hide": 0,
                    "refresh": 1,
                    "options": [],
                }
            ]
        },
        "annotations": {"list": []},
        "links": [],
        "panels": layout(panels()),
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is out of date: run python deploy/grafana/build_dashboard.py")
            return 1
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
