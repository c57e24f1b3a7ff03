"""deploy/compose.yaml and the Prometheus scrape config agree with each other and with the service."""

from __future__ import annotations

import re

import pytest
import yaml

from service.settings import ENV, Settings
from tests.deploy import support as h

COMPOSE = yaml.safe_load(h.COMPOSE_FILE.read_text())
SERVICES = COMPOSE["services"]
TRIAGE_SERVICES = [
    name
    for name, svc in SERVICES.items()
    if str(svc.get("image", "")).startswith(("${TRIAGE_IMAGE", "${TRIAGE_JOBS_IMAGE"))
]


def _interpolate_defaults(value: str) -> str:
    return re.sub(r"\$\{[A-Z0-9_]+:-([^}]*)\}", r"\1", value)


def test_redis_is_append_only_and_never_evicts():
    command = SERVICES["redis"]["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    assert command[command.index("--maxmemory-policy") + 1] == "noeviction"
    assert any(v.endswith(":/data") for v in SERVICES["redis"]["volumes"])


def test_the_stack_has_every_part():
    assert {"redis", "api", "worker", "prometheus", "grafana", "model"} <= set(SERVICES)
    assert "replicas" in SERVICES["worker"]["deploy"]


def test_workers_wait_for_a_verified_model_and_redis():
    depends = SERVICES["worker"]["depends_on"]
    assert depends["model"]["condition"] == "service_completed_successfully"
    assert depends["redis"]["condition"] == "service_healthy"
    assert "models:/models:ro" in SERVICES["worker"]["volumes"]
    assert "models:/models" in SERVICES["model"]["volumes"]


@pytest.mark.parametrize("name", TRIAGE_SERVICES)
def test_triage_commands_parse_with_the_real_cli(name):
    from service.cli import build_parser

    args = [_interpolate_defaults(str(a)) for a in SERVICES[name]["command"]]
    try:
        build_parser().parse_args(args)
    except SystemExit:
        pytest.fail(f"{name}: `triage {' '.join(args)}` does not parse")


def test_every_triage_variable_is_a_setting():
    known = set(ENV.values())
    for name in TRIAGE_SERVICES:
        for variable in SERVICES[name].get("environment", {}):
            if variable.startswith("TRIAGE_"):
                assert variable in known, f"{name}: {variable} is not in service/settings.py ENV"


def test_secrets_are_required_not_defaulted():
    env = SERVICES["api"]["environment"]
    for variable in ("TRIAGE_INGEST_TOKENS", "TRIAGE_OPERATOR_TOKENS"):
        assert re.fullmatch(r"\$\{" + variable + r":\?[^}]+\}", env[variable]), variable
    assert ":?" in SERVICES["grafana"]["environment"]["GF_SECURITY_ADMIN_PASSWORD"]


def test_published_ports_bind_to_loopback():
    for name, svc in SERVICES.items():
        for port in svc.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} on all interfaces"


@pytest.mark.parametrize("job", ["recalibrate", "audit"])
def test_jobs_run_the_offline_image_on_the_verified_model(job):
    service = SERVICES[job]
    assert service["build"]["target"] == "offline" and service["image"] != SERVICES["api"]["image"]
    assert "models:/models:ro" in service["volumes"]
    assert service["depends_on"]["model"]["condition"] == "service_completed_successfully"
    assert "offline" in h.dockerfile_stages()


def test_build_target_is_a_dockerfile_stage():
    stages = h.dockerfile_stages()
    target = _interpolate_defaults(SERVICES["api"]["build"]["target"])
    assert target in stages
    assert "bundled" in stages  # the documented alternative (TRIAGE_BUILD_TARGET=bundled)


def test_prometheus_scrapes_the_api_and_every_worker_on_their_real_ports():
    config = yaml.safe_load(h.PROMETHEUS_FILE.read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    defaults = Settings()
    for job, service, port in (
        ("triage-api", "api", defaults.port),
        ("triage-worker", "worker", defaults.metrics_port),
    ):
        sd = jobs[job]["dns_sd_configs"][0]
        assert sd["names"] == [service] and sd["port"] == port, job
        assert jobs[job].get("metrics_path", "/metrics") == "/metrics"
    assert "./prometheus:/etc/prometheus:ro" in SERVICES["prometheus"]["volumes"]
    assert config["rule_files"] == ["rules/*.yml"]


def test_the_alert_rules_select_the_scrape_job_names():
    config = yaml.safe_load(h.PROMETHEUS_FILE.read_text())
    jobs = {job["job_name"] for job in config["scrape_configs"]}
    pattern = re.search(r'job=~"([^"]+)"', h.alerts()["TriageTargetDown"]["expr"]).group(1)
    assert {j for j in jobs if re.fullmatch(pattern, j)} == {"triage-api", "triage-worker"}


def test_the_worker_stops_gracefully_within_its_l2_timeout():
    grace = int(SERVICES["worker"]["stop_grace_period"].rstrip("s"))
    assert grace > Settings().l2_timeout_s
