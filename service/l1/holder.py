"""Holds the live rule pack and swaps in a new one on reload, only if it validates.

The service builds one `PackHolder` at start-up (a broken pack raises PackError there, so the
service refuses to start) and calls `reload()` on SIGHUP. A failed reload keeps the last good
pack, logs why, and counts it in triage_rules_reload_total{outcome="error"}.
"""

from __future__ import annotations

import threading
from pathlib import Path

import structlog

from service import metrics
from service.l1.pack import PackError, RulePack, load_pack

log = structlog.get_logger()


class PackHolder:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._pack = load_pack(self.path)
        self._lock = threading.Lock()  # one reload at a time; readers never wait
        self._pending = False
        log.info("rules_loaded", path=str(self.path), rules_sha=self._pack.sha, rules=len(self._pack.rules))

    @property
    def pack(self) -> RulePack:
        """The current pack; a plain attribute read, safe from any thread."""
        return self._pack

    def reload(self) -> bool:
        """Load the pack again; True if a new pack was swapped in, False if the old one stays.

        Safe to call from a signal handler: if a reload is already running (in this thread,
        interrupted, or in another), the call returns False at once and the running reload
        reads the files once more before it finishes, so no request is lost.
        """
        self._pending = True
        if not self._lock.acquire(blocking=False):
            return False
        try:
            swapped = False
            while self._pending:
                self._pending = False
                swapped = self._reload_once()
            return swapped
        finally:
            self._lock.release()

    def _reload_once(self) -> bool:
        previous = self._pack
        try:
            pack = load_pack(self.path)
        except PackError as error:
            metrics.rules_reload_total.labels(outcome="error").inc()
            log.error("rules_reload_failed", path=str(self.path), rules_sha=previous.sha, problems=error.problems)
            return False
        except Exception as error:  # a reload must never take the service down
            metrics.rules_reload_total.labels(outcome="error").inc()
            log.exception("rules_reload_failed", path=str(self.path), rules_sha=previous.sha, problems=[repr(error)])
            return False
        self._pack = pack
        metrics.rules_reload_total.labels(outcome="ok").inc()
        log.info(
            "rules_reloaded", path=str(self.path), rules_sha=pack.sha, previous_sha=previous.sha, rules=len(pack.rules)
        )
        return True
