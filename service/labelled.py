"""The risk policy's labelled record format (JSON Lines), read and checked in one place.

`triage eval`, `triage recalibrate` and the drills read labelled files through `read_labelled`,
so a file one of them accepts is a file all of them accept.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from service.results import RED_FLAGS

LEVELS = ("green", "yellow", "red")


class LabelledFileError(ValueError):
    """A labelled file that cannot be used; the message names the file and line."""


class LabelledTicket(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One line of the policy's labelled format (risk-policy.md, "Labelled record format")."""

    id: str
    body: str
    risk: str
    subject: str | None = None
    language: str = ""
    flags: dict[str, bool] = {}  # a flag left out is unknown, not false (red tickets)
    category: str | None = None
    urgency: int | None = None
    note: str | None = None  # for people; no code reads it


def check(record: LabelledTicket) -> str | None:
    """What is wrong with one record under the policy, or None."""
    if record.risk not in LEVELS:
        return f"risk must be one of {LEVELS}, got {record.risk!r}"
    unknown = set(record.flags) - set(RED_FLAGS)
    if unknown:
        return f"unknown flags {sorted(unknown)}"
    if any(record.flags.values()) and record.risk != "red":
        return f"a red flag is set but risk is {record.risk!r} (the policy: any flag true means red)"
    if record.urgency is not None and not 0 <= record.urgency <= 5:
        return f"urgency must be 0..5, got {record.urgency}"
    return None


def read_labelled(path: str | Path) -> list[LabelledTicket]:
    """Every record of a labelled JSONL file, blank lines skipped; the first error stops it."""
    decoder = msgspec.json.Decoder(LabelledTicket)
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise LabelledFileError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = decoder.decode(line)
        except msgspec.DecodeError as exc:
            raise LabelledFileError(f"{path}:{number}: {exc}") from None
        problem = check(record)
        if problem:
            raise LabelledFileError(f"{path}:{number}: {problem}")
        records.append(record)
    return records
