"""Console test helpers: store results as a worker does, sign in through the form, seed the strip."""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
import msgspec
import redis

from service.pipeline import combine
from service.results import Answer, L2Result, ModelInfo, Timings
from service.store import AuditStore, Delivery, Heartbeat, Keys, WorkerCalibration, WorkerStore
from tests.support import REDIS_URL

RULES = Path(__file__).parent / "rules"
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')

_RISK = {
    "red": {"green": 0.04, "yellow": 0.21, "red": 0.75},
    "yellow": {"green": 0.12, "yellow": 0.71, "red": 0.17},
    "green": {"green": 0.86, "yellow": 0.11, "red": 0.03},
}


def l2_for(
    level: str,
    category: str = "billing",
    urgency: int = 2,
    red_flags: tuple[str, ...] = (),
    guessed: tuple[str, ...] = ("urgency",),
    team: str | None = None,
) -> L2Result:
    """An L2 result shaped like the classifier's: risk, the three flags, category, urgency.

    Like the bundled artifact, every answer is calibrated except those `guessed` (urgency: too
    few labels to calibrate it), which stay the model's raw letters."""
    risk = _RISK[level]
    answers = {
        "risk": Answer(
            kind="choice",
            options=["green", "yellow", "red"],
            chosen=level,
            probabilities=risk,
            coverage=0.94,
            confidence=round(risk[level] * 0.94, 3),
            calibrated=True,
            raw_probabilities={k: round(v * 0.9 + 0.1 / 3, 3) for k, v in risk.items()},
        )
    }
    for flag in ("commitment", "destructive_or_access", "third_party_personal_data"):
        p_yes = 0.81 if flag in red_flags else 0.06
        answers[flag] = Answer(
            kind="boolean",
            options=["yes", "no"],
            chosen="yes" if p_yes > 0.5 else "no",
            probabilities={"yes": p_yes, "no": 1 - p_yes},
            probability=p_yes,
            coverage=0.97,
        )
    answers["category"] = Answer(
        kind="choice",
        options=["billing", "technical", "account", "other"],
        chosen=category,
        probabilities={"billing": 0.08, "technical": 0.05, "account": 0.04, "other": 0.03, category: 0.8},
        coverage=0.88,
    )
    answers["urgency"] = Answer(
        kind="score",
        options=[str(n) for n in range(6)],
        chosen=str(urgency),
        probabilities={str(n): (0.6 if n == urgency else 0.08) for n in range(6)},
        value=float(urgency),
        mode=urgency,
        coverage=0.9,
    )
    answers = {
        name: msgspec.structs.replace(answer, calibrated=name not in guessed) for name, answer in answers.items()
    }
    return L2Result(
        level=level,
        method="logits",
        calibrated=True,  # type: ignore[arg-type]
        calibration_version="20261128T090000Z-3f2a",
        answers=answers,
        red_flags=list(red_flags),
        category=category,
        urgency=urgency,
        team=team,
        tokens_evaluated=180,
        timings_ms={"total": 812.0},
    )


def finish(prefix: str, ticket_id: str, level: str, queue: str | None = None, **l2_fields) -> None:
    """Store a result for an accepted ticket exactly as a worker does (without the model).

    `queue` puts the ticket in another queue too (the audit queue is filled by sampling).
    """
    client = redis.Redis.from_url(REDIS_URL)
    try:
        store = WorkerStore(client, Keys(prefix), 3600)
        store.ensure_group()
        entry_id = next(
            entry for entry, fields in client.xrange(f"{prefix}:tickets") if fields[b"id"].decode() == ticket_id
        )
        stored = store.ticket(ticket_id)
        assert stored is not None
        l1 = stored.l1
        result = combine(
            ticket_id,
            l1,
            l2_for(level, **l2_fields),
            ModelInfo(name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", sha256="0" * 64),
            "p" * 64,
            Timings(l1=0.2, l2=812.0, total=830.0),
            time.time(),
        )
        store.store_result(
            Delivery(entry_id=entry_id.decode(), ticket_id=ticket_id, deliveries=1, claimed=False),
            result,
            {},
            False,
            stored.accepted_at,
        )
        if queue:
            client.zadd(f"{prefix}:queue:{queue}", {ticket_id: stored.accepted_at})
    finally:
        client.close()


def seed_status(prefix: str, calibration: dict | None = None, audit: dict | None = None) -> None:
    """A worker heartbeat (written through the store, as service.worker does) and an audit state
    (as the audit job does)."""
    client = redis.Redis.from_url(REDIS_URL)
    try:
        beat = Heartbeat(
            worker="w1",
            pid=1,
            at=time.time(),
            model="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            sha256="0" * 64,
            prompt_sha="p" * 64,
            processed=12,
            calibration=None if calibration is None else msgspec.convert(calibration, WorkerCalibration),
        )
        WorkerStore(client, Keys(prefix), result_ttl_s=3600).heartbeat(beat, ttl_s=120)
        if audit:
            AuditStore(client, Keys(prefix)).publish_state(audit)
    finally:
        client.close()


def csrf_of(html: str) -> str:
    match = _CSRF.search(html)
    assert match, "no CSRF field on the page"
    return match.group(1)


def sign_in(client: httpx.Client, token: str, name: str = "ana") -> httpx.Response:
    """Through the login form, as a browser does: GET (nonce cookie + token), then POST."""
    form = client.get("/ui/login")
    assert form.status_code == 200, form.text
    return client.post("/ui/login", data={"csrf": csrf_of(form.text), "name": name, "token": token, "next": "/ui"})


def post_ticket(ingest: httpx.Client, subject: str | None, body: str) -> str:
    payload = {"body": body} if subject is None else {"subject": subject, "body": body}
    response = ingest.post("/v1/tickets", json=payload)
    assert response.status_code == 202, response.text
    return response.json()["id"]
