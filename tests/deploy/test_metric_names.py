"""Every metric and label the dashboard and the alert rules query exists in service.metrics.REGISTRY."""

from __future__ import annotations

import pytest

from service.store import QUEUES
from tests.deploy import support as h

LEVELS = {"green", "yellow", "red"}


@pytest.fixture(scope="module")
def cat() -> h.Catalogue:
    return h.catalogue()


def _queries() -> list[tuple[str, str]]:
    out = [(f"rule {r.get('alert') or r.get('record')}", r["expr"]) for r in h.rules()]
    out += [(f"panel {title!r}", t["expr"]) for title, t in h.dashboard_targets()]
    return out


QUERIES = _queries()


def test_the_catalogue_is_read_from_the_real_exposition(cat):
    # Suffix handling: histograms give _bucket/_sum/_count, counters keep _total.
    assert "triage_end_to_end_seconds_bucket" in cat.samples
    assert "triage_end_to_end_seconds_count" in cat.samples
    assert "triage_tickets_total" in cat.samples
    assert "triage_tickets" not in cat.samples
    assert cat.labels["triage_tickets_total"] == {"final_level", "method"}
    assert cat.types["triage_queue_depth"] == "gauge"


def test_name_extraction_ignores_strings_and_labels():
    expr = 'sum by (le) (rate(triage_l2_seconds_bucket{route="triage_fake"}[5m])) + triage:x:y'
    assert h.metric_names(expr) == {"triage_l2_seconds_bucket", "triage:x:y"}


@pytest.mark.parametrize(("where", "expr"), QUERIES, ids=[w for w, _ in QUERIES])
def test_every_queried_metric_exists(where, expr, cat):
    names = h.metric_names(expr)
    records = h.recorded()
    for name in names:
        if ":" in name:
            assert name in records, f"{where}: recording rule {name} is not defined"
        else:
            assert name in cat.samples, f"{where}: {name} is not exported by service.metrics"


@pytest.mark.parametrize(("where", "expr"), QUERIES, ids=[w for w, _ in QUERIES])
def test_every_label_used_exists_on_its_metric(where, expr, cat):
    records = h.recorded()
    for name, matchers in h.selectors(expr):
        if name.startswith("triage:") or not name.startswith("triage_"):
            continue
        family = cat.family(name)
        assert family is not None, f"{where}: {name} unknown"
        allowed = cat.labels[family] | h.TARGET_LABELS | ({"le"} if name.endswith("_bucket") else set())
        for label, (_, value) in matchers.items():
            assert label in allowed, f"{where}: {name} has no label {label!r}"
            if label == "final_level" and not value.startswith("^"):
                assert value in LEVELS, f"{where}: final_level={value!r}"
            if label == "queue":
                assert value in QUEUES, f"{where}: queue={value!r}"
    # by()/on() labels: each must exist on some metric the expression reads (or a recording
    # rule it reads, through that rule's own expression).
    read = set()
    for name in h.metric_names(expr):
        if ":" in name:
            read |= h.metric_names(records[name])
        else:
            read.add(name)
    available = set(h.TARGET_LABELS)
    for name in read:
        family = cat.family(name)
        if family:
            available |= cat.labels[family]
        if name.endswith("_bucket"):
            available.add("le")
    for label in h.grouping_labels(expr):
        assert label in available, f"{where}: grouping label {label!r} is on none of {sorted(read)}"


def test_the_accept_route_label_is_the_intake_route_template():
    # The middleware labels requests with Litestar's path template; the dashboard and the
    # accept-latency rule select route="/v1/tickets".
    from service.api.tickets import create_ticket

    assert "/v1/tickets" in create_ticket.paths
    assert "POST" in create_ticket.http_methods


def test_the_dashboard_covers_what_issue_7_asks_for():
    used: set[str] = set()
    for _, target in h.dashboard_targets():
        used |= {h.base_name(n) for n in h.metric_names(target["expr"])}
    required = {
        "triage_request_seconds",
        "triage_l1_seconds",
        "triage_l2_seconds",
        "triage_end_to_end_seconds",
        "triage_tickets_total",
        "triage_false_greens_total",
        "triage_audit_false_green_ratio",
        "triage_queue_depth",
        "triage_stream_pending",
        "triage_stream_backlog",
        "triage_redeliveries_total",
        "triage_dead_letter_total",
        "triage_fallback_total",
        "triage_l2_coverage_ratio",
        "triage_calibration_ece_ratio",
        "triage_calibration_age_seconds",
        "triage_calibration_stale",
        "triage_audit_kappa",
        "triage_workers_alive",
        "triage_worker_heartbeat_timestamp_seconds",
    }
    assert required <= used, f"dashboard lacks {sorted(required - used)}"


@pytest.mark.parametrize(
    "metric", ["triage_request_seconds", "triage_l1_seconds", "triage_l2_seconds", "triage_end_to_end_seconds"]
)
def test_latency_panels_show_p50_p95_p99(metric):
    quantiles = set()
    for _, target in h.dashboard_targets():
        expr = target["expr"]
        if f"{metric}_bucket" in expr and expr.startswith("histogram_quantile("):
            quantiles.add(expr.split("(", 1)[1].split(",", 1)[0])
    assert quantiles == {"0.5", "0.95", "0.99"}


# Counts of things and 0/1 states carry no unit; everything else names its unit.
UNITLESS = {
    "triage_queue_depth",
    "triage_stream_pending",
    "triage_stream_backlog",
    "triage_workers_alive",
    "triage_calibration_stale",
    "triage_calibration_loaded",
    "triage_audit_kappa",
    "triage_audit_gating",
    "triage_audit_checked_greens",
    "triage_audit_checked_false_greens",
}
UNIT_SUFFIXES = ("_total", "_seconds", "_ratio", "_bytes", "_info")


def test_every_metric_names_its_unit_and_ratios_end_in_ratio(cat):
    for family in cat.labels:
        assert family.endswith(UNIT_SUFFIXES) or family in UNITLESS, (
            f"{family}: end it in one of {UNIT_SUFFIXES} (a share 0..1 is _ratio)"
        )
        assert not family.endswith(("_rate", "_percent", "_pct")), family
    for ratio in ("triage_l2_coverage_ratio", "triage_calibration_ece_ratio", "triage_audit_false_green_ratio"):
        assert ratio in cat.labels


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("timeout: deadline 30.0 s exceeded", "timeout"),
        ("model error: RuntimeError: llama_decode returned -1", "model_error"),
        ("classifier error: ValueError: bad state", "classifier_error"),
        ("classifier error: KeyError", "classifier_error"),
        ("something new and unforeseen: 3", "other"),
        ("", "other"),
        (None, "other"),
    ],
)
def test_the_l2_unavailable_reason_label_is_from_a_fixed_set(text, label):
    from service.metrics import L2_UNAVAILABLE_REASONS, l2_unavailable_reason

    assert l2_unavailable_reason(text) == label
    assert label in L2_UNAVAILABLE_REASONS


def test_the_exported_reasons_are_exactly_the_fixed_set():
    from service.metrics import L2_UNAVAILABLE_REASONS, REGISTRY

    seen = {
        sample.labels["reason"]
        for metric in REGISTRY.collect()
        if metric.name == "triage_l2_unavailable"
        for sample in metric.samples
        if sample.name == "triage_l2_unavailable_total"
    }
    assert seen == set(L2_UNAVAILABLE_REASONS)
