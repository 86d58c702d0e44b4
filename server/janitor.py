"""The server's own housekeeping: a match still seating long after it was created is
abandoned, so that a client cannot hold seats (and a listing entry) for ever.

Every replica runs one `Janitor`; the abandoning goes through the command side's unit of
work under one command id, so that with several replicas one writes it and the others find
it done.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from bergen.domain.errors import BergenError
from bergen.domain.state import SEATING

from .commands import MatchCommands
from .projections import MatchListProjection
from .store import EventStore
from .worker import Worker

log = logging.getLogger("bergen.server.janitor")

SEATING_TIMEOUT_S = 600.0
"""A match still seating this long after its creation is abandoned (`--seating-timeout`)."""
MAX_INTERVAL_S = 30.0
PAGE = 100


def seating_note(timeout_s: float) -> str:
    """The abandon note of a match left seating for `timeout_s`."""
    return f"abandoned by the server: still seating {timeout_s:g} s after it was created"


class Janitor(Worker):
    """Abandons matches left seating longer than `timeout_s`, looking every `interval_s`
    (a quarter of the timeout, at most MAX_INTERVAL_S) in a thread of its own."""

    def __init__(
        self,
        store: EventStore,
        listing: MatchListProjection,
        commands: MatchCommands,
        timeout_s: float = SEATING_TIMEOUT_S,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"the seating timeout must be positive, not {timeout_s}")
        super().__init__("bergen-janitor")
        self._store = store
        self._listing = listing
        self._commands = commands
        self._timeout = timedelta(seconds=timeout_s)
        self._note = seating_note(timeout_s)
        self._interval = min(timeout_s / 4, MAX_INTERVAL_S)
        self._now = now

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.sweep()
            except BergenError as e:
                # The store is down, say: the next sweep tries again.
                log.warning("seating sweep failed: %s", e)
            except Exception:
                log.exception("seating sweep failed: a bug")

    def sweep(self) -> list[str]:
        """Abandon every match seating past the timeout. Returns their ids. Raises
        StorageUnavailable."""
        abandoned = []
        for match_id in self._seating():
            if self._stop.is_set():
                break
            events = self._store.read_stream(match_id, 1, limit=1)
            if not events or self._now() - events[0].recorded_at < self._timeout:
                continue
            try:
                if self._commands.abandon_unseated(match_id, self._note):
                    abandoned.append(match_id)
            except BergenError as e:
                log.warning("match %s: cannot abandon it: %s", match_id, e)
        return abandoned

    def _seating(self) -> list[str]:
        """The ids of the matches seating now, oldest last."""
        ids: list[str] = []
        token = ""
        while True:
            rows, token = self._listing.page(SEATING.value, "", PAGE, token)
            ids += [r.match_id for r in rows]
            if not token:
                return ids
