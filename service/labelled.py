"""The risk policy's labelled record format (JSON Lines), read and checked in one place.

`triage eval`, `triage recalibrate` and the drills read labelled files through `read_labelled`,
so a file one of them accepts is a file all of them accept.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import msgspec

from service.errors import LabelledFileError
from service.results import LEVELS, RED_FLAGS

__all__ = ["LEVELS", "LabelledFileError", "LabelledTicket", "check", "read_labelled"]


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


class LabelOnly(msgspec.Struct, frozen=True):
    """A label kept apart from its text (data/public-style/labels.jsonl): the text is someone
    else's and stays out of the repository; `text_sha256` finds it again."""

    id: str
    text_sha256: str
    risk: str
    language: str = ""
    flags: dict[str, bool] = {}
    category: str | None = None
    urgency: int | None = None
    note: str | None = None


class TextOnly(msgspec.Struct, frozen=True):
    id: str
    body: str
    subject: str | None = None


# The public-style labels up to this number were read while rules were written; the later ones
# never were (data/public-style/README.md, docs/l1.md "Breadth").
PUBLIC_STYLE_FIRST_PART = 451


def in_held_part(ticket_id: str) -> bool:
    """The part of a labelled set that no rule was written against (docs/l1.md, "Breadth"), so
    the part that grades the rules, and anything that leans on them, honestly.

    Public-style labels (PUBL-NNNN): the second part, NNNN above PUBLIC_STYLE_FIRST_PART. Any
    other set (train.jsonl): the third of ids whose sha256 is 0 mod 3, fixed before any rule was
    written and never read while writing them.
    """
    prefix, _, number = ticket_id.partition("-")
    if prefix == "PUBL" and number.isdigit():
        return int(number) > PUBLIC_STYLE_FIRST_PART
    return int(hashlib.sha256(ticket_id.encode()).hexdigest(), 16) % 3 == 0


def text_sha256(subject: str | None, body: str) -> str:
    """The key of a label kept apart from its text: sha256 of `subject`, a blank line, `body`
    (the service's own ticket text, service.results.ticket_text; no subject: the body alone)."""
    import hashlib

    from service.results import ticket_text

    return hashlib.sha256(ticket_text(subject, body).encode("utf-8")).hexdigest()


def _csv_text(field: str) -> str:
    """A subject or body as the public corpus stores it, as the service reads it: each literal
    backslash-n is a line break (shared/data/corpus/public-tickets.jsonl was made the same way)."""
    return field.replace("\\n", "\n")


def texts_from_csv(path: str | Path) -> list[TextOnly]:
    """Every record of the corpus CSV (columns `subject` and `body`), ids by row number."""
    import csv

    try:
        with open(path, encoding="utf-8", newline="") as handle:
            rows = csv.reader(handle)
            header = next(rows, [])
            if "subject" not in header or "body" not in header:
                raise LabelledFileError(f"{path}: a CSV with `subject` and `body` columns is needed")
            s, b = header.index("subject"), header.index("body")
            return [
                TextOnly(id=f"row-{n}", subject=_csv_text(row[s]) or None, body=_csv_text(row[b]))
                for n, row in enumerate(rows, start=1)
                if len(row) > max(s, b)
            ]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise LabelledFileError(f"{path}: cannot read: {exc}") from None


def texts_from_pages(directory: str | Path, *, reach: int = 40_000) -> list[TextOnly]:
    """Candidate records from pages of the corpus CSV saved as `<character offset>.txt` (what
    `read_file` returns, 16,000 characters each): the pages are joined where they follow one
    another, and a record is read from every line start (subject, body: the first two columns).
    Most candidates are fragments; matching by sha256 keeps the real ones."""
    import csv
    import io

    pages: dict[int, str] = {}
    for page in Path(directory).glob("*.txt"):
        if page.stem.isdigit():
            pages[int(page.stem)] = page.read_text(encoding="utf-8")
    if not pages:
        raise LabelledFileError(f"{directory}: no pages named <offset>.txt")
    found: list[TextOnly] = []
    for offset, text in sorted(pages.items()):
        after, end = text, offset + len(text)
        while end in pages and len(after) < len(text) + reach:
            after, end = after + pages[end], end + len(pages[end])
        for start in [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]:
            try:
                row = next(csv.reader(io.StringIO(after[start : start + reach])), [])
            except csv.Error:
                continue
            if len(row) >= 2:
                found.append(
                    TextOnly(id=f"at-{offset + start}", subject=_csv_text(row[0]) or None, body=_csv_text(row[1]))
                )
    return found


def _lines(path: str | Path) -> list[str]:
    try:
        return [x for x in Path(path).read_text(encoding="utf-8").splitlines() if x.strip()]
    except (OSError, UnicodeDecodeError) as exc:
        raise LabelledFileError(f"{path}: cannot read: {exc}") from None


def _texts(path: str | Path) -> list[TextOnly]:
    """Texts from JSONL (id, subject, body), from the corpus CSV, or from a folder of its pages."""
    if Path(path).is_dir():
        return texts_from_pages(path)
    if str(path).endswith(".csv"):
        return texts_from_csv(path)
    texts = []
    for number, line in enumerate(_lines(path), start=1):
        try:
            texts.append(msgspec.json.decode(line, type=TextOnly))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise LabelledFileError(f"{path}:{number}: {exc}") from None
    return texts


def join_labels(texts_path: str | Path, labels_path: str | Path) -> tuple[list[LabelledTicket], list[str]]:
    """Labelled records from texts (JSONL, the corpus CSV or a folder of its pages: `_texts`) and a
    file of labels, matched by text sha256: (the records, the label ids whose text was not found)."""
    texts = {text_sha256(t.subject, t.body): t for t in _texts(texts_path)}
    records, missing = [], []
    for number, line in enumerate(_lines(labels_path), start=1):
        try:
            label = msgspec.json.decode(line, type=LabelOnly)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise LabelledFileError(f"{labels_path}:{number}: {exc}") from None
        text = texts.get(label.text_sha256)
        if text is None:
            missing.append(label.id)
            continue
        record = LabelledTicket(
            id=label.id,
            body=text.body,
            risk=label.risk,
            subject=text.subject,
            language=label.language,
            flags=label.flags,
            category=label.category,
            urgency=label.urgency,
            note=label.note,
        )
        problem = check(record)
        if problem:
            raise LabelledFileError(f"{labels_path}:{number}: {problem}")
        records.append(record)
    return records, missing
