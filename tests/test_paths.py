"""No path of a development machine in code, tests or their data: data lives where the settings
say (TRIAGE_DEV_SET, TRIAGE_CORPUS, …) or relative to the project root."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("service", "tests", "loadtest", "scripts", "deploy", "rules", "prompts")
SUFFIXES = {".py", ".yaml", ".yml", ".toml", ".sh", ".cfg", ".ini"}
# Where the development machines keep checkouts and shared data (spelled in two pieces so that
# this file does not find itself); a container's own home (/home/triage) is no such path.
NEEDLES = ("/" + "work/",)


def test_no_development_machine_path():
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in FOLDERS
        for path in sorted((ROOT / folder).rglob("*"))
        if path.suffix in SUFFIXES and path.is_file()
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if any(needle in line for needle in NEEDLES)
    ]
    assert found == []
