"""The study's measurements on synthetic sources with a known answer (no model)."""

from __future__ import annotations

import numpy as np
import pytest

from service.calibration import study
from service.calibration.replay import Example

QUESTIONS = ["risk", "category"]
RISK = ("green", "yellow", "red")


CENTRES = (np.r_[4.0, np.zeros(15)], np.r_[0.0, 4.0, np.zeros(14)], np.r_[0.0, 0.0, 4.0, np.zeros(13)])


def _source(
    name: str, n: int, rng: np.random.Generator, shift: float | np.ndarray = 0.0, centres: tuple = CENTRES
) -> list[Example]:
    """Tickets whose layer-11 mean carries the risk label (centres: green, yellow, red); `shift`
    moves a whole source away (another writing style)."""
    out = []
    for i in range(n):
        y = int(rng.choice(3, p=[0.4, 0.35, 0.25]))
        v = centres[y] + rng.normal(size=16) + shift
        out.append(
            Example(
                id=f"{name}-{i}",
                source=name,
                text_sha=f"{name}{i}",
                labels={"risk": RISK[y]},
                answers={},
                features={"ticket@l11": v.astype(np.float32)},
                language="en",
            )
        )
    return out


@pytest.fixture(scope="module")
def sources():
    rng = np.random.default_rng(0)
    return {
        "train": _source("train", 400, rng),
        "dev": _source("dev", 150, rng),
        "far": _source("far", 150, rng, shift=12.0),
    }


def test_features_fitted_on_one_source_graded_on_the_others(sources):
    report = study.feature_study(sources, "train", ["dev", "far"], ["ticket@mid"], QUESTIONS, 24, "ticket@mid")
    row = report["sets"]["ticket@mid"]
    assert row["n_train"] == 400 and row["dims"] == 16
    dev = row["graded"]["dev"]
    assert dev["auc_green"] > 0.95 and dev["false_greens"] == 0 and dev["greens_cleared"] > 0.5
    # a source unlike every labelled green: the gate holds all of it back
    far = row["graded"]["far"]
    assert far["greens_cleared"] == 0.0 and far["false_greens"] == 0
    over = far["blocked_by_gate"]  # over the threshold but held back
    assert far["false_greens_without_gate"] == far["non_greens_blocked_by_gate"] <= over


def test_each_source_is_graded_by_a_fit_on_the_others(sources):
    report = study.cross_source(
        {"train": sources["train"], "dev": sources["dev"]}, "ticket@mid", "ticket@mid", QUESTIONS, 24
    )
    assert report["held_out"]["dev"]["trained_on"] == ["train"]
    assert report["held_out"]["train"]["n"] == 400
    dev = report["held_out"]["dev"]
    band = dev["under_threshold_band"]
    # the band sits under the threshold: its greens are not among those cleared
    cleared = round(dev["greens_cleared"] * dev["greens"])
    assert band["from"] == study.CASCADE_BAND_FROM and band["greens"] + cleared <= dev["greens"]
    assert band["non_greens"] + dev["false_greens"] <= dev["n"] - dev["greens"]


def test_the_learning_curve_refits_on_growing_subsets(sources):
    curve = study.learning_curve(
        sources["train"], {"dev": sources["dev"]}, "ticket@mid", None, QUESTIONS, 24, sizes=(50, 200), repeats=2
    )
    sizes = [p["labels"] for p in curve["points"]]
    assert sizes.count(50) == 2 and sizes.count(200) == 2 and sizes[-1] == 400
    assert all(0.0 <= p["dev"]["greens_cleared"] <= 1.0 for p in curve["points"])


def test_bagged_heads_give_green_only_as_far_as_every_resample_agrees(sources):
    tr = study.arrays(sources["train"], ("ticket@l11",))
    bagged = study.BaggedHead(tr.x, tr.y, (0.1,), seed=0, heads=4)
    graded = study.arrays(sources["dev"], ("ticket@l11",))
    p = bagged.predict_proba(graded.x)
    each = np.stack([head.predict_proba(graded.x) for head in bagged.heads])
    assert len(bagged.heads) == 4
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    np.testing.assert_allclose(p[:, study.GREEN], each[:, :, study.GREEN].min(axis=0))
    # the heads differ (bootstrap resamples), so the lowest is below their mean somewhere
    assert (p[:, study.GREEN] < each[:, :, study.GREEN].mean(axis=0) - 1e-6).any()


def test_each_source_is_graded_with_the_head_asked_for(sources):
    report = study.cross_source(
        {"train": sources["train"], "dev": sources["dev"]}, "ticket@mid", "ticket@mid", QUESTIONS, 24, head="bagged"
    )
    assert report["head"] == "bagged"
    dev = report["held_out"]["dev"]
    assert dev["false_greens"] == 0 and dev["greens_cleared"] > 0.5


def test_the_cli_offers_every_head_the_study_knows():
    import argparse

    from service.calibration import study_commands

    parser = argparse.ArgumentParser()
    study_commands.register(parser.add_subparsers())
    choices = next(a for a in parser._subparsers._group_actions[0].choices["study"]._actions if a.dest == "head")
    assert tuple(choices.choices) == study.HEAD_KINDS


def _styled(name: str, n: int, rng: np.random.Generator, shift: float, confusable: bool) -> list[Example]:
    """Like _source, in its own region of the space; `confusable`: its yellows sit half-way to its
    greens (vendor-voice yellows that read like product questions), so its own zero-false-green
    threshold is high."""
    yellow = np.r_[2.5, 1.5, np.zeros(14)] if confusable else CENTRES[1]
    return _source(name, n, rng, np.r_[np.zeros(8), np.full(8, shift)], (CENTRES[0], yellow, CENTRES[2]))


@pytest.fixture(scope="module")
def styled():
    rng = np.random.default_rng(1)
    return {
        "plain": _styled("plain", 400, rng, 0.0, confusable=False),
        "vendor": _styled("vendor", 400, rng, 6.0, confusable=True),
        "few": _styled("few", 120, rng, -6.0, confusable=False),
        "plain-new": _styled("plain-new", 200, rng, 0.0, confusable=False),
        "elsewhere": _styled("elsewhere", 200, rng, 30.0, confusable=False),
    }


def test_each_source_with_enough_labels_gets_its_own_threshold_used_only_among_its_greens(styled):
    from service.calibration.ood import mean_nearest
    from service.calibration.replay import feature_names

    names = feature_names("ticket@mid", QUESTIONS, 24)
    pool = study.arrays(styled["plain"] + styled["vendor"] + styled["few"], names, names)
    fitted = study.fit_green(pool, gate_quantile=0.95)
    local = {s.source: s for s in study.source_thresholds(fitted, pool, 0.8)}
    assert set(local) == {"plain", "vendor"}  # "few" has under SOURCE_MIN_LABELS
    assert local["plain"].n == 400 and len(local["plain"].references) == sum(pool.y[:400] == 0)
    # the confusable source holds the one threshold up; the plain one needs less
    assert local["plain"].threshold < local["vendor"].threshold <= fitted.threshold
    new = study.arrays(styled["plain-new"], names, names)
    own = study.ticket_thresholds(fitted, list(local.values()), new)
    z = fitted.gate.project(new.gate_x)
    plain, vendor = (mean_nearest(z, local[s].references, 5) <= local[s].radius for s in ("plain", "vendor"))
    assert plain[new.y == 0].mean() > 0.8  # new greens of the plain style lie among its greens
    # among both sources' greens the higher threshold holds; among neither, the one for all
    expected = np.where(vendor, local["vendor"].threshold, np.where(plain, local["plain"].threshold, fitted.threshold))
    assert (own == expected).all() and (own == local["plain"].threshold).any()
    far = study.arrays(styled["elsewhere"], names, names)
    assert (study.ticket_thresholds(fitted, list(local.values()), far) == fitted.threshold).all()
    # graded with them: more of the plain style's greens cleared, none of its non-greens
    one, per_source = study.grade(fitted, new), study.grade(fitted, new, own)
    assert per_source["greens_cleared"] > one["greens_cleared"] and per_source["false_greens"] == 0


def test_cross_source_grades_each_neighbourhood_asked_for(styled):
    report = study.cross_source(
        {k: styled[k] for k in ("plain", "vendor", "plain-new")},
        "ticket@mid",
        "ticket@mid",
        QUESTIONS,
        24,
        source_quantiles=(0.4, 0.8),
    )
    held = report["held_out"]["plain-new"]
    assert set(held["per_source_thresholds"]) == {"0.4", "0.8"}
    assert [s["source"] for s in held["per_source_thresholds"]["0.8"]["sources"]] == ["plain", "vendor"]
    assert report["source_min_labels"] == study.SOURCE_MIN_LABELS
    wider, narrower = (held["per_source_thresholds"][q]["greens_cleared"] for q in ("0.8", "0.4"))
    assert wider >= narrower >= held["greens_cleared"]


def test_a_lower_label_minimum_gives_a_small_source_a_threshold_of_its_own(styled):
    sources = {k: styled[k] for k in ("plain", "few", "plain-new")}
    default = study.cross_source(sources, "ticket@mid", "ticket@mid", QUESTIONS, 24, source_quantiles=(0.8,))
    lower = study.cross_source(
        sources, "ticket@mid", "ticket@mid", QUESTIONS, 24, source_quantiles=(0.8,), source_min_labels=100
    )
    own = {
        name: [s["source"] for s in g["per_source_thresholds"]["0.8"]["sources"]]
        for name, g in lower["held_out"].items()
    }
    assert own["plain-new"] == ["few", "plain"] and lower["source_min_labels"] == 100
    assert [s["source"] for s in default["held_out"]["plain-new"]["per_source_thresholds"]["0.8"]["sources"]] == [
        "plain"
    ]
