"""The green gate on synthetic hidden states with a known answer."""

from __future__ import annotations

import numpy as np
import pytest

from service.calibration.ood import GreenGate, fit_gate, fitted_distances


def _cloud(rng, n, centre, d=20):
    return rng.normal(size=(n, d)) + centre


@pytest.fixture
def gate_and_data():
    rng = np.random.default_rng(1)
    greens = _cloud(rng, 300, 0.0)
    others = _cloud(rng, 300, 0.0) + np.r_[3.0, np.zeros(19)]  # nearby, same style
    x = np.vstack([greens, others])
    green = np.r_[np.ones(300, bool), np.zeros(300, bool)]
    return fit_gate(x, green, ["ticket@l11"], dims=10, k=5, quantile=0.95), x, green, rng


def test_the_gate_costs_about_its_quantile_in_distribution(gate_and_data):
    gate, x, green, rng = gate_and_data
    assert gate.info.greens_blocked == pytest.approx(0.05, abs=0.01)
    fresh = _cloud(rng, 2000, 0.0)  # new greens drawn like the labelled ones
    blocked = gate.distances(fresh) > gate.info.threshold
    assert blocked.mean() == pytest.approx(0.05, abs=0.03)


def test_a_ticket_unlike_every_labelled_green_is_held_back(gate_and_data):
    gate, _x, _green, rng = gate_and_data
    far = _cloud(rng, 200, 0.0) + 8.0  # another style: shifted on every axis
    assert (gate.distances(far) > gate.info.threshold).all()


def test_fitted_greens_are_measured_without_themselves(gate_and_data):
    gate, x, green, _rng = gate_and_data
    own = fitted_distances(gate, x, green)
    assert (own[green] > 0).all()  # else every green would sit at distance 0 of itself
    assert (own[green] > gate.info.threshold).mean() == pytest.approx(gate.info.greens_blocked)


def test_check_reads_its_inputs_by_name_and_fails_closed(gate_and_data):
    gate, x, _green, _rng = gate_and_data
    allowed, distance = gate.check({"ticket@l11": x[0]})
    assert distance is not None and allowed == (distance <= gate.info.threshold)
    assert gate.check({}) == (False, None)  # missing feature: not allowed
    assert gate.check({"ticket@l11": x[0][:5]}) == (False, None)  # misshapen


def test_the_arrays_round_trip(gate_and_data):
    gate, x, _green, _rng = gate_and_data
    again = GreenGate(gate.info, **gate.arrays)
    np.testing.assert_array_equal(again.distances(x[:10]), gate.distances(x[:10]))
    with pytest.raises(ValueError):
        GreenGate(gate.info, gate.mean, gate.scale, gate.basis[:3], gate.references)


def test_too_few_greens_are_refused():
    x = np.random.default_rng(0).normal(size=(20, 4))
    with pytest.raises(ValueError, match="too few"):
        fit_gate(x, np.r_[np.ones(3, bool), np.zeros(17, bool)], ["x"])
