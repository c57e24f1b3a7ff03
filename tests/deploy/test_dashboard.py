"""The Grafana dashboard: generated from its source, laid out on the grid, wired to the provisioned data source."""

from __future__ import annotations

import importlib.util

import yaml

from tests.deploy import support as h


def _builder():
    spec = importlib.util.spec_from_file_location("build_dashboard", h.DEPLOY / "grafana" / "build_dashboard.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_json_is_the_generator_output():
    assert h.DASHBOARD_FILE.read_text() == _builder().render(), "run: python deploy/grafana/build_dashboard.py"


def test_panels_have_unique_ids_and_refids():
    panels = h.dashboard()["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    for panel in panels:
        refs = [t["refId"] for t in panel.get("targets", [])]
        assert len(refs) == len(set(refs)), panel["title"]
        if panel["type"] != "row":
            assert panel.get("targets"), f"{panel['title']} queries nothing"


def test_panels_fit_the_grid_without_overlapping():
    cells: dict[tuple[int, int], str] = {}
    for panel in h.dashboard()["panels"]:
        pos = panel["gridPos"]
        assert 0 <= pos["x"] and pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = panel["title"]


def test_every_panel_uses_the_datasource_variable_defaulting_to_the_provisioned_uid():
    dash = h.dashboard()
    variable = next(v for v in dash["templating"]["list"] if v["name"] == "datasource")
    provisioned = yaml.safe_load(
        (h.DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yaml").read_text()
    )["datasources"]
    assert variable["current"]["value"] in {d["uid"] for d in provisioned}
    for panel in dash["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]


def test_the_provisioned_dashboard_folder_is_where_compose_mounts_the_json():
    provider = yaml.safe_load((h.DEPLOY / "grafana" / "provisioning" / "dashboards" / "triage.yaml").read_text())[
        "providers"
    ][0]
    compose = yaml.safe_load(h.COMPOSE_FILE.read_text())
    mounts = compose["services"]["grafana"]["volumes"]
    assert f"./grafana/dashboards:{provider['options']['path']}:ro" in mounts
    assert "./grafana/provisioning:/etc/grafana/provisioning:ro" in mounts


def test_objective_lines_match_the_alert_rules():
    builder = _builder()
    alerts = h.alerts()
    assert f"> {builder.END_TO_END_P95_OBJECTIVE_S}" in alerts["TriageEndToEndSlow"]["expr"]
    assert f"> {builder.ACCEPT_P99_OBJECTIVE_S}" in alerts["TriageAcceptSlow"]["expr"]
    assert f"< {builder.KAPPA_MIN}" in alerts["TriageAuditKappaLow"]["expr"]
