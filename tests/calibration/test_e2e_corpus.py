"""The end-to-end model test's own corpus is valid and big enough for its min_per_class."""

from __future__ import annotations

from collections import Counter

from service.labelled import read_labelled
from service.results import RED_FLAGS
from tests.calibration.test_e2e_model import CORPUS, DECIDED, MIN_PER_CLASS
from tests.support import DEV_SET


def test_every_class_the_fit_requires_has_min_per_class_labels():
    records = read_labelled(CORPUS)  # raises on any record the policy rejects
    risk = Counter(r.risk for r in records) + Counter(level for _, _, level, _ in DECIDED)
    assert min(risk[level] for level in ("green", "yellow", "red")) >= MIN_PER_CLASS, risk
    for flag in RED_FLAGS:
        yes = sum(bool(r.flags.get(flag)) for r in records) + sum(bool(flags.get(flag)) for _, _, _, flags in DECIDED)
        no = len(records) + len(DECIDED) - yes
        assert yes >= MIN_PER_CLASS and no >= MIN_PER_CLASS, (flag, yes, no)


def test_it_is_small_and_apart_from_the_dev_set():
    records = read_labelled(CORPUS)
    assert len(records) <= 60  # the point: a fresh machine replays these, not 160 dev tickets
    assert len({r.id for r in records}) == len(records)
    if DEV_SET.exists():
        dev_bodies = {r.body for r in read_labelled(DEV_SET)}
        assert not dev_bodies & {r.body for r in records}
