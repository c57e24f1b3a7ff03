"""The fitting procedure on synthetic labelled data: method choice, thresholds, refusals."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest

from service.calibration.calibrator import METHODS
from service.calibration.fit import FitConfig, Refused, calibrate, fit_all
from service.calibration.thresholds import GREEN
from tests.calibration.synth import dataset

FAST = FitConfig(folds=3, cs=(1e-2, 1e-1, 1.0), head_folds=2, min_per_class=5, methods=METHODS)


@pytest.fixture(scope="module")
def result():
    return calibrate(dataset(n=180, seed=1), FAST)


def test_each_question_keeps_the_lowest_cross_validated_nll(result):
    for name, fit in result.final.questions.items():
        scored = [c for c in fit.candidates if c.cv_nll is not None]
        assert fit.model.method == min(scored, key=lambda c: c.cv_nll).method, name
    # the features carry risk and the flags linearly: the head wins there
    assert result.final.questions["risk"].model.method == "head"


def test_calibration_lowers_ece_and_nll_out_of_sample(result):
    risk = result.reports["risk"]
    assert risk.ece_after < risk.ece_before
    assert risk.nll_after < risk.nll_before
    # urgency's logits are overconfident noise: temperature scaling must help calibration
    assert result.reports["urgency"].ece_after < result.reports["urgency"].ece_before


def test_thresholds_give_zero_false_greens_where_they_were_chosen(result):
    final = result.final
    assert final.selection.false_greens == 0
    assert final.thresholds.green >= 0.8  # 180 tickets cannot justify going under the floor
    assert final.red.target_reached and final.red.recall >= 0.9
    assert len(result.nested_thresholds) == FAST.folds


def test_a_noisy_yellow_flag_does_not_block_every_green(result):
    chosen = result.final.thresholds.yellow_flags["instructions"]
    p_instructions = result.final.probs["instructions"][:, 0]
    assert chosen > p_instructions.max() - 0.1  # above the noise the flag says to everyone
    assert result.final.yellow["instructions"].n_green > 0
    assert result.final.selection.green_rate > 0  # at the default 0.5 nothing would be green
    assert result.nested.green_rate > 0


def test_nested_evaluation_grades_every_labelled_ticket_once(result):
    assert result.nested.n == 180
    assert sum(map(sum, result.nested.confusion)) == 180
    assert np.isfinite(result.nested_probs["risk"]).all()


def test_too_few_labels_on_a_red_flag_refuses():
    data = dataset(n=120, seed=2)
    flag = data.questions["third_party_personal_data"]
    yes = np.flatnonzero(flag.labels == 0)
    flag.labels[yes[3:]] = 1  # keep 3 "yes"
    with pytest.raises(Refused, match="third_party_personal_data: too few labels.*yes 3"):
        fit_all(data, FAST)


def test_too_few_labels_on_a_secondary_question_skips_it():
    data = dataset(n=120, seed=3)
    urgency = data.questions["urgency"]
    urgency.labels[urgency.labels == 5] = 4
    cfg = FitConfig(folds=3, cs=(0.1,), head_folds=2, min_per_class=5, methods=("raw", "temperature"))
    out = fit_all(data, cfg)
    assert "urgency" not in out.questions
    assert "urgency: too few labels" in out.skipped["urgency"] and "5 0" in out.skipped["urgency"]


def test_a_risk_question_without_signal_is_a_degenerate_fit():
    data = dataset(n=120, seed=4)
    risk = data.questions["risk"]
    risk.logits[:] = np.array([-0.5, -1.0, -2.0])  # the same answer for every ticket
    risk.features[:] = 1.0
    risk.shared = None  # no other position to learn from either
    with pytest.raises(Refused, match="risk: degenerate fit"):
        fit_all(data, FitConfig(folds=3, cs=(0.1,), head_folds=2, min_per_class=5))


def test_without_hidden_states_scaling_is_chosen_and_softens_the_logits():
    data = dataset(n=150, seed=5, with_features=False)
    cfg = FitConfig(folds=3, min_per_class=5)
    out = fit_all(data, cfg)
    risk = out.questions["risk"]
    assert risk.model.method in ("temperature", "vector")
    assert risk.model.scaling.temperature > 2  # the synthetic logits are 4x too sharp
    head = next(c for c in risk.candidates if c.method == "head_all")
    assert head.cv_nll is None and head.error == "no hidden states"


def test_thresholds_only_look_at_the_logits_path():
    data = dataset(n=150, seed=6)
    # tickets whose risk came from generation: synthetic P(green) must not steer thresholds
    gen = np.flatnonzero(data.questions["risk"].labels != GREEN)[:10]
    data.risk_generated[gen] = 1
    data.questions["risk"].logits[gen] = np.nan
    out = fit_all(data, FitConfig(folds=3, cs=(0.1,), head_folds=2, min_per_class=5))
    assert out.green.n == len(data) - 10
    assert out.selection.false_greens == 0


def test_the_green_gate_is_fitted_and_graded_without_the_tickets_it_grades():
    data = dataset(n=200, seed=11)
    x = data.questions["risk"].features
    data.gate_x, data.gate_inputs = x.copy(), ("ticket@l11",)
    cfg = FitConfig(folds=3, cs=(0.1,), head_folds=2, min_per_class=5, gate_dims=4)
    out = fit_all(data, cfg)
    assert out.gate is not None and out.gate.info.inputs == ["ticket@l11"]
    green = data.questions["risk"].labels == 0
    # about 1 - quantile of the labelled greens are held back, measured without themselves
    assert 0.0 < out.gate_blocked[green].mean() < 0.2
    assert out.selection.false_greens == 0
    # a ticket without gate inputs can never be green
    data.gate_x[0] = np.nan
    assert fit_all(data, cfg).gate_blocked[0]


def test_the_fit_says_where_it_is():
    steps = []
    calibrate(dataset(n=150, seed=3), FAST, step=lambda *a: steps.append(a))
    questions = [q for stage, _, _, q in steps if stage == "final"]
    assert questions[:2] == ["risk", "commitment"]
    # then every outer fold of the nested evaluation, each over the same questions
    assert sorted({fold for stage, fold, _, _ in steps if stage == "nested"}) == [1, 2, 3]
    assert len(steps) == len(questions) * (1 + FAST.folds)


def test_with_too_few_greens_for_the_gate_nothing_is_green():
    data = dataset(n=120, seed=12)
    x = data.questions["risk"].features
    data.gate_x, data.gate_inputs = x.copy(), ("ticket@l11",)
    risk = data.questions["risk"].labels
    greens = np.flatnonzero(risk == GREEN)
    data.questions["risk"].labels[greens[8:]] = 1  # 8 greens left: too few to fit a gate
    out = fit_all(data, FitConfig(folds=3, cs=(0.1,), head_folds=2, min_per_class=5, gate_dims=4))
    assert out.gate is None and out.green.rule == "no_gate"
    assert out.thresholds.green > 1.0 and out.selection.green_rate == 0.0


def test_green_after_l1_chooses_the_threshold_on_tickets_l1_leaves_open():
    """With green_after_l1 the non-greens L1 raises (which cannot be green as served) no longer
    hold the green threshold up; without it, or without L1 levels, nothing changes."""
    data = dataset(n=180, seed=21)
    # no floor: the threshold is the one the non-greens' P(green) sets
    cfg = FitConfig(folds=3, cs=(0.1,), head_folds=2, min_per_class=5, green_floor=0.0)
    plain = fit_all(data, cfg)
    truth = data.questions["risk"].labels
    p_green = plain.probs["risk"][:, 0]
    non_green = np.flatnonzero(truth != GREEN)
    # L1 raises the five most confident non-greens: the ones that set the threshold
    raised = non_green[np.argsort(p_green[non_green])[-5:]]
    data.l1_raised = np.zeros(len(data), dtype=bool)
    data.l1_raised[raised] = True
    assert fit_all(data, cfg).green.threshold == plain.green.threshold  # off by default
    after = fit_all(data, msgspec.structs.replace(cfg, green_after_l1=True))
    assert after.green.threshold < plain.green.threshold
    assert after.green.n == plain.green.n - 5
    # no false green among the tickets L1 leaves open, where the threshold was chosen
    open_non_green = np.setdiff1d(non_green, raised)
    assert (p_green[open_non_green] < after.green.threshold).all()
