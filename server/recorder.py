"""The records of ended matches, made as the matches end, so that an export reads them.

A finished match's record is the same every time it is made (bergen.server.store.records),
and making one costs the match loaded, folded, proved in the transparency log and signed:
some milliseconds. The `Recorder` makes it once, soon after the end, in a thread of its own:
at start, those of every ended match listed without one (a server started on an older log
makes them then, in the background, as its listing is folded), then each match whose end the
feed delivers. A record that cannot be made yet (its end not in the transparency log yet,
say) is tried again later; one whose log does not verify is left to the calls that ask for
it, which say why.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from bergen.api.stored import StoredEvent
from bergen.domain.errors import BergenError

from .identity import Caller
from .projections import MATCH_LIST
from .queries import MatchQueries
from .store import EventStore
from .worker import Worker

log = logging.getLogger("bergen.server.recorder")

BATCH = 100
"""Records made and kept a batch (one statement reads what is kept, one writes)."""
RETRY_S = 5.0
"""How long a record that could not be made waits before it is tried again."""
SWEEP_S = 600.0
"""How often the listing is looked through for ended matches without a record (one a
replica missed: made while it was down, or refused for a while); every RETRY_S while the
listing is folding the stored log."""
GIVE_UP_AFTER = 20
"""Tries after which a record that cannot be made is left to the calls that ask for it."""


class Recorder(Worker):
    """Makes and keeps the record of each match that ends (see the module's doc)."""

    def __init__(self, store: EventStore, queries: MatchQueries, public_key: str) -> None:
        super().__init__("bergen-recorder")
        self._store = store
        self._queries = queries
        self._key = public_key
        self._ended: dict[str, None] = {}
        self._tries: dict[str, int] = {}

    def note(self, events: Sequence[StoredEvent]) -> None:
        """Events any replica wrote (the feed's): a match that ended is to be recorded."""
        fresh = False
        for e in events:
            if e.type == "MatchEnded":
                self._ended[e.stream_id] = None
                fresh = True
        if fresh:
            self._wake.set()

    def _run(self) -> None:
        sweep_at = float("-inf")
        while not self._stop.is_set():
            try:
                if time.monotonic() >= sweep_at:
                    sweep_at = time.monotonic() + self._sweep()
                left = self._record()
            except BergenError as e:
                log.warning("records of ended matches not made now: %s", e)
                left = True
            except Exception:
                log.exception("records of ended matches not made: a bug")
                left = True
            if self._stop.is_set():
                return
            if left:
                self._stop.wait(RETRY_S)
            else:
                self._wake.wait(max(0.0, sweep_at - time.monotonic()))
                self._wake.clear()

    def _sweep(self) -> float:
        """Note the ended matches listed without a record. Returns the seconds until the next
        sweep: RETRY_S while the listing is still folding the stored log (a first start on
        an older log: the ended matches are listed as it goes), else SWEEP_S. Raises
        StorageUnavailable."""
        head = self._store.head_position()
        for match_id in self._store.records().unkept(self._key):
            self._ended.setdefault(match_id, None)
        behind = self._store.match_list().position(MATCH_LIST) < head
        return RETRY_S if behind else SWEEP_S

    def _record(self) -> bool:
        """Make the records noted, a batch at a time, until none is left or the server
        stops. Returns whether some could not be made (to be tried again). Raises
        StorageUnavailable."""
        while self._ended and not self._stop.is_set():
            batch = list(self._ended)[:BATCH]
            refused: list[str] = []
            self._queries.records(Caller(), batch, refused)
            for match_id in batch:
                self._ended.pop(match_id, None)
            if refused:
                return self._refused(refused)
        return False

    def _refused(self, refused: Sequence[str]) -> bool:
        """Note `refused` to be tried again, up to GIVE_UP_AFTER times each."""
        for match_id in refused:
            tries = self._tries.get(match_id, 0) + 1
            if tries >= GIVE_UP_AFTER:
                self._tries.pop(match_id, None)
                log.warning("match %s: its record cannot be made; left to GetRecord", match_id)
                continue
            self._tries[match_id] = tries
            self._ended[match_id] = None
        return True
