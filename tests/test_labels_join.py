"""Labels kept apart from their texts join back by the text's sha256."""

from __future__ import annotations

import json
import subprocess
import sys

from service.labelled import join_labels, read_labelled, text_sha256
from service.settings import PROJECT_ROOT


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _label(id_, subject, body, risk="green", **extra):
    return {
        "id": id_,
        "text_sha256": text_sha256(subject, body),
        "risk": risk,
        "language": "en",
        "flags": {},
        "category": "technical",
        "urgency": 1,
        **extra,
    }


def test_join_by_text_and_report_the_missing(tmp_path):
    texts = [
        {"id": "t1", "subject": "Export", "body": "How do I export?"},
        {"id": "t2", "subject": None, "body": "Delete our admin's account."},
    ]
    labels = [
        _label("L1", "Export", "How do I export?"),
        _label("L2", None, "Delete our admin's account.", risk="red", flags={"destructive_or_access": True}),
        _label("L3", "Gone", "not in the texts"),
    ]
    _write(tmp_path / "t.jsonl", texts)
    _write(tmp_path / "l.jsonl", labels)
    records, missing = join_labels(tmp_path / "t.jsonl", tmp_path / "l.jsonl")
    assert [r.id for r in records] == ["L1", "L2"] and missing == ["L3"]
    assert records[1].subject is None and records[1].flags == {"destructive_or_access": True}


def test_the_cli_writes_a_file_every_job_reads(tmp_path):
    _write(tmp_path / "t.jsonl", [{"id": "t1", "subject": "Hi", "body": "Thanks a lot!"}])
    _write(tmp_path / "l.jsonl", [_label("L1", "Hi", "Thanks a lot!")])
    out = tmp_path / "out" / "joined.jsonl"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "service.cli",
            "labels",
            "join",
            "--texts",
            str(tmp_path / "t.jsonl"),
            "--labels",
            str(tmp_path / "l.jsonl"),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert [r.id for r in read_labelled(out)] == ["L1"]


def test_the_bundled_public_style_labels_follow_the_policy():
    import msgspec

    from service.labelled import LabelOnly

    rows = (PROJECT_ROOT / "data" / "public-style" / "labels.jsonl").read_text().splitlines()
    labels = [msgspec.json.decode(r, type=LabelOnly) for r in rows]
    assert len(labels) >= 400 and len({lab.text_sha256 for lab in labels}) == len(labels)
    for lab in labels:
        assert (lab.risk == "red") == any(lab.flags.values()), lab.id


def test_the_held_part_of_each_set_is_what_no_rule_was_written_against():
    import hashlib

    from service.labelled import PUBLIC_STYLE_FIRST_PART, in_held_part

    # public-style: the labels after the first part were made after the last rule
    assert not in_held_part("PUBL-0001") and not in_held_part(f"PUBL-{PUBLIC_STYLE_FIRST_PART:04d}")
    assert in_held_part(f"PUBL-{PUBLIC_STYLE_FIRST_PART + 1:04d}") and in_held_part("PUBL-1099")
    # any other set: the fixed third whose id's sha256 is 0 mod 3
    for ticket_id in ("TRA-001", "TRA-002", "TRF-130", "DEV-001", "PUBL-x"):
        expected = int(hashlib.sha256(ticket_id.encode()).hexdigest(), 16) % 3 == 0
        assert in_held_part(ticket_id) == expected, ticket_id


def _corpus_csv(records):
    """The corpus CSV's layout: a header, quoted fields where needed, literal backslash-n in bodies."""
    import csv
    import io

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["subject", "body", "answer", "type"])
    for subject, body in records:
        writer.writerow([subject, body, "We will look into it, thanks.", "Request"])
    return out.getvalue()


CSV_RECORDS = [
    ("Export", "How do I export my data, e.g. as CSV?\\n\\nThanks"),
    ("", "Please update the tools on our servers."),
    ('Quote "inside"', "A body, with commas, and a\\nline break."),
]


def test_texts_come_from_the_corpus_csv_or_from_its_pages(tmp_path):
    text = _corpus_csv(CSV_RECORDS)
    (tmp_path / "corpus.csv").write_text(text, encoding="utf-8")
    # what the service reads: each literal backslash-n a line break, an empty subject none
    wanted = [(s or None, b.replace("\\n", "\n")) for s, b in CSV_RECORDS]
    labels = [_label(f"L{i}", s, b) for i, (s, b) in enumerate(wanted)]
    _write(tmp_path / "l.jsonl", labels)
    records, missing = join_labels(tmp_path / "corpus.csv", tmp_path / "l.jsonl")
    assert missing == [] and [(r.subject, r.body) for r in records] == wanted
    # the same file cut into pages named by their character offset, a record across a cut,
    # the first page starting inside the header: every record is still found
    pages = tmp_path / "pages"
    pages.mkdir()
    cut = text.index("commas")
    (pages / "3.txt").write_text(text[3:cut], encoding="utf-8")
    (pages / f"{cut}.txt").write_text(text[cut:], encoding="utf-8")
    records, missing = join_labels(pages, tmp_path / "l.jsonl")
    assert missing == [] and sorted(r.id for r in records) == ["L0", "L1", "L2"]
    # a page missing after the cut loses the record it cuts, and says so
    (pages / f"{cut}.txt").unlink()
    records, missing = join_labels(pages, tmp_path / "l.jsonl")
    assert missing == ["L2"]


def test_a_csv_without_the_columns_is_refused(tmp_path):
    import pytest

    from service.labelled import LabelledFileError

    (tmp_path / "other.csv").write_text("title,text\nA,B\n", encoding="utf-8")
    _write(tmp_path / "l.jsonl", [_label("L1", "A", "B")])
    with pytest.raises(LabelledFileError, match="subject"):
        join_labels(tmp_path / "other.csv", tmp_path / "l.jsonl")
