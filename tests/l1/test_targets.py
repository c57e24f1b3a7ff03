"""L1 alone must meet the issue's targets on the dev set, and generalise to the held-out set."""

from __future__ import annotations

import pytest
import yaml

from service.l1 import evaluate
from service.l1.report import (
    MAX_GREEN_TO_RED,
    MAX_GREEN_TO_YELLOW,
    MIN_RED_AS_RED,
    measure,
    read_jsonl,
    targets,
)
from tests.l1.support import ROOT
from tests.support import DEV_SET


@pytest.fixture(scope="module")
def dev_measured(pack):
    if not DEV_SET.exists():
        pytest.skip(f"{DEV_SET} is not on this machine")
    return measure(pack, read_jsonl(DEV_SET))


def test_no_green_ticket_is_raised_to_red(dev_measured):
    assert dev_measured.matrix[("green", "red")] <= MAX_GREEN_TO_RED


def test_at_most_ten_percent_of_green_tickets_are_raised_to_yellow(dev_measured):
    assert dev_measured.share("green", "yellow") <= MAX_GREEN_TO_YELLOW


def test_at_least_sixty_percent_of_red_tickets_are_red(dev_measured):
    assert dev_measured.share("red", "red") >= MIN_RED_AS_RED


def test_targets_summary_agrees(dev_measured):
    assert all(target.met for target in targets(dev_measured))


HOLDOUT = yaml.safe_load((ROOT / "tests/l1/data/holdout.yaml").read_text(encoding="utf-8"))


def test_holdout_has_no_green_raised_to_red_and_few_to_yellow(pack):
    greens = [t for t in HOLDOUT["tickets"] if t["risk"] == "green"]
    levels = [evaluate(pack, t["text"]).level for t in greens]
    assert levels.count("red") == 0, [t["id"] for t, lv in zip(greens, levels, strict=True) if lv == "red"]
    assert levels.count("yellow") <= MAX_GREEN_TO_YELLOW * len(greens)


def test_holdout_red_recall(pack):
    reds = [t for t in HOLDOUT["tickets"] if t["risk"] == "red"]
    caught = [t for t in reds if evaluate(pack, t["text"]).level == "red"]
    assert len(caught) >= MIN_RED_AS_RED * len(reds)


def test_holdout_yellows_are_at_least_yellow(pack):
    for ticket in HOLDOUT["tickets"]:
        if ticket["risk"] == "yellow":
            assert evaluate(pack, ticket["text"]).level != "none", ticket["id"]
