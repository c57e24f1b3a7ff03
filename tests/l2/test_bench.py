"""The L2 bench on one ticket: every key the bench report needs, and no system re-evaluation."""

from __future__ import annotations

import pytest

from service.l2 import bench
from tests.l2.support import shared_classifier

pytestmark = pytest.mark.model


def test_bench_section_on_one_ticket():
    section = bench.run(
        None, [{"subject": "Invoice", "body": "Where can I download my invoice?"}], classifier=shared_classifier()
    )
    for key in (
        "logits_ms_median",
        "json_ms_median",
        "ratio",
        "extra_question_ms",
        "first_question_ms",
        "tokens_per_ticket_median",
        "system_tokens_reevaluated",
        "peak_rss_mb",
        "kv_sharing",
        "layer_features",
    ):
        assert section[key] is not None, key
    assert section["system_tokens_reevaluated"] == 0
    assert section["json_generated_tokens_median"] > 10  # the old path really generated JSON
    assert section["kv_sharing"]["max_probability_difference_vs_rewind"] < 0.05
    assert section["layer_features"]["ms_median_without"] > 0
    # tokens per ticket = ticket tokens + every question's suffix, nothing more
    assert section["tokens_per_ticket_median"] == (
        section["ticket_tokens_median"] + sum(section["suffix_tokens"].values())
    )
    like_for_like = section["same_answers_as_json"]
    assert like_for_like["questions"] == ["risk", "category"]
    assert like_for_like["logits_ms_median"] > 0  # timings are compared in the bench, not here
