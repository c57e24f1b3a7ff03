"""Alert rules: the set issue 7 asks for, objectives matching the settings, promtool checks and tests."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from service.settings import Settings
from tests.deploy import support as h
from tests.system import requires

REQUIRED = {
    "TriageFalseGreen",  # any false green (operators)
    "TriageAuditFalseGreens",  # ... and from the audit
    "TriageOperatorQueueGrowing",  # queue depth growing for 10 min
    "TriageEndToEndSlow",  # end-to-end p95 over its objective
    "TriageCalibrationStale",
    "TriageCalibrationMissing",  # a worker with no calibration artifact at all
    "TriageAuditKappaLow",  # kappa under 0.6
    "TriageNoWorkerHeartbeat",
}


def test_required_alerts_exist_with_severity_and_text():
    alerts = h.alerts()
    assert REQUIRED <= set(alerts), f"missing {sorted(REQUIRED - set(alerts))}"
    for name, rule in alerts.items():
        assert rule["labels"]["severity"] in {"critical", "warning"}, name
        assert rule["annotations"].get("summary") and rule["annotations"].get("description"), name


def test_false_greens_page_at_once():
    rule = h.alerts()["TriageFalseGreen"]
    assert rule["labels"]["severity"] == "critical"
    assert "for" not in rule
    assert rule["expr"].rstrip().endswith("> 0")


def test_kappa_threshold_is_the_settings_default():
    assert f"< {Settings().kappa_min}" in h.alerts()["TriageAuditKappaLow"]["expr"]


def test_the_end_to_end_objective_is_stated_in_the_rule():
    rule = h.alerts()["TriageEndToEndSlow"]
    assert "60 s" in rule["annotations"]["summary"]
    assert h.recorded()["triage:end_to_end_seconds:p95_10m"].startswith("histogram_quantile(0.95,")


def test_every_alert_has_a_promtool_unit_test():
    text = (h.DEPLOY / "prometheus" / "tests" / "triage.rules.test.yml").read_text()
    untested = [name for name in h.alerts() if f"alertname: {name}\n" not in text]
    assert not untested, f"no promtool test for {untested}"


promtool = shutil.which("promtool")


@requires("promtool", "prometheus")  # deploy/check.sh and .ci/run install it
@pytest.mark.parametrize(
    "args",
    [
        ["check", "config", str(h.PROMETHEUS_FILE)],
        ["check", "rules", str(h.RULES_FILE)],
        ["test", "rules", str(h.DEPLOY / "prometheus" / "tests" / "triage.rules.test.yml")],
    ],
    ids=["check-config", "check-rules", "test-rules"],
)
def test_promtool(args):
    done = subprocess.run([promtool, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
