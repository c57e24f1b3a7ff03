"""Stratified sampling of recent results for the audit: every level represented, greens oversampled.

Greens are the decisions nobody reads, so they get most of the sample (green_share); the rest is
split evenly between yellow and red so that the judge's behaviour on those is seen too. Within a
stratum the draw is uniform, so the share of unacceptable greens in the sample is an unbiased
estimate of the false-green rate among greens. Pure: the caller passes the ids and an RNG.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable

import msgspec

from ..results import LEVELS


class Sample(msgspec.Struct, frozen=True):
    picked: dict[str, list[str]]  # level -> ticket ids drawn
    population: dict[str, int]  # level -> distinct ids available in the window

    @property
    def ids(self) -> list[tuple[str, str]]:
        return [(ticket_id, level) for level in LEVELS for ticket_id in self.picked[level]]


def allocate(population: dict[str, int], size: int, green_share: float) -> dict[str, int]:
    """How many to draw per level: green_share of `size` for greens, the rest split evenly
    between yellow and red; what one stratum cannot fill goes to the others."""
    if not 0.0 <= green_share <= 1.0:
        raise ValueError(f"green_share: expected a number in [0, 1], got {green_share}")
    size = min(size, sum(population.get(level, 0) for level in LEVELS))
    want = {"green": math.ceil(size * green_share)}
    rest = size - want["green"]
    want["yellow"] = rest - rest // 2
    want["red"] = rest // 2
    take = {level: min(want[level], population.get(level, 0)) for level in LEVELS}
    # Hand the shortfall to the strata that still have tickets, greens first.
    shortfall = size - sum(take.values())
    for level in LEVELS:
        extra = min(shortfall, population.get(level, 0) - take[level])
        take[level] += extra
        shortfall -= extra
    return take


def stratified_sample(
    results: Iterable[tuple[str, str]], size: int, rng: random.Random, green_share: float = 0.6
) -> Sample:
    """Draw `size` (ticket id, final level) pairs stratified by level; duplicates count once."""
    strata: dict[str, list[str]] = {level: [] for level in LEVELS}
    seen: set[str] = set()
    for ticket_id, level in results:
        if ticket_id in seen or level not in strata:
            continue
        seen.add(ticket_id)
        strata[level].append(ticket_id)
    population = {level: len(ids) for level, ids in strata.items()}
    take = allocate(population, size, green_share)
    picked = {level: rng.sample(strata[level], take[level]) for level in LEVELS}
    return Sample(picked=picked, population=population)
