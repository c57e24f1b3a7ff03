"""Sampling stratification: greens oversampled, every level present, shortfalls redistributed."""

from __future__ import annotations

import random

import pytest

from service.audit.sampling import allocate, stratified_sample


def _results(green: int, yellow: int, red: int) -> list[tuple[str, str]]:
    return (
        [(f"g{i}", "green") for i in range(green)]
        + [(f"y{i}", "yellow") for i in range(yellow)]
        + [(f"r{i}", "red") for i in range(red)]
    )


def test_greens_oversampled_relative_to_population() -> None:
    # Population: 20 % green. Sample: 60 % green, yellow and red split evenly.
    sample = stratified_sample(_results(200, 500, 300), 50, random.Random(1))
    sizes = {level: len(ids) for level, ids in sample.picked.items()}
    assert sizes == {"green": 30, "yellow": 10, "red": 10}
    assert sample.population == {"green": 200, "yellow": 500, "red": 300}
    assert all(ticket.startswith("g") for ticket in sample.picked["green"])
    assert all(ticket.startswith("r") for ticket in sample.picked["red"])


def test_shortfall_goes_to_other_strata() -> None:
    assert allocate({"green": 5, "yellow": 100, "red": 2}, 20, 0.6) == {"green": 5, "yellow": 13, "red": 2}
    assert allocate({"green": 100, "yellow": 1, "red": 0}, 10, 0.6) == {"green": 9, "yellow": 1, "red": 0}
    # Fewer tickets than asked: take them all.
    assert allocate({"green": 2, "yellow": 1, "red": 1}, 50, 0.6) == {"green": 2, "yellow": 1, "red": 1}


def test_duplicates_and_unknown_levels_ignored_and_draw_is_reproducible() -> None:
    results = _results(10, 10, 10) + [("g1", "green"), ("x", "processing")]
    first = stratified_sample(results, 10, random.Random(7))
    again = stratified_sample(results, 10, random.Random(7))
    assert first == again
    assert first.population == {"green": 10, "yellow": 10, "red": 10}
    assert len(set(first.picked["green"])) == len(first.picked["green"]) == 6


def test_each_green_equally_likely() -> None:
    # Uniform within the stratum: over many draws every green is picked about as often.
    counts = dict.fromkeys((f"g{i}" for i in range(10)), 0)
    rng = random.Random(0)
    for _ in range(2000):
        for ticket in stratified_sample(_results(10, 5, 5), 5, rng).picked["green"]:
            counts[ticket] += 1
    assert max(counts.values()) - min(counts.values()) < 0.25 * (2000 * 3 / 10)


def test_green_share_validated() -> None:
    with pytest.raises(ValueError, match="green_share"):
        allocate({"green": 1}, 1, 1.5)
