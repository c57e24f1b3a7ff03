"""The API after Redis restarts under it: the first request is accepted, not answered 503.

Its pooled connections all died with the old server; the client reconnects and sends again.
A real API process and a private redis-server (loadtest/harness.py), SIGKILLed and restarted
with its append-only file, so what was accepted before is still there."""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "loadtest"))
import harness  # noqa: E402


def test_every_post_after_a_redis_restart_is_accepted_and_nothing_before_is_lost(tmp_path):
    with harness.Stack(tmp_path) as stack:
        stack.start_redis(fsync="always")
        stack.start_api()
        before = [i for s, i in stack.post_tickets([{"body": f"before {n}"} for n in range(3)]) if s == 202]
        assert len(before) == 3
        stack.kill_redis()
        time.sleep(1)
        stack.start_redis(fsync="always")
        after = stack.post_tickets([{"body": f"after {n}"} for n in range(3)])
        assert [status for status, _ in after] == [202, 202, 202]
        for ticket_id in before + [i for _, i in after]:
            assert stack.ticket(ticket_id)["status"] == "queued"
