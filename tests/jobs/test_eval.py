"""`triage eval`: the metric maths as tables (pure), and one small run through L1 + the real model."""

from __future__ import annotations

import json
import math

import pytest

from service.jobs import eval as ev
from service.l2.decision import Thresholds
from service.labelled import LabelledFileError, LabelledTicket, read_labelled

OUT_KEYS = {"n", "accuracy", "false_greens", "missed_reds", "over_escalations", "red_recall",
            "category_accuracy", "ece_risk", "confusion", "per_language", "l1_only", "l2_only",
            "latency_ms", "model", "prompt_sha", "rules_sha", "calibrated"}


def test_risk_metrics_counts_each_error_kind():
    truth = ["green", "green", "yellow", "yellow", "red", "red", "red"]
    pred = ["green", "yellow", "green", "yellow", "yellow", "red", "green"]
    m = ev.risk_metrics(truth, pred)
    assert m["n"] == 7
    assert m["accuracy"] == pytest.approx(3 / 7)
    assert m["false_greens"] == 2  # yellow->green, red->green
    assert m["missed_reds"] == 2  # red->yellow, red->green
    assert m["over_escalations"] == 1  # green->yellow
    assert m["red_recall"] == pytest.approx(1 / 3)
    assert m["confusion"]["red"] == {"green": 1, "yellow": 1, "red": 1}
    assert sum(sum(row.values()) for row in m["confusion"].values()) == 7


def test_red_recall_is_none_without_reds():
    assert ev.risk_metrics(["green"], ["green"])["red_recall"] is None


@pytest.mark.parametrize(("conf", "ok", "expected"), [
    ([0.9, 0.9, 0.9, 0.9], [True, True, True, False], 0.15),  # one bin: |0.75 - 0.9|
    ([1.0, 1.0], [True, True], 0.0),  # confidence 1.0 falls in the last bin
    ([0.05, 0.95], [False, True], 0.05),  # two bins, each off by 0.05, weight 1/2
    ([], [], None),
])
def test_ece_equal_width_bins(conf, ok, expected):
    got = ev.ece(conf, ok)
    assert (got is None) if expected is None else math.isclose(got, expected, abs_tol=1e-12)


def test_ece_uses_15_bins():
    # 0.48 and 0.52 share bin 7 of 15 (accuracy 0.5 = mean confidence 0.5: no error) but fall
    # in bins 9 and 10 of 20 (each off by 0.52, weight 1/2)
    assert ev.ece([0.48, 0.52], [True, False]) == pytest.approx(0.0)
    assert ev.ece([0.48, 0.52], [True, False], n_bins=20) == pytest.approx(0.52)


def test_percentile_interpolates():
    assert ev.percentile([10, 20, 30, 40], 50) == 25
    assert ev.percentile([5], 95) == 5
    assert ev.percentile([], 50) is None


def row(i, truth, pred, l1="none", l2=None, lang="en", **extra):
    base = {"id": f"T-{i:03d}", "truth": truth, "predicted": pred, "l1": l1, "l2": l2 or pred,
            "language": lang, "category_truth": "billing", "category": "billing",
            "latency_ms": 100.0 + i, "method": "logits"}
    base.update(extra)
    return base


def test_halves_are_stratified_and_disjoint():
    rows = [row(i, ["green", "yellow", "red"][i % 3], "red") for i in range(30)]
    tune, holdout = ev.halves(rows)
    assert not tune & holdout and len(tune | holdout) == 30
    for label in ("green", "yellow", "red"):
        ids = {r["id"] for r in rows if r["truth"] == label}
        assert len(ids & tune) == len(ids & holdout) == 5


def test_summarize_layers_and_languages():
    rows = [row(0, "green", "green", l1="none", l2="green", lang="en"),
            row(1, "red", "red", l1="red", l2="yellow", lang="fr"),
            row(2, "yellow", "red", l1="none", l2="red", lang="fr")]
    s = ev.summarize(rows)
    assert s["l1_only"]["accuracy"] == pytest.approx(2 / 3)  # none counts as green
    assert s["l2_only"]["accuracy"] == pytest.approx(1 / 3)
    assert s["accuracy"] == pytest.approx(2 / 3)
    assert s["per_language"]["fr"]["n"] == 2 and s["per_language"]["fr"]["accuracy"] == 0.5
    assert s["latency_ms"]["p50"] == 101.0


def answers(p_green, p_red, flag=0.1):
    def boolean(p):
        return {"kind": "boolean", "options": ["yes", "no"], "chosen": "no",
                "probabilities": {"yes": p, "no": 1 - p}, "probability": p, "coverage": 0.9}
    risk = {"kind": "choice", "options": ["green", "yellow", "red"], "chosen": "green",
            "probabilities": {"green": p_green, "yellow": 1 - p_green - p_red, "red": p_red},
            "coverage": 0.9}
    return {"risk": risk, "commitment": boolean(flag), "destructive_or_access": boolean(0.1),
            "third_party_personal_data": boolean(0.1), "instructions": boolean(0.1)}


def test_relevel_applies_other_thresholds_and_keeps_l1():
    rows = [row(0, "green", "yellow", l1="none", l2="yellow", answers=answers(0.7, 0.1)),
            row(1, "red", "red", l1="red", l2="yellow", answers=answers(0.7, 0.1))]
    loose = ev.relevel(rows, Thresholds(green=0.6))
    assert [r["l2"] for r in loose] == ["green", "green"]
    assert [r["predicted"] for r in loose] == ["green", "red"]  # L1's red is never lowered


def test_relevel_with_one_option_order():
    variant = answers(0.95, 0.01)["risk"]
    rows = [row(0, "green", "red", l2="red", answers=answers(0.4, 0.4),
                risk_variants={"risk": variant})]
    assert ev.relevel(rows, Thresholds())[0]["l2"] == "red"
    assert ev.relevel(rows, Thresholds(), variant="risk")[0]["l2"] == "green"


def test_read_labelled_names_the_bad_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "A", "body": "x", "risk": "green"}\n{"id": "B", "body": "x"}\n')
    with pytest.raises(LabelledFileError, match=r"bad.jsonl:2"):
        read_labelled(path)


@pytest.mark.model
def test_eval_end_to_end_on_two_tickets(tmp_path):
    from service.settings import load_settings
    from tests.l2.support import shared_classifier

    records = [LabelledTicket(id="E-1", language="en", subject="Export",
                                 body="How do I export my invoices as PDF?", risk="green",
                                 category="billing"),
               LabelledTicket(id="E-2", language="en", subject="Delete",
                                 body="Delete my account and all of its data today.",
                                 risk="red", category="account",
                                 flags={"destructive_or_access": True})]
    report, rows = ev.run_eval(load_settings(), records, classifier=shared_classifier())
    assert OUT_KEYS <= set(report)
    assert report["n"] == 2 and len(rows) == 2
    assert report["model"]["name"].endswith(".gguf") and len(report["prompt_sha"]) == 64
    if report["l1_present"]:
        assert len(report["rules_sha"]) == 64
        assert "destructive" in " ".join(rows[1]["rules"])  # L1 fires on "delete my account"
        assert rows[1]["predicted"] == "red"
    for r in rows:
        assert {"id", "truth", "predicted", "probabilities", "rules"} <= set(r)
        assert set(r["probabilities"]["risk"]) == {"green", "yellow", "red"}
    ev.write_rows(tmp_path / "rows.jsonl", rows)
    assert len((tmp_path / "rows.jsonl").read_text().splitlines()) == 2
    json.dumps(report)  # the report is plain JSON
    assert "L1 + L2 (final)" in ev.table(report)


def test_threshold_sweep_never_buys_accuracy_with_false_greens():
    rows = []
    for i in range(40):
        truth = ["green", "yellow", "red", "green"][i % 4]
        # greens at P(green) 0.75, yellows at 0.6: green = 0.7 separates them, 0.6 would let
        # every yellow through as a false green; reds carry P(red) 0.5
        p_green, p_red = {"green": (0.75, 0.1), "yellow": (0.6, 0.1), "red": (0.3, 0.5)}[truth]
        rows.append(row(i, truth, "red", l1="none", l2="red", answers=answers(p_green, p_red)))
    out = ev.sweep_thresholds(rows)
    assert out["chosen"]["green"] == 0.7
    assert out["tune"]["false_greens"] == 0 and out["tune"]["accuracy"] == 1.0
    assert out["holdout"]["n"] == 20 and out["holdout"]["false_greens"] == 0


def test_permutation_study_compares_one_order_with_the_average():
    one = answers(0.9, 0.05)["risk"]
    rows = [row(i, "green", "red", l2="red", answers=answers(0.5, 0.35),
                risk_variants={"risk": one, "risk@1": answers(0.1, 0.65)["risk"]})
            for i in range(4)]
    out = ev.permutation_study(rows)
    assert out["orders"] == ["risk", "risk@1"]
    assert out["one_order"]["l2_accuracy"] == 1.0  # the canonical order alone says green
    assert out["averaged"]["l2_accuracy"] == 0.0


@pytest.mark.parametrize(("scores", "labels", "expected"), [
    ([0.9, 0.8, 0.2, 0.1], [True, True, False, False], 1.0),
    ([0.1, 0.2, 0.8, 0.9], [True, True, False, False], 0.0),
    ([0.5, 0.5, 0.5, 0.5], [True, False, True, False], 0.5),  # ties count half
    ([0.9, 0.3, 0.5], [True, False, True], 1.0),
    ([0.4], [True], None),
])
def test_auc(scores, labels, expected):
    assert ev.auc(scores, labels) == expected


class _Identity:
    """Stands in for the classifier: `load_calibration` reads only its model sha and prompt sha."""

    def __init__(self, model_sha: str, prompt_sha: str) -> None:
        self.model_info = type("Info", (), {"sha256": model_sha})()
        self.prompt_sha = prompt_sha


def _bundled_artifact():
    from service.settings import PROJECT_ROOT

    found = sorted(p for p in (PROJECT_ROOT / "calibration").iterdir() if (p / "artifact.json").exists())
    assert found, "the bundled calibration artifact is missing"
    return found[-1], json.loads((found[-1] / "artifact.json").read_text())


def test_eval_calibration_loads_the_artifact_made_for_this_model_and_prompt(capsys):
    path, meta = _bundled_artifact()
    calibrator = ev.load_calibration(str(path), _Identity(meta["model"]["sha256"], meta["prompt_sha"]))
    assert calibrator is not None
    assert calibrator.prompt_sha == meta["prompt_sha"]
    assert calibrator.thresholds.green == pytest.approx(meta["thresholds"]["green"])


@pytest.mark.parametrize("stale", ["model", "prompt"])
def test_eval_calibration_refuses_a_stale_artifact(capsys, stale):
    path, meta = _bundled_artifact()
    model_sha = "0" * 64 if stale == "model" else meta["model"]["sha256"]
    prompt_sha = "0" * 64 if stale == "prompt" else meta["prompt_sha"]
    assert ev.load_calibration(str(path), _Identity(model_sha, prompt_sha)) is None
    assert "stale" in capsys.readouterr().err


def test_eval_calibration_names_an_unreadable_artifact(tmp_path, capsys):
    assert ev.load_calibration(str(tmp_path), _Identity("a", "b")) is None
    assert str(tmp_path) in capsys.readouterr().err


def test_eval_defaults_to_the_artifact_the_worker_would_load(tmp_path, capsys):
    from tests.support import make_settings

    path, meta = _bundled_artifact()
    identity = _Identity(meta["model"]["sha256"], meta["prompt_sha"])
    served = ev.served_calibration(make_settings("evalcal", calibration_dir=str(path.parent)), identity)
    assert served is not None and served.version == meta["version"]
    # another model: the worker would serve raw logits, and so does eval
    other = _Identity("0" * 64, meta["prompt_sha"])
    assert ev.served_calibration(make_settings("evalcal", calibration_dir=str(path.parent)), other) is None
    assert ev.served_calibration(make_settings("evalcal", calibration_dir=str(tmp_path)), identity) is None
    assert "none (raw logits)" in capsys.readouterr().err


def test_write_halves_splits_each_label_evenly_and_copies_lines(tmp_path):
    lines = [json.dumps({"id": f"T-{i:02d}", "body": f"ticket {i}", "risk": risk})
             for i, risk in enumerate(["green"] * 4 + ["yellow"] * 3 + ["red"] * 2)]
    source = tmp_path / "dev.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tune, holdout = ev.write_halves(source, tmp_path / "out")
    assert (tune.name, holdout.name) == ("dev-tune.jsonl", "dev-holdout.jsonl")
    tune_lines = tune.read_text().splitlines()
    holdout_lines = holdout.read_text().splitlines()
    assert sorted(tune_lines + holdout_lines) == sorted(lines)
    assert [json.loads(x)["risk"] for x in tune_lines].count("green") == 2
    assert [json.loads(x)["risk"] for x in tune_lines].count("yellow") == 2  # dealt tune first
    assert [json.loads(x)["risk"] for x in holdout_lines].count("red") == 1
