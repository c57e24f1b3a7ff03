"""End to end on the real model and a real Redis: tickets through the API and the worker,
operator decisions through the API, `recalibrate` on those decisions plus a small labelled
corpus of its own, then a worker that hot-loads the artifact classifies a new ticket with
calibrated: true.

The corpus is tests/calibration/data/e2e.jsonl: 41 tickets written for this test (10 green,
10 yellow, 21 red, each red flag on 7), enough for every class of risk and of each red flag at
the test's min_per_class of 5. Its hidden states come from the replay cache
(var/calibration-cache); on a fresh machine the first run replays those 41 tickets instead of
the dev set's 160. The artifact it makes is a plumbing check, not a calibration to serve.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import msgspec
import pytest
import redis

from service.calibration import CalibrationWatcher, load_latest
from service.calibration.artifact import read_meta
from service.calibration.recalibrate import Options, run
from service.labelled import read_labelled
from service.metrics import REGISTRY
from service.worker import Worker
from tests.support import INGEST, OPERATOR, REDIS_URL, ApiServer, make_settings

pytestmark = pytest.mark.model

CORPUS = Path(__file__).parent / "data" / "e2e.jsonl"
MIN_PER_CLASS = 5

# A handful of labelled tickets that are not in the dev set: (subject, body, level, flags)
DECIDED = [
    ("Export to CSV", "Hi, how can I export my monthly report to CSV? Thanks!", "green", {}),
    (
        "Still broken",
        "Your app crashed again and I lost the whole draft I was writing. This is "
        "the third time this week and I am getting really annoyed.",
        "yellow",
        {},
    ),
    (
        "Refund",
        "We were charged twice for the March invoice. Please refund the duplicate "
        "payment of 480 EUR to our card today.",
        "red",
        {"commitment": True},
    ),
    (
        "Remove user",
        "Please delete the account of our former employee Marc Dubois and revoke all of his access rights immediately.",
        "red",
        {"destructive_or_access": True},
    ),
]
NEW_TICKET = ("Dark mode", "Is there a dark mode in the mobile app? Where do I switch it on?")


@pytest.fixture(scope="module")
def classifier():
    from service.l2 import Classifier

    clf = Classifier.from_settings(make_settings("unused"))
    yield clf
    clf.close()


def _post(api, subject, body):
    r = httpx.post(
        f"{api.url}/v1/tickets",
        json={"subject": subject, "body": body},
        headers={"Authorization": f"Bearer {INGEST}"},
        timeout=10,
    )
    assert r.status_code == 202, r.text
    return r.json()["id"]


def _result(api, ticket_id):
    r = httpx.get(f"{api.url}/v1/tickets/{ticket_id}", headers={"Authorization": f"Bearer {INGEST}"}, timeout=10)
    return r.json()


def _decide(api, ticket_id, level, flags):
    body = {
        "operator": "e2e",
        "action": "edit",
        "correct_level": level,
        "flags": {"commitment": False, "destructive_or_access": False, "third_party_personal_data": False, **flags},
    }
    r = httpx.post(
        f"{api.url}/v1/tickets/{ticket_id}/decision",
        json=body,
        headers={"Authorization": f"Bearer {OPERATOR}"},
        timeout=10,
    )
    assert r.status_code == 201, r.text


# A clean clone has no replay cache: the first run replays the corpus (minutes on 2 cores).
@pytest.mark.timeout(1800)
def test_decisions_to_artifact_to_calibrated_result(prefix, redis_client, classifier, tmp_path):
    cal_dir = tmp_path / "calibration"
    # a generous L2 timeout: a busy 2-core machine must not turn a ticket into "unavailable"
    settings = make_settings(prefix, calibration_dir=str(cal_dir), l2_timeout_s=600.0)
    client = redis.Redis.from_url(REDIS_URL)
    classifier.set_calibrator(None)
    with ApiServer(settings) as api:
        # 1. tickets classified by the real worker, uncalibrated; operators decide them
        ids = [_post(api, s, b) for s, b, _, _ in DECIDED]
        assert Worker(settings, client, classifier, consumer="w1").run(burst=True) == len(ids)
        for tid, (_, _, level, flags) in zip(ids, DECIDED, strict=True):
            assert _result(api, tid)["l2"]["calibrated"] is False
            _decide(api, tid, level, flags)

        # 2. recalibrate from the decisions stream plus the test's own corpus
        corpus_n = len(read_labelled(CORPUS))
        opts = Options(out=str(cal_dir), corpus=str(CORPUS), folds=3, min_per_class=MIN_PER_CLASS, command="pytest e2e")
        outcome = run(settings, opts, classifier=lambda: classifier, redis_client=redis_client)
        meta = outcome.meta
        assert meta.sources == {"decisions": len(DECIDED), "corpus": corpus_n}
        assert meta.model.sha256 == classifier.model_info.sha256
        assert meta.prompt_sha == classifier.prompt_sha
        assert (outcome.path / "report.md").exists()
        assert meta.evaluation.nested.n == corpus_n + len(DECIDED)

        # 3. a worker with the watcher hot-loads it and the next result is calibrated
        watcher = CalibrationWatcher(
            cal_dir, classifier.model_info.sha256, classifier.prompt_sha, classifier.set_calibrator
        )
        worker = Worker(settings, client, classifier, consumer="w2", calibration_watcher=watcher)
        new = _post(api, *NEW_TICKET)
        assert worker.run(burst=True) == 1
        result = _result(api, new)
        l2 = result["l2"]
        assert l2["method"] in ("logits", "generated")
        assert l2["calibrated"] is True
        assert l2["calibration_version"] == meta.version
        for name, entry in meta.questions.items():
            answer = l2["answers"][name]
            if answer["method"] == "generated":
                continue  # low coverage: constrained generation is never calibrated
            assert answer["calibrated"] is True, name
            assert answer["method"] == ("head" if entry.method in ("head", "head_all") else "logits")
            assert answer["raw_probabilities"] is not None
            assert sum(answer["probabilities"].values()) == pytest.approx(1.0)
        assert REGISTRY.get_sample_value("triage_calibration_stale") == 0
        assert (
            REGISTRY.get_sample_value("triage_calibration_ece_ratio", {"question": "risk"})
            == meta.questions["risk"].ece_after
        )

        # 4. an artifact for other prompts is stale: ignored, counted, results uncalibrated
        stale_dir = tmp_path / "stale"
        copy = stale_dir / "29990101T000000Z-stale000"
        shutil.copytree(outcome.path, copy)
        data = msgspec.json.decode((copy / "artifact.json").read_bytes())
        data["prompt_sha"] = "0" * 64
        data["version"] = copy.name
        (copy / "artifact.json").write_bytes(msgspec.json.encode(data))
        assert read_meta(copy).prompt_sha == "0" * 64
        outcome_stale = load_latest(stale_dir, classifier.model_info.sha256, classifier.prompt_sha)
        assert outcome_stale.calibrator is None and outcome_stale.stale
        classifier.set_calibrator(outcome_stale.calibrator)
        again = classifier.classify(f"{NEW_TICKET[0]}\n\n{NEW_TICKET[1]}", timeout_s=600)
        assert again.result.calibrated is False
        assert all(not a.calibrated for a in again.result.answers.values())
        assert REGISTRY.get_sample_value("triage_calibration_stale") == 1
    classifier.set_calibrator(None)
    client.close()
