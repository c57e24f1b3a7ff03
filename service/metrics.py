"""Every Prometheus metric the service exports, in one place so names and labels stay consistent.

API and worker share this registry when they run in one process (`triage run`); a standalone
worker (`triage worker`) serves the same registry on its own port (TRIAGE_METRICS_PORT).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

_FAST = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1)
_SLOW = (0.1, 0.25, 0.5, 1, 2, 3, 5, 8, 13, 21, 34, 60, 120, 300)

requests_total = Counter(
    "triage_requests_total", "HTTP requests by route template and status code", ["route", "status"], registry=REGISTRY
)
request_seconds = Histogram(
    "triage_request_seconds",
    "HTTP request handling time",
    ["route"],
    buckets=_FAST + (0.25, 0.5, 1.0),
    registry=REGISTRY,
)
l1_seconds = Histogram("triage_l1_seconds", "L1 rule evaluation time per ticket", buckets=_FAST, registry=REGISTRY)
l2_seconds = Histogram("triage_l2_seconds", "L2 classification time per ticket", buckets=_SLOW, registry=REGISTRY)
end_to_end_seconds = Histogram(
    "triage_end_to_end_seconds", "From acceptance (202) to the stored result", buckets=_SLOW, registry=REGISTRY
)
queue_wait_seconds = Histogram(
    "triage_queue_wait_seconds", "From acceptance to a worker picking the ticket up", buckets=_SLOW, registry=REGISTRY
)
tickets_total = Counter(
    "triage_tickets_total",
    "Tickets triaged, by final level and L2 method",
    ["final_level", "method"],
    registry=REGISTRY,
)
false_greens_total = Counter(
    "triage_false_greens_total",
    "Tickets served green that an operator's decision says are not green (once per ticket)",
    registry=REGISTRY,
)
queue_depth = Gauge("triage_queue_depth", "Tickets waiting in an operator queue", ["queue"], registry=REGISTRY)
stream_pending = Gauge(
    "triage_stream_pending", "Stream entries delivered to a worker but not yet acknowledged", registry=REGISTRY
)
stream_backlog = Gauge(
    "triage_stream_backlog", "Tickets accepted and not yet picked up by a worker (stream lag)", registry=REGISTRY
)
redeliveries_total = Counter(
    "triage_redeliveries_total", "Stream entries claimed again after a worker went silent", registry=REGISTRY
)
dead_letter_total = Counter(
    "triage_dead_letter_total", "Tickets moved to the dead-letter stream after too many deliveries", registry=REGISTRY
)
fallback_total = Counter(
    "triage_fallback_total",
    "Tickets whose L2 answer came from constrained generation (low coverage)",
    registry=REGISTRY,
)
l2_unavailable_total = Counter(
    "triage_l2_unavailable_total",
    "Tickets whose L2 failed or timed out (left at least yellow)",
    ["reason"],
    registry=REGISTRY,
)
# The `reason` label takes only these values (a free-text reason would make a series per
# message); the full text is in the ticket's result and the log line.
L2_UNAVAILABLE_REASONS = ("timeout", "model_error", "classifier_error", "other")
for _reason in L2_UNAVAILABLE_REASONS:
    l2_unavailable_total.labels(reason=_reason)  # every series exists from the start, at 0


def l2_unavailable_reason(text: str | None) -> str:
    """The label value for an L2 failure's free-text reason ("timeout: ...", "model error: ...",
    "classifier error: ..."): its leading words when they name a known reason, else "other"."""
    head = (text or "").split(":", 1)[0].strip().lower().replace(" ", "_")
    return head if head in L2_UNAVAILABLE_REASONS else "other"


l2_coverage = Histogram(
    "triage_l2_coverage_ratio",
    "Coverage of the risk question (mass on the aliases)",
    buckets=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0),
    registry=REGISTRY,
)
callbacks_total = Counter("triage_callbacks_total", "Callback deliveries by outcome", ["outcome"], registry=REGISTRY)
callback_sender_restarts_total = Counter(
    "triage_callback_sender_restarts_total",
    "Times the callback sender loop died and was restarted by its supervisor",
    registry=REGISTRY,
)
decisions_total = Counter("triage_decisions_total", "Operator decisions by action", ["action"], registry=REGISTRY)
worker_heartbeat_timestamp = Gauge(
    "triage_worker_heartbeat_timestamp_seconds", "Last heartbeat of this worker (unix time)", registry=REGISTRY
)
worker_loop_timestamp = Gauge(
    "triage_worker_loop_timestamp_seconds",
    "Last time this worker's main loop went round: took a ticket, or waited on the stream "
    "(unix time); the liveness probe needs it fresh, not only the heartbeat",
    registry=REGISTRY,
)
workers_alive = Gauge("triage_workers_alive", "Workers with a fresh heartbeat", registry=REGISTRY)
rules_reload_total = Counter(
    "triage_rules_reload_total", "Rule-pack reloads by outcome", ["outcome"], registry=REGISTRY
)
calibration_ece = Gauge(
    "triage_calibration_ece_ratio", "Expected calibration error after calibration", ["question"], registry=REGISTRY
)
calibration_age_seconds = Gauge(
    "triage_calibration_age_seconds", "Age of the loaded calibration artifact", registry=REGISTRY
)
calibration_loaded = Gauge(
    "triage_calibration_loaded",
    "1 when this worker serves with a calibration artifact, 0 when it runs uncalibrated",
    registry=REGISTRY,
)
calibration_stale = Gauge(
    "triage_calibration_stale",
    "1 when the newest artifact does not match the running model or prompts",
    registry=REGISTRY,
)
audit_kappa = Gauge("triage_audit_kappa", "Cohen's kappa of the judge against human labels", registry=REGISTRY)
audit_gating = Gauge("triage_audit_gating", "1 when the audit may raise alerts on its own authority", registry=REGISTRY)
audit_false_green_rate = Gauge(
    "triage_audit_false_green_ratio", "Estimated false-green rate from the last audit", registry=REGISTRY
)
audit_last_run_timestamp_seconds = Gauge(
    "triage_audit_last_run_timestamp_seconds", "When the last audit finished (unix time)", registry=REGISTRY
)
# Served greens the audit drew uniformly and operators checked (service/audit/job.py): the
# false-green rate on real traffic, its exact 95 % upper bound, and the bound it must stay under.
audit_checked_false_green_ratio = Gauge(
    "triage_audit_checked_false_green_ratio",
    "False greens among the served greens operators checked (audit sample, checks window)",
    registry=REGISTRY,
)
audit_checked_false_green_upper_ratio = Gauge(
    "triage_audit_checked_false_green_upper_ratio",
    "One-sided 95 % Clopper-Pearson upper bound on that rate (1 with no check)",
    registry=REGISTRY,
)
audit_checked_greens = Gauge(
    "triage_audit_checked_greens", "Served greens checked by operators in the checks window", registry=REGISTRY
)
audit_checked_false_greens = Gauge(
    "triage_audit_checked_false_greens", "Of those, the greens operators said needed a person", registry=REGISTRY
)
max_false_green_rate_ratio = Gauge(
    "triage_max_false_green_rate_ratio",
    "TRIAGE_MAX_FALSE_GREEN_RATE: the false-green rate the green threshold is chosen to bound",
    registry=REGISTRY,
)
# {p}:audit:state field -> gauge: the audit job sets them, the API re-reads them at scrape time.
AUDIT_STATE_GAUGES: dict[str, Gauge] = {
    "kappa": audit_kappa,
    "gating": audit_gating,
    "false_green_rate": audit_false_green_rate,
    "last_run": audit_last_run_timestamp_seconds,
    "checked_false_green_rate": audit_checked_false_green_ratio,
    "checked_false_green_upper": audit_checked_false_green_upper_ratio,
    "checked_greens": audit_checked_greens,
    "checked_false_greens": audit_checked_false_greens,
    "max_false_green_rate": max_false_green_rate_ratio,
}
