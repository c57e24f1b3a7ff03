"""The recalibrate job without the model: decisions in real Redis to an artifact and its report,
refusals that leave the current artifact alone, the CLI."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
import structlog

from service.calibration import load_artifact, load_latest, recalibrate_commands
from service.calibration.calibrator import METHODS
from service.calibration.dataset import collect_decisions
from service.calibration.fit import FitConfig, Refused
from service.calibration.recalibrate import Options, fit_and_write, run
from service.l2.classifier import bundled_model_path, model_sha256
from service.results import ModelInfo
from service.store import Keys
from tests.calibration import stored
from tests.support import make_settings

MODEL = ModelInfo(name="m.gguf", sha256="e" * 64)
FAST = FitConfig(folds=3, cs=(1e-2, 1e-1), head_folds=2, min_per_class=5, methods=METHODS)


def test_fit_and_write_produces_artifact_and_report(redis_client, prefix, tmp_path):
    keys = Keys(prefix)
    stored.fill_decided(redis_client, keys, 150, model=MODEL, seed=3)
    examples, _ = collect_decisions(redis_client, keys, MODEL.sha256, stored.PROMPTS.sha)
    out = fit_and_write(
        examples,
        stored.PROMPTS.questions,
        tmp_path,
        cfg=FAST,
        model=MODEL,
        prompt_sha=stored.PROMPTS.sha,
        rules="r",
        command="triage recalibrate",
        sources={"decisions": len(examples)},
    )
    assert out.path.parent == tmp_path
    names = {p.name for p in out.path.iterdir()}
    assert {"artifact.json", "heads.npz", "report.md", "reliability-risk.png", "risk-thresholds.png"} <= names
    report = (out.path / "report.md").read_text()
    assert "## Levels: confusion matrices" in report and "Nested cross-validation" in report
    assert "urgency" in out.meta.skipped  # decisions carry no urgency labels
    cal = load_artifact(out.path)
    assert cal.thresholds.green == out.meta.thresholds.green
    loaded = load_latest(tmp_path, MODEL.sha256, stored.PROMPTS.sha)
    assert loaded.calibrator.version == out.meta.version
    assert (out.path / "reliability-risk.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_refusal_writes_nothing_and_keeps_the_current_artifact(redis_client, prefix, tmp_path, capsys, monkeypatch):
    settings = make_settings(prefix)
    model_path = bundled_model_path(settings)
    if not model_path.exists():
        pytest.skip("the bundled model file is needed for its sha256")
    keys = Keys(prefix)
    model = ModelInfo(name=model_path.name, sha256=model_sha256(model_path))
    rng = np.random.default_rng(4)
    proj = rng.normal(size=(6, stored.DIM))
    for i in range(20):  # 20 tickets cannot give 15 labels to every class
        label = stored.random_label(rng)
        stored.store_ticket(
            redis_client, keys, f"t{i}", label, model=model, prompt_sha=stored.PROMPTS.sha, rng=rng, proj=proj
        )
        stored.decide(redis_client, keys, f"t{i}", label["risk"])
    current = tmp_path / "20260101T000000Z-current"
    current.mkdir()
    (current / "artifact.json").write_text("{}")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    opts = Options(out=str(tmp_path), corpus=None, min_per_class=15)
    with pytest.raises(Refused, match="too few labels per class"):
        run(settings, opts, redis_client=redis_client)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    assert (current / "artifact.json").read_text() == "{}"
    # the CLI says so and exits non-zero
    monkeypatch.setenv("REDIS_URL", settings.redis_url)
    monkeypatch.setenv("TRIAGE_REDIS_PREFIX", prefix)
    monkeypatch.setenv("TRIAGE_LOG_LEVEL", "error")
    monkeypatch.setenv("TRIAGE_CALIBRATION_MIN_PER_CLASS", "12")  # the CLI's default comes from here
    try:
        code = _cli(["recalibrate", "--out", str(tmp_path), "--corpus", ""])
    finally:
        structlog.reset_defaults()  # the CLI configured logging for the whole process
    assert code == 3
    err = capsys.readouterr().err
    assert "refused: risk: too few labels per class (need 12)" in err
    assert "Nothing was written" in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def _parser():
    parser = argparse.ArgumentParser(prog="triage")
    sub = parser.add_subparsers(dest="command", required=True)
    recalibrate_commands.register(sub)
    return parser


def _cli(argv):
    args = _parser().parse_args(argv)
    return args.func(args)


def test_cli_options():
    args = _parser().parse_args(
        ["recalibrate", "--from-file", "f.jsonl", "--out", "d", "--folds", "4", "--min-per-class", "9"]
    )
    assert (args.from_file, args.out, args.folds, args.min_per_class) == (["f.jsonl"], "d", 4, 9)
    defaults = _parser().parse_args(["recalibrate"])
    assert defaults.folds == 5 and defaults.min_per_class is None and defaults.from_file is None
    for bad in (["--folds", "1"], ["--min-per-class", "0"], ["--folds", "x"]):
        with pytest.raises(SystemExit):
            _parser().parse_args(["recalibrate", *bad])


def test_green_after_l1_needs_labelled_files(capsys):
    assert _parser().parse_args(["recalibrate"]).green_after_l1 is False
    assert _cli(["recalibrate", "--green-after-l1"]) == 2
    assert "--green-after-l1 needs --from-file" in capsys.readouterr().err
