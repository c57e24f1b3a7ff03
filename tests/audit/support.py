"""Model-free judge backends for the audit's unit tests (the real model has its own tests).

`LookupBackend` answers each criterion from a table keyed by ticket text, so a test states
exactly what "the model" believes and checks the plumbing around it: rule, cache, calibration.
"""

from __future__ import annotations


class LookupBackend:
    """P(yes) per (ticket text substring, criterion); 0.0 when nothing matches. Counts calls."""

    def __init__(
        self,
        table: dict[str, dict[str, float]] | None = None,
        sha: str = "a" * 64,
        default: dict[str, float] | None = None,
        choose_reply=None,
        generate_reply=None,
    ) -> None:
        self.table = table or {}
        self.model_sha256 = sha
        self.model_name = "lookup"
        self.default = default or {}
        self.calls: list[tuple[str, tuple[str, ...]]] = []
        self.choose_reply = choose_reply
        self.generate_reply = generate_reply

    def _row(self, state: str) -> dict[str, float]:
        for needle, row in self.table.items():
            if needle in state:
                return row
        return self.default

    def yes_probabilities(self, context: str, state: str, questions: dict[str, str]) -> dict[str, float]:
        self.calls.append((state, tuple(questions)))
        row = self._row(state)
        return {name: row.get(name, 0.0) for name in questions}

    def choose(self, context: str, state: str, question: str, options: tuple[str, ...]) -> dict[str, float]:
        self.calls.append((question, options))
        return self.choose_reply(question)

    def generate_json(self, context: str, state: str, instructions: str, schema: dict) -> dict:
        self.calls.append((state, tuple(schema["properties"])))
        return self.generate_reply(state, schema)


def yes_for(case_failed: list[str], criteria_fail_if: dict[str, str]) -> dict[str, float]:
    """The P(yes) row that makes exactly `case_failed` fail, given each criterion's fails_if."""
    row = {}
    for criterion, fails_if in criteria_fail_if.items():
        failed = criterion in case_failed
        row[criterion] = 1.0 if failed == (fails_if == "yes") else 0.0
    return row
