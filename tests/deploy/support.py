"""Readers shared by the deploy tests: PromQL names and labels, the metric catalogue, Dockerfile and .dockerignore."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
RULES_FILE = DEPLOY / "prometheus" / "rules" / "triage.rules.yml"
DASHBOARD_FILE = DEPLOY / "grafana" / "dashboards" / "triage.json"
COMPOSE_FILE = DEPLOY / "compose.yaml"
PROMETHEUS_FILE = DEPLOY / "prometheus" / "prometheus.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"

# Labels Prometheus attaches at scrape time, and the histogram bucket label.
TARGET_LABELS = {"job", "instance"}
PROMQL_WORDS = {
    "sum",
    "max",
    "min",
    "avg",
    "count",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "rate",
    "increase",
    "delta",
    "deriv",
    "histogram_quantile",
    "time",
    "scalar",
    "absent",
    "topk",
    "bottomk",
    "vector",
}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")
_NAME = re.compile(r"(?<![a-zA-Z0-9_:{\"$])(triage[_:][a-zA-Z0-9_:]*)")
_SUFFIXES = ("_bucket", "_sum", "_count")


def metric_names(expr: str) -> set[str]:
    """Every triage_* or triage:* series name an expression reads (strings ignored)."""
    return set(_NAME.findall(_STRING.sub('""', expr)))


def selectors(expr: str) -> list[tuple[str, dict[str, tuple[str, str]]]]:
    """(metric, {label: (operator, value)}) for every `metric{...}` in the expression."""
    out = []
    for name, body in _SELECTOR.findall(expr):
        out.append((name, {label: (op, value) for label, op, value in _MATCHER.findall(body)}))
    return out


def grouping_labels(expr: str) -> set[str]:
    labels: set[str] = set()
    for body in _GROUPING.findall(expr):
        labels |= {part.strip() for part in body.split(",") if part.strip()}
    return labels


def base_name(sample_name: str) -> str:
    for suffix in _SUFFIXES:
        if sample_name.endswith(suffix):
            return sample_name[: -len(suffix)]
    return sample_name


@dataclass
class Catalogue:
    """What service.metrics.REGISTRY exports: sample names and each family's label names."""

    samples: set[str] = field(default_factory=set)
    labels: dict[str, set[str]] = field(default_factory=dict)  # family name -> label names
    types: dict[str, str] = field(default_factory=dict)

    def family(self, sample_name: str) -> str | None:
        for candidate in (sample_name, base_name(sample_name)):
            if candidate in self.labels:
                return candidate
        return None


def catalogue() -> Catalogue:
    """Parse the real exposition (generate_latest) for names; collectors for label names,
    since a labelled metric with no children exports no sample to read its labels from."""
    from prometheus_client import generate_latest
    from prometheus_client.metrics import MetricWrapperBase

    from service import metrics

    cat = Catalogue()
    text = generate_latest(metrics.REGISTRY).decode()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            cat.types[name] = kind
            if kind == "histogram":
                cat.samples |= {name + s for s in _SUFFIXES}
            else:
                cat.samples.add(name)
        elif line and not line.startswith("#"):
            cat.samples.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase):
            # Counter._name has no _total; the exposition family does.
            name = value._name + ("_total" if value._type == "counter" else "")
            cat.labels[name] = set(value._labelnames)
    return cat


def rule_groups() -> list[dict]:
    return yaml.safe_load(RULES_FILE.read_text())["groups"]


def rules() -> list[dict]:
    return [rule for group in rule_groups() for rule in group["rules"]]


def alerts() -> dict[str, dict]:
    return {rule["alert"]: rule for rule in rules() if "alert" in rule}


def recorded() -> dict[str, str]:
    return {rule["record"]: rule["expr"] for rule in rules() if "record" in rule}


def dashboard() -> dict:
    return json.loads(DASHBOARD_FILE.read_text())


def dashboard_targets() -> list[tuple[str, dict]]:
    return [(panel["title"], target) for panel in dashboard()["panels"] for target in panel.get("targets", [])]


# ------------------------------------------------------------------ Dockerfile


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def args(self, keyword: str) -> list[str]:
        return [rest for kw, rest in self.instructions if kw == keyword]


def dockerfile_stages(text: str | None = None) -> dict[str, Stage]:
    """Stages by name, each with its (KEYWORD, arguments) in order; continuations joined."""
    text = DOCKERFILE.read_text() if text is None else text
    logical: list[str] = []
    buffer = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if not buffer and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if buffer and line.lstrip().startswith("#"):
            continue
        if line.endswith("\\"):
            buffer += line[:-1] + " "
            continue
        logical.append(buffer + line)
        buffer = ""
    stages: dict[str, Stage] = {}
    current: Stage | None = None
    for line in logical:
        keyword, _, rest = line.strip().partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            parts = rest.split()
            name = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else f"#{len(stages)}"
            current = Stage(name=name, base=parts[0])
            stages[name] = current
        elif current is not None:
            current.instructions.append((keyword, rest.strip()))
    return stages


def _ignore_regex(pattern: str) -> re.Pattern[str]:
    out = ""
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
            continue
        if pattern.startswith("**", i):
            out += ".*"
            i += 2
            continue
        out += "[^/]*" if char == "*" else "[^/]" if char == "?" else re.escape(char)
        i += 1
    return re.compile(out + "$")


def dockerignore_excludes(path: str, text: str | None = None) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents decides."""
    text = DOCKERIGNORE.read_text() if text is None else text
    patterns = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line[1:] if negate else line
        patterns.append((negate, _ignore_regex(pattern.strip("/"))))
    parts = path.strip("/").split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    excluded = False
    for negate, regex in patterns:
        if any(regex.match(prefix) for prefix in prefixes):
            excluded = not negate
    return excluded
