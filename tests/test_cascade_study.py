"""The cascade study's decision (scripts/cascade_study.py): the issue's bar, on known inputs."""

from __future__ import annotations

from tests.support import load_script

cascade = load_script("cascade_study")


def _graded(before: float, after: float, fg_before: int, fg_after: int, share: float) -> dict:
    return {
        "band_share": share,
        "without": {"greens_cleared": before, "false_greens": fg_before},
        "with": {"greens_cleared": after, "false_greens": fg_after},
    }


def test_ships_only_with_more_greens_no_new_false_green_and_the_time_bound_everywhere():
    good = _graded(0.5, 0.6, 0, 0, 0.1)
    assert cascade._decide({"dev": good, "public-style": good}, 1.85)["ship"] is True
    # one more false green on one source is enough to refuse
    worse = _graded(0.5, 0.7, 0, 1, 0.1)
    assert cascade._decide({"dev": good, "public-style": worse}, 1.85)["ship"] is False
    # no gain anywhere: nothing to pay for
    same = _graded(0.5, 0.5, 0, 0, 0.1)
    assert cascade._decide({"dev": same}, 1.85)["ship"] is False
    # a band so wide that the 1.5B's time pushes the mean past 1.5x
    wide = _graded(0.5, 0.8, 0, 0, 0.3)
    decision = cascade._decide({"dev": wide}, 1.85)
    assert decision["ship"] is False
    assert abs(decision["per_source"]["dev"]["mean_time_ratio"] - 1.555) < 1e-9
