"""scripts/served_rule_effect.py: which artifact grades which source, and the refusals before any
grading (the grading itself is `triage study served`, tested on its own)."""

from __future__ import annotations

import pytest

from tests.support import load_script

effect = load_script("served_rule_effect")

SERVED = {
    "runs": [
        {"graded": "dev", "fitted_on": "train + public-style", "green_after_l1": False, "artifact": "A"},
        {"graded": "public-style", "fitted_on": "train + dev", "green_after_l1": False, "artifact": "B"},
        {"graded": "public-style-held", "fitted_on": "train + dev", "green_after_l1": False, "artifact": "B"},
        {"graded": "public-style", "fitted_on": "train + dev", "green_after_l1": True, "artifact": "C"},
    ]
}


def test_each_artifact_grades_the_sources_it_was_not_fitted_on_threshold_as_shipped():
    artifacts = effect._artifacts(SERVED)
    served = effect.ROOT / "var" / "served"
    assert artifacts == {
        served / "fit-train+public-style" / "A": ["dev"],
        served / "fit-train+dev" / "B": ["public-style", "public-style-held"],
    }


def test_a_rule_file_outside_the_pack_is_refused(tmp_path, capsys):
    stray = tmp_path / "stray.yaml"
    stray.write_text("rules: []\n", encoding="utf-8")
    assert effect.main(["--rule", str(stray), "--name", "x"]) == 2
    assert "is not a file of" in capsys.readouterr().err


def test_without_a_served_run_it_says_which_command_makes_one(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(effect, "SERVED", tmp_path / "missing.json")
    assert effect.main(["--rule", str(effect.ROOT / "rules" / "green_evidence.yaml"), "--name", "x"]) == 2
    assert "make served" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--name", "x"], ["--rule", "rules/green_evidence.yaml"]])
def test_both_arguments_are_required(argv):
    with pytest.raises(SystemExit):
        effect.main(argv)
