"""The listing's read path: the global order's rows are checked on their text as stored, and a
catch-up folds what was visible when it was called without chasing a busy writer.

Every test runs on SQLite and on PostgreSQL (the `backend` fixture), against real stores.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from test_match_list import insert_row, insert_undecodable, listing, real_match, write

from bergen.api.chain import canonical_json
from bergen.api.stored import StoredEvent
from bergen.domain.events import PointsScored, SeatTaken
from bergen.server.keys import LogKeys
from bergen.server.projections import MATCH_LIST, MatchListProjection, RowCheck, fold_into
from bergen.server.store import EventStore, MatchSummary, open_store
from bergen.server.store.authenticity import ReadEvent


@pytest.fixture
def keyed(backend: Any) -> Iterator[tuple[EventStore, LogKeys]]:
    """A store writing and checking rows under a log key, as a server's does."""
    keys = LogKeys.generate()
    s = open_store(backend.url, log_keys=keys)
    yield s, keys
    s.close()


def read_everything(store: EventStore, count: int | None = None) -> tuple[StoredEvent, ...]:
    """The whole global order; with `count`, once it holds that many events (on PostgreSQL a
    transaction elsewhere in the cluster can hold it back for a moment: a bound, not a timing
    check)."""
    deadline = time.monotonic() + 60
    while True:
        got = store.read_all(0, 1_000_000)
        if count is None or len(got) >= count:
            return got
        assert time.monotonic() < deadline, "the global order never showed every event"
        time.sleep(0.01)


def test_the_global_order_gives_each_rows_payload_and_metadata_text_as_stored(
    keyed: tuple[EventStore, LogKeys],
) -> None:
    store, _ = keyed
    written = write(store, "m", real_match(5))

    read = read_everything(store, len(written))

    assert read == written  # equal to the events as written, field for field
    for e in read:
        assert type(e) is ReadEvent
        assert e.texts is not None
        payload_text, metadata_text = e.texts
        assert json.loads(payload_text) == e.payload
        assert payload_text == canonical_json(e.payload, "payload").decode()
        assert json.loads(metadata_text)["rules_version"] == e.metadata.rules_version


def test_every_row_as_read_passes_the_check_and_a_row_changed_after_reading_does_not(
    keyed: tuple[EventStore, LogKeys],
) -> None:
    store, keys = keyed
    written = write(store, "m", real_match(4))  # a whole match
    read = read_everything(store, len(written))
    check = RowCheck(keys)
    for e in read:
        assert check.refusal(e) is None, e.seq
        check.folded(e)

    # The same rows rebuilt from their values (no stored text): checked on the values.
    fresh = RowCheck(keys)
    for e in read:
        plain = StoredEvent(*e)
        assert type(plain) is StoredEvent
        assert fresh.refusal(plain) is None, e.seq
        fresh.folded(plain)

    # A value changed after reading (its text unchanged) or the text changed: refused.
    scored = next(e for e in read if e.type == "PointsScored")
    changed = scored._replace(payload={**scored.payload, "points": scored.payload["points"] + 1})
    assert "does not verify" in (RowCheck(keys).refusal(changed) or "")
    assert changed.texts is None  # made from values: checked on them
    assert scored.texts is not None
    text, metadata = scored.texts
    other = ReadEvent(*scored)
    other.texts = (text.replace('"points":', '"points":1'), metadata)
    assert "does not verify" in (RowCheck(keys).refusal(other) or "")
    other.texts = (text, metadata.replace("rules", "Rules"))
    assert "does not verify" in (RowCheck(keys).refusal(other) or "")


def test_a_row_whose_stored_text_was_respaced_is_not_listed_as_the_matchs_own_fold_refuses_it(
    backend: Any, keyed: tuple[EventStore, LogKeys], caplog: pytest.LogCaptureFixture
) -> None:
    """The payload's text was changed in the table without changing what it parses to: its
    authenticator covers the text, so the match's own fold refuses the row, and so must the
    listing (re-encoding the parsed payload would make it look authentic)."""
    store, keys = keyed
    written = write(store, "seating", real_match(1))  # MatchCreated only
    insert_row(backend, "seating", 2, SeatTaken(0, "ada", ""), written[-1].hash, keys)
    read_everything(store, 2)
    read = store.read_all(written[-1].position, 1)[0]
    assert isinstance(read, ReadEvent) and read.texts is not None
    text = read.texts[0]
    respaced = text.replace(",", ", ")
    assert respaced != text and json.loads(respaced) == json.loads(text)
    backend.tamper(
        "UPDATE events SET payload = %s WHERE stream_id = 'seating' AND seq = 2"
        if backend.name == "sqlite"
        else "UPDATE events SET payload = %s::json WHERE stream_id = 'seating' AND seq = 2",
        (respaced,),
    )
    with pytest.raises(Exception, match="does not verify"):
        store.read_rows("seating")

    projection = MatchListProjection(store)
    with caplog.at_level(logging.CRITICAL, logger="bergen.server.projections"):
        projection.catch_up()

    (row,) = listing(projection)
    assert (row.match_id, row.version, row.players) == ("seating", 1, ["", "", ""])
    refusals = [r.getMessage() for r in caplog.records if r.levelno == logging.CRITICAL]
    assert len(refusals) == 1 and "seating seq 2" in refusals[0], refusals


def test_a_forged_score_is_refused_on_the_read_path_and_the_match_stays_listed_as_it_was(
    backend: Any, keyed: tuple[EventStore, LogKeys]
) -> None:
    store, _ = keyed
    written = write(store, "playing", real_match(2))
    read_everything(store, len(written))
    projection = MatchListProjection(store)
    projection.catch_up()
    (before,) = listing(projection)
    assert before.version == len(written)

    hand = max(e.payload.get("hand", 0) for e in written)
    forged = PointsScored(hand, 1, 14, "domino", 14, 1)
    insert_row(backend, "playing", len(written) + 1, forged, written[-1].hash)  # made-up mac
    read_everything(store, len(written) + 1)
    assert type(store.read_all(written[-1].position, 1)[0]) is ReadEvent
    projection.catch_up()

    (after,) = listing(projection)
    assert after == before


def listed_by_values(
    store: EventStore, keys: LogKeys, rows: Sequence[StoredEvent]
) -> dict[str, MatchSummary]:
    """The listing folded from `rows` rebuilt as plain StoredEvents (checked on their values,
    as every row was before the read path kept its text), in one go."""
    summaries: dict[str, MatchSummary] = {}
    fold_into(summaries, [StoredEvent(*e) for e in rows], RowCheck(keys))
    return summaries


def test_a_mix_of_matches_is_listed_as_folding_the_rows_by_their_values_lists_it(
    keyed: tuple[EventStore, LogKeys],
) -> None:
    store, keys = keyed
    total = sum(len(write(store, f"match-{i}", real_match(i))) for i in range(24))
    rows = read_everything(store, total)
    projection = MatchListProjection(store, batch=13)
    projection.catch_up()

    expected = listed_by_values(store, keys, rows)
    got = {r.match_id: r for r in listing(projection)}

    assert len(got) == 24
    assert {m: (s.phase, s.players, s.scores, s.version) for m, s in got.items()} == {
        m: (s.phase, s.players, s.scores, s.version) for m, s in expected.items()
    }
    assert {s.phase for s in got.values()} == {"seating", "playing", "ended"}


class Busy:
    """A store whose global order grows by a match's events after each read, as under a
    writer that never stops: counts the reads."""

    def __init__(self, store: EventStore, writes: int) -> None:
        self._store = store
        self._writes = writes
        self.reads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def read_all(
        self, after_position: int = 0, limit: int = 1000, types: Any = None
    ) -> tuple[StoredEvent, ...]:
        got = self._store.read_all(after_position, limit, types)
        self.reads += 1
        if self.reads <= self._writes:
            write(self._store, f"later-{self.reads}", real_match(1))
        return got


def test_a_catch_up_folds_what_was_there_when_called_and_leaves_later_writes_to_the_next(
    keyed: tuple[EventStore, LogKeys],
) -> None:
    store, _ = keyed
    total = sum(len(write(store, f"match-{i}", real_match(i))) for i in range(3))
    read_everything(store, total)
    busy = Busy(store, writes=5)
    projection = MatchListProjection(busy, batch=1000)  # type: ignore[arg-type]

    assert projection.catch_up() == total
    assert busy.reads == 1  # not one read (and one fold transaction) per later write

    # The later writes are folded by the calls that follow.
    deadline = time.monotonic() + 60
    while len(listing(projection)) < 8:
        assert time.monotonic() < deadline, "the later writes were never listed"
        projection.catch_up()
    assert sorted(r.match_id for r in listing(projection)) == sorted(
        [f"match-{i}" for i in range(3)] + [f"later-{i}" for i in range(1, 6)]
    )


def test_a_catch_up_far_behind_reads_full_batches_until_it_reaches_the_end(
    keyed: tuple[EventStore, LogKeys],
) -> None:
    store, _ = keyed
    total = sum(len(write(store, f"match-{i}", real_match(i))) for i in range(4))
    read_everything(store, total)
    busy = Busy(store, writes=0)
    projection = MatchListProjection(busy, batch=10)  # type: ignore[arg-type]

    folded, calls = projection.catch_up(), 1
    deadline = time.monotonic() + 60
    while folded < total:
        # On PostgreSQL a transaction of another database that ended between the snapshot and
        # the look at pg_stat_activity still counts, so the horizon can fall back for a read
        # and end a catch-up at a short batch: the next one goes on from there.
        assert time.monotonic() < deadline, "the catch-ups never reached the end"
        folded, calls = folded + projection.catch_up(), calls + 1
    assert folded == total
    # Each read was a full batch but the one that ended its catch-up (one call, quiet).
    assert busy.reads <= total // 10 + calls


def test_a_catch_up_goes_on_past_a_row_that_does_not_decode(
    backend: Any, keyed: tuple[EventStore, LogKeys]
) -> None:
    """A row no server wrote ends its read short; what follows it was visible too, and the
    same catch-up folds it (a short read there is not the end of the global order)."""
    store, _ = keyed
    seating = write(store, "seating", real_match(1))
    insert_undecodable(backend, "seating", seating[-1].hash)
    new = write(store, "new", real_match(3))
    deadline = time.monotonic() + 60  # a bound for the global order's horizon on PostgreSQL
    while len(store.read_all(new[0].position - 1, 1000)) < len(new):
        assert time.monotonic() < deadline, "the global order never showed the new match"
        time.sleep(0.01)
    projection = MatchListProjection(store, batch=1000)

    projection.catch_up()

    assert store.match_list().position(MATCH_LIST) == new[-1].position
    rows = {r.match_id: r for r in listing(projection)}
    assert rows["new"].version == len(new)
    assert rows["seating"].version == 1
