"""The replay around the model: real L1, calibration artifacts, files; one run with the real
model (marked `model`)."""

from __future__ import annotations

import json
import sys

import pytest

from service.evaluation import run
from service.l2.classifier import Classification
from service.l2.decision import Thresholds
from service.labelled import LabelledFileError, LabelledTicket, read_labelled
from service.results import L2Result
from service.settings import PROJECT_ROOT
from tests.evaluation.support import FixedL2

OUT_KEYS = {
    "n",
    "accuracy",
    "false_greens",
    "missed_reds",
    "over_escalations",
    "red_recall",
    "category_accuracy",
    "ece_risk",
    "confusion",
    "per_language",
    "l1_only",
    "l2_only",
    "latency_ms",
    "model",
    "prompt_sha",
    "rules_sha",
    "calibrated",
    # what a helpdesk reads first
    "answered_automatically",
    "greens_cleared",
    "false_green_ids",
    "greens_escalated",
    "greens_escalated_share",
    "blocked_by_ood",
    "per_category",
    "thresholds",
}

RECORDS = [
    LabelledTicket(
        id="E-1",
        language="en",
        subject="Export",
        body="How do I export my invoices as PDF?",
        risk="green",
        category="billing",
    ),
    LabelledTicket(
        id="E-2",
        language="en",
        subject="Delete",
        body="Delete my account and all of its data today.",
        risk="red",
        category="account",
        flags={"destructive_or_access": True},
    ),
]


def test_replay_grades_l1_and_l2_together():
    from tests.support import make_settings

    settings = make_settings("evalx")
    yellow = L2Result(level="yellow", method="logits", reason="P(green)=0.50 < 0.80")
    report, rows = run.run_eval(settings, RECORDS, classifier=FixedL2(yellow))
    assert OUT_KEYS <= set(report)
    assert report["rules_sha"] == run.L1(settings.rules_dir).sha and len(report["rules_sha"]) == 64
    assert rows[1]["predicted"] == "red" and rows[1]["rules"]  # L1 fires on "delete my account"
    assert rows[0]["predicted"] == "yellow"
    assert report["greens_cleared"] == 0.0 and report["thresholds"]["green"] == Thresholds().green
    json.dumps(report)


def test_make_row_reads_the_ood_gate_from_the_result():
    from service.l1 import evaluate, load_pack

    class Gated(L2Result):  # the gate's field, however the L2 result ends up carrying it
        ood_blocked: bool = False

    l1_result = evaluate(load_pack(PROJECT_ROOT / "rules"), "How do I export invoices?")
    out = Classification(result=Gated(level="yellow", method="logits", ood_blocked=True))
    assert run.make_row(RECORDS[0], l1_result, out, 1.0)["ood_blocked"] is True
    plain = Classification(result=L2Result(level="green", method="logits"))
    assert run.make_row(RECORDS[0], l1_result, plain, 1.0)["ood_blocked"] is False


def test_a_missing_l1_is_an_error_not_a_key(monkeypatch):
    monkeypatch.setitem(sys.modules, "service.l1", None)  # import service.l1 -> ImportError
    with pytest.raises(run.EvalError, match="L1 cannot be imported"):
        run.L1(str(PROJECT_ROOT / "rules"))


def test_an_invalid_rule_pack_is_an_error(tmp_path):
    (tmp_path / "broken.yaml").write_text("rules: [{id: x, pattern: '('}]\n")
    with pytest.raises(run.EvalError, match="invalid"):
        run.L1(str(tmp_path))


def test_read_labelled_names_the_bad_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "A", "body": "x", "risk": "green"}\n{"id": "B", "body": "x"}\n')
    with pytest.raises(LabelledFileError, match=r"bad.jsonl:2"):
        read_labelled(path)


def test_write_halves_splits_each_label_evenly_and_copies_lines(tmp_path):
    lines = [
        json.dumps({"id": f"T-{i:02d}", "body": f"ticket {i}", "risk": risk})
        for i, risk in enumerate(["green"] * 4 + ["yellow"] * 3 + ["red"] * 2)
    ]
    source = tmp_path / "dev.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tune, holdout = run.write_halves(source, tmp_path / "out")
    assert (tune.name, holdout.name) == ("dev-tune.jsonl", "dev-holdout.jsonl")
    tune_lines = tune.read_text().splitlines()
    holdout_lines = holdout.read_text().splitlines()
    assert sorted(tune_lines + holdout_lines) == sorted(lines)
    assert [json.loads(x)["risk"] for x in tune_lines].count("green") == 2
    assert [json.loads(x)["risk"] for x in tune_lines].count("yellow") == 2  # dealt tune first
    assert [json.loads(x)["risk"] for x in holdout_lines].count("red") == 1


# ---------------------------------------------------------------------- calibration to apply
class _Identity:
    """Stands in for the classifier: calibration loading reads only its model and prompt sha."""

    def __init__(self, model_sha: str, prompt_sha: str) -> None:
        self.model_info = type("Info", (), {"sha256": model_sha})()
        self.prompt_sha = prompt_sha


def _bundled_artifact():
    found = sorted(p for p in (PROJECT_ROOT / "calibration").iterdir() if (p / "artifact.json").exists())
    assert found, "the bundled calibration artifact is missing"
    return found[-1], json.loads((found[-1] / "artifact.json").read_text())


def test_eval_calibration_loads_the_artifact_made_for_this_model_and_prompt():
    path, meta = _bundled_artifact()
    calibrator = run.load_calibration(str(path), _Identity(meta["model"]["sha256"], meta["prompt_sha"]))
    assert calibrator.prompt_sha == meta["prompt_sha"]
    assert calibrator.thresholds.green == pytest.approx(meta["thresholds"]["green"])


@pytest.mark.parametrize("stale", ["model", "prompt"])
def test_eval_calibration_refuses_a_stale_artifact(stale):
    path, meta = _bundled_artifact()
    model_sha = "0" * 64 if stale == "model" else meta["model"]["sha256"]
    prompt_sha = "0" * 64 if stale == "prompt" else meta["prompt_sha"]
    with pytest.raises(run.EvalError, match="stale"):
        run.load_calibration(str(path), _Identity(model_sha, prompt_sha))


def test_eval_calibration_names_an_unreadable_artifact(tmp_path):
    with pytest.raises(run.EvalError, match=str(tmp_path)):
        run.load_calibration(str(tmp_path), _Identity("a", "b"))


def test_eval_defaults_to_the_artifact_the_worker_would_load(tmp_path):
    from tests.support import make_settings

    said: list[str] = []
    path, meta = _bundled_artifact()
    identity = _Identity(meta["model"]["sha256"], meta["prompt_sha"])
    bundled = make_settings("evalcal", calibration_dir=str(path.parent))
    served = run.served_calibration(bundled, identity, said.append)
    assert served is not None and served.version == meta["version"]
    # another model: the worker would serve raw logits, and so does eval
    other = _Identity("0" * 64, meta["prompt_sha"])
    assert run.served_calibration(bundled, other, said.append) is None
    empty = make_settings("evalcal", calibration_dir=str(tmp_path))
    assert run.served_calibration(empty, identity, said.append) is None
    assert said[-1] == "calibration: none (raw logits)"


@pytest.mark.model
def test_eval_end_to_end_on_two_tickets(tmp_path):
    from service.evaluation.report import table
    from service.settings import load_settings
    from tests.l2.support import shared_classifier

    report, rows = run.run_eval(load_settings(), RECORDS, classifier=shared_classifier())
    assert OUT_KEYS <= set(report)
    assert report["n"] == 2 and len(rows) == 2
    assert report["model"]["name"].endswith(".gguf") and len(report["prompt_sha"]) == 64
    assert len(report["rules_sha"]) == 64
    assert "destructive" in " ".join(rows[1]["rules"])  # L1 fires on "delete my account"
    assert rows[1]["predicted"] == "red"
    for r in rows:
        assert {"id", "truth", "predicted", "probabilities", "rules", "ood_blocked"} <= set(r)
        assert set(r["probabilities"]["risk"]) == {"green", "yellow", "red"}
    run.write_rows(tmp_path / "rows.jsonl", rows)
    assert len(run.read_rows(tmp_path / "rows.jsonl")) == 2
    json.dumps(report)  # the report is plain JSON
    assert "L1 + L2 (final)" in table(report)
