"""The console's pure parts: highlighting, answer bars, status strip, and what each button records."""

from __future__ import annotations

import msgspec
import pytest

from service.console.views import (
    answer_view,
    calibration_status,
    decision_from_form,
    guesses,
    highlight,
    human_age,
    ordered_answers,
    status_strip,
    ticket_view,
)
from service.errors import InvalidTicket
from service.pipeline import combine
from service.results import (
    Answer,
    L1Result,
    L2Result,
    ModelInfo,
    RuleHit,
    TicketIn,
    Timings,
    TriageResult,
    calibrated_fields,
    is_calibrated,
    ticket_text,
)
from service.store import Heartbeat, StoredTicket, WorkerCalibration


def _hit(rule: str, start: int, end: int, level: str = "red") -> RuleHit:
    return RuleHit(id=rule, level=level, flag="none", span=(start, end))  # type: ignore[arg-type]


def _pieces(segments) -> list[tuple[str, tuple[str, ...], str | None]]:
    return [(s.text, s.rules, s.level) for s in segments]


@pytest.mark.parametrize(
    "hits, expected",
    [
        ([], [("refund my invoice", (), None)]),
        ([_hit("refund", 0, 6)], [("refund", ("refund",), "red"), (" my invoice", (), None)]),
        # nested: the inner piece is covered by both rules, the outer pieces by one
        (
            [_hit("outer", 0, 17, "yellow"), _hit("inner", 7, 9)],
            [("refund ", ("outer",), "yellow"), ("my", ("inner", "outer"), "red"), (" invoice", ("outer",), "yellow")],
        ),
        # overlapping
        (
            [_hit("a", 0, 9, "yellow"), _hit("b", 7, 17, "yellow")],
            [("refund ", ("a",), "yellow"), ("my", ("a", "b"), "yellow"), (" invoice", ("b",), "yellow")],
        ),
        # adjacent hits of the same rule merge into one mark
        ([_hit("r", 0, 3), _hit("r", 3, 6)], [("refund", ("r",), "red"), (" my invoice", (), None)]),
        # out-of-range and empty spans are clipped or dropped, never raise
        (
            [_hit("late", 10, 500), _hit("empty", 4, 4), _hit("neg", -5, 2)],
            [("re", ("neg",), "red"), ("fund my ", (), None), ("invoice", ("late",), "red")],
        ),
    ],
)
def test_highlight_cuts_at_every_span_boundary(hits, expected):
    segments = highlight("refund my invoice", hits)
    assert _pieces(segments) == expected
    assert "".join(s.text for s in segments) == "refund my invoice"


def test_highlight_counts_characters_not_bytes():
    text = "Rückerstattung für Rechnung"
    start = text.index("für")
    segments = highlight(text, [_hit("fuer", start, start + 3)])
    assert [s.text for s in segments if s.rules] == ["für"]


@pytest.mark.parametrize(
    "seconds, expected",
    [
        (0, "0 s"),
        (59.9, "59 s"),
        (60, "1 min"),
        (3599, "59 min"),
        (3600, "1 h 00 min"),
        (3 * 3600 + 5 * 60, "3 h 05 min"),
        (86400 * 2 + 4 * 3600, "2 d 4 h"),
        (-5, "0 s"),
    ],
)
def test_human_age(seconds, expected):
    assert human_age(seconds) == expected


def test_answer_bars_follow_option_order_and_mark_the_choice():
    answer = Answer(
        kind="choice",
        options=["green", "yellow", "red"],
        chosen="red",
        probabilities={"red": 0.7, "green": 0.1, "yellow": 0.2},
        coverage=0.93,
        calibrated=True,
        raw_probabilities={"green": 0.2, "yellow": 0.3, "red": 0.5},
    )
    view = answer_view("risk", answer)
    assert [(b.option, b.p, b.chosen) for b in view.bars] == [
        ("green", 0.1, False),
        ("yellow", 0.2, False),
        ("red", 0.7, True),
    ]
    assert view.bars[2].percent == "70.0" and view.bars[2].width == "70.00"
    assert [b.p for b in view.raw] == [0.2, 0.3, 0.5]


def test_boolean_answer_without_distribution_shows_p_yes():
    view = answer_view("commitment", Answer(kind="boolean", options=["yes", "no"], chosen="no", probability=0.25))
    assert [(b.option, b.p) for b in view.bars] == [("yes", 0.25), ("no", 0.75)]
    assert view.raw == []  # not calibrated: no "before calibration" line


def test_answers_ordered_risk_then_flags_then_the_rest():
    answers = {
        name: Answer(kind="choice", options=["a"], chosen="a")
        for name in ("zeta", "urgency", "commitment", "risk", "category")
    }
    assert [a.name for a in ordered_answers(answers)] == ["risk", "commitment", "category", "urgency", "zeta"]


# --- form → DecisionIn ------------------------------------------------------------------------------

FLAGS_OFF = {"commitment": False, "destructive_or_access": False, "third_party_personal_data": False}


@pytest.mark.parametrize(
    "form, given, expected",
    [
        ({"action": "approve"}, "red", ("approve", "red", FLAGS_OFF, False)),
        (
            {"action": "approve", "flag_commitment": "on"},
            "red",
            ("approve", "red", {**FLAGS_OFF, "commitment": True}, False),
        ),
        ({"action": "escalate"}, "yellow", ("escalate", "red", FLAGS_OFF, False)),
        ({"action": "escalate"}, "green", ("escalate", "yellow", FLAGS_OFF, False)),
        # downgrading out of red clears the flags: policy says any red flag makes a ticket red
        ({"action": "downgrade", "flag_commitment": "on"}, "red", ("downgrade", "yellow", FLAGS_OFF, False)),
        ({"action": "downgrade"}, "yellow", ("downgrade", "green", FLAGS_OFF, False)),
        ({"action": "edit", "level": "green"}, "red", ("edit", "green", FLAGS_OFF, False)),
        ({"action": "false_green"}, "green", ("escalate", "yellow", FLAGS_OFF, True)),
        (
            {"action": "false_green", "flag_third_party_personal_data": "on"},
            "green",
            ("escalate", "red", {**FLAGS_OFF, "third_party_personal_data": True}, True),
        ),
        ({"action": "edit", "level": "yellow", "false_green": "on"}, "green", ("edit", "yellow", FLAGS_OFF, True)),
    ],
)
def test_each_button_records_a_complete_label(form, given, expected):
    decision = decision_from_form({**form, "category": "billing", "note": "  why  "}, given, "ana")
    assert (decision.action, decision.correct_level, decision.flags, decision.false_green) == expected
    assert decision.operator == "ana"
    assert decision.category == "billing"
    assert decision.note == "why"


@pytest.mark.parametrize(
    "form, given, field",
    [
        ({"action": "shrug"}, "red", "action"),
        ({}, "red", "action"),
        ({"action": "escalate"}, "red", "action"),
        ({"action": "downgrade"}, "green", "action"),
        ({"action": "edit", "level": "purple"}, "red", "correct_level"),
        ({"action": "edit"}, "red", "correct_level"),
    ],
)
def test_impossible_form_submissions_name_the_field(form, given, field):
    with pytest.raises(InvalidTicket) as caught:
        decision_from_form(form, given, "ana")
    assert caught.value.field == field


def test_empty_category_and_note_are_absent_not_empty_strings():
    decision = decision_from_form({"action": "approve", "category": "", "note": "   "}, "red", "a")
    assert decision.category is None and decision.note is None


# --- calibrated answers are facts, the rest are guesses -------------------------------------------


def _answer(method: str, calibrated: bool) -> Answer:
    return Answer(
        kind="score",
        options=[str(n) for n in range(6)],
        chosen="5",
        method=method,  # type: ignore[arg-type]
        calibrated=calibrated,
        probabilities={"5": 0.4, "0": 0.6},
    )


@pytest.mark.parametrize(
    "answer, fact",
    [
        (_answer("head", True), True),  # a head of the loaded artifact (head or head_all)
        (_answer("logits", True), True),  # temperature or vector scaling of the letters
        (_answer("logits", False), False),  # raw letters: no artifact mapped them
        (_answer("generated", False), False),  # the fallback's text
        (_answer("generated", True), False),  # nothing calibrates generated text, whatever it says
        (None, False),  # not asked / no answer
    ],
)
def test_an_answer_is_a_fact_only_when_calibrated(answer, fact):
    assert is_calibrated(answer) is fact
    if answer is not None:
        view = answer_view("urgency", answer)
        assert view.calibrated is fact


_FLAGS = ("commitment", "destructive_or_access", "third_party_personal_data")


@pytest.mark.parametrize(
    "uncalibrated, with_team_answer, expected",
    [
        ((), False, ["category", "urgency", "team", "red_flags"]),
        (("urgency",), False, ["category", "team", "red_flags"]),  # the bundled artifact today
        # the team follows the category (prompts/teams.yaml): as calibrated as the category
        (("category",), False, ["urgency", "red_flags"]),
        # a model still asked for the team: that answer decides
        (("team",), True, ["category", "urgency", "red_flags"]),
        # red flags are one decision over the three answers: one raw flag makes them all a guess
        (("commitment",), False, ["category", "urgency", "team"]),
        (("category", "urgency", *_FLAGS), False, []),  # no artifact: every field a guess
    ],
)
def test_calibrated_fields_follow_their_answers(uncalibrated, with_team_answer, expected):
    names = ["risk", *_FLAGS, "category", "urgency"] + (["team"] if with_team_answer else [])
    answers = {
        n: Answer(kind="choice", options=["a", "b"], chosen="a", calibrated=n not in uncalibrated) for n in names
    }
    l2 = L2Result(level="yellow", method="logits", answers=answers, category="a", urgency=5, team="legal")
    assert calibrated_fields(l2) == expected
    l1 = L1Result(level="none", rules=[])
    result = combine("t_1", l1, l2, ModelInfo(name="m", sha256="0"), "p", Timings(), 0.0)
    assert result.calibrated_fields == expected  # what the API and the callback carry


def test_guesses_are_the_shown_values_no_calibration_mapped():
    shown = {"category": "technical", "urgency": 5, "team": "legal"}
    assert guesses(shown, ["category", "team", "red_flags"]) == {"urgency"}
    assert guesses(shown, []) == {"category", "urgency", "team"}
    # no value, nothing to mislabel
    assert guesses({"category": None, "urgency": None, "team": None}, []) == frozenset()


# --- the ticket page's model -----------------------------------------------------------------------


def _stored(subject: str | None, body: str, with_result: bool) -> StoredTicket:
    text = ticket_text(subject, body)
    start = text.index("refund")
    l1 = L1Result(
        level="red",
        rules=[RuleHit(id="money.refund", level="red", flag="commitment", span=(start, start + 6), text="refund")],
    )
    stored = {
        "request": msgspec.json.encode(TicketIn(body=body, subject=subject)).decode(),
        "l1": msgspec.json.encode(l1).decode(),
        "status": "queued",
        "accepted_at": "100.0",
    }
    if with_result:
        l2 = L2Result(
            level="yellow", method="logits", red_flags=["third_party_personal_data"], category="billing", urgency=2
        )
        result = TriageResult(
            id="t_1",
            status="done",
            final_level="red",
            l1=l1,
            l2=l2,
            category="billing",
            urgency=2,
            model=ModelInfo(name="m", sha256="0"),
            prompt_sha="p",
            rules_sha="r",
            timings_ms=Timings(),
        )
        stored.update(status="done", result=msgspec.json.encode(result).decode())
    ticket = StoredTicket.from_hash("t_1", stored)
    assert ticket is not None
    return ticket


def test_ticket_view_highlights_into_subject_and_body_text():
    view = ticket_view(_stored("Money", "Please refund me", True), now=160.0)
    assert view.text == "Money\n\nPlease refund me"
    assert [s.text for s in view.segments if s.rules] == ["refund"]
    assert view.level == "red" and view.age_s == 60.0
    # the form starts from what rule and model said
    assert view.suggested_flags == {"commitment", "third_party_personal_data"}
    assert view.category == "billing"
    # a result without calibrated answers: everything the model gave is a guess
    assert view.guesses == {"category", "urgency"}


def test_untriaged_ticket_counts_as_yellow_like_the_api():
    view = ticket_view(_stored(None, "Please refund me", False), now=100.0)
    assert view.level == "yellow" and view.result is None and view.answers == []
    assert view.suggested_flags == {"commitment"}


# --- status strip -----------------------------------------------------------------------------------


def test_status_strip_reads_gauges_and_audit_state():
    gauges = {
        "queues": {"yellow": 4, "red": 2, "audit": 0},
        "backlog": 7,
        "pending": 1,
        "workers": 1,
        "audit": {"kappa": "0.81", "gating": "1", "false_green_rate": "0.004", "last_run": "1000"},
    }
    status = status_strip(gauges, [_beat(worker="w1")], now=4600.0)
    assert status.queues == {"yellow": 4, "red": 2, "audit": 0}
    assert status.backlog == 7 and status.workers == 1
    assert status.audit.kappa == 0.81 and status.audit.gating is True
    assert status.audit.false_green_rate == 0.004 and status.audit.age_s == 3600.0


def test_status_strip_without_audit_says_nothing_is_known():
    status = status_strip({"queues": {}, "backlog": 0, "audit": {}}, [], now=0.0)
    assert status.audit.kappa is None and status.audit.gating is None
    assert status.calibration.state == "no worker"


def _beat(at: float = 1500.0, calibration: WorkerCalibration | None = None, worker: str = "w") -> Heartbeat:
    return Heartbeat(
        worker=worker, pid=1, at=at, model="m.gguf", sha256="0" * 64, prompt_sha="p", calibration=calibration
    )


@pytest.mark.parametrize(
    "workers, state, version, age",
    [
        ([_beat(at=1490.0)], "unknown", None, None),
        (
            [_beat(at=1490.0, calibration=WorkerCalibration(version="20261101T000000Z-ab", age_s=490.0))],
            "current",
            "20261101T000000Z-ab",
            500.0,
        ),
        ([_beat(calibration=WorkerCalibration(version="v1", age_s=500.0, stale=True))], "stale", "v1", 500.0),
        ([_beat(calibration=WorkerCalibration())], "uncalibrated", None, None),
        (
            [
                _beat(calibration=WorkerCalibration(version="v1"), worker="a"),
                _beat(calibration=WorkerCalibration(version="v2"), worker="b"),
            ],
            "mixed",
            "v1, v2",
            None,
        ),
    ],
)
def test_calibration_status_from_heartbeats(workers, state, version, age):
    calibration = calibration_status(workers, now=1500.0)
    assert (calibration.state, calibration.version, calibration.age_s) == (state, version, age)


def test_calibration_status_keeps_the_error():
    calibration = calibration_status(
        [_beat(calibration=WorkerCalibration(stale=True, error="artifact was fitted for another model"))], now=0.0
    )
    assert calibration.state == "stale"
    assert calibration.detail == "artifact was fitted for another model"
