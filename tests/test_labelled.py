"""The policy's labelled format: what `read_labelled` accepts and how it names what it refuses."""

from __future__ import annotations

import json

import pytest

from service.labelled import LabelledFileError, read_labelled


def _line(**overrides) -> str:
    record = {
        "id": "DEV-1",
        "language": "fr",
        "subject": "Remboursement",
        "body": "Remboursez-moi.",
        "risk": "red",
        "flags": {"commitment": True},
        "category": "billing",
        "urgency": 2,
        "note": "asks for a refund",
    }
    record.update(overrides)
    return json.dumps(record, ensure_ascii=False)


def test_reads_every_record_and_skips_blank_lines(tmp_path):
    path = tmp_path / "l.jsonl"
    path.write_text(_line() + "\n\n" + _line(id="DEV-2", risk="green", flags={}) + "\n", encoding="utf-8")
    records = read_labelled(path)
    assert [r.id for r in records] == ["DEV-1", "DEV-2"]
    assert records[0].flags == {"commitment": True} and records[0].language == "fr"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"urgency": 6}, r"l.jsonl:1: urgency must be 0..5, got 6"),
        ({"flags": {"refund": True}}, r"l.jsonl:1: unknown flags \['refund'\]"),
        ({"risk": "yellow"}, r"l.jsonl:1: a red flag is set but risk is 'yellow'"),
        ({"risk": "amber"}, r"l.jsonl:1: risk must be one of"),
        ({"urgency": "high"}, r"l.jsonl:1: Expected `int \| null`, got `str` - at `\$.urgency`"),
        ({"extra": 1}, r"l.jsonl:1: .*unknown field"),
    ],
)
def test_names_the_line_and_the_fault(tmp_path, overrides, message):
    path = tmp_path / "l.jsonl"
    path.write_text(_line(**overrides) + "\n", encoding="utf-8")
    with pytest.raises(LabelledFileError, match=message):
        read_labelled(path)


def test_line_numbers_count_blank_lines(tmp_path):
    path = tmp_path / "l.jsonl"
    path.write_text(_line() + "\n\n" + _line(risk="green") + "\n", encoding="utf-8")
    with pytest.raises(LabelledFileError, match=r"l.jsonl:3: a red flag is set but risk"):
        read_labelled(path)


def test_a_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(LabelledFileError, match="cannot read"):
        read_labelled(tmp_path / "absent.jsonl")
