"""The match listing: a projection folded from the events into the database, paged by keyset.

Every test runs on SQLite and on PostgreSQL (the `backend` fixture), against real stores.
"""

from __future__ import annotations

import base64
import logging
import random
import secrets
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from bergen.api.stored import EventMetadata
from bergen.domain import codec
from bergen.domain.errors import InvalidArgument
from bergen.domain.events import Event, SeatTaken
from bergen.domain.policies import greedy_policy
from bergen.domain.rules import RULES_VERSION, make_rules
from bergen.domain.simulation import play_match
from bergen.domain.state import State, fold
from bergen.server.keys import LogKeys
from bergen.server.projections import (
    MATCH_LIST,
    MatchListProjection,
    page_token,
    parse_page_token,
)
from bergen.server.store import Append, EventStore, MatchSummary, NewEvent, StoredEvent, open_store
from bergen.server.store.batch import build_rows

NAMES = ("ada", "bo", "cy", "dee", "eve")


def real_match(i: int) -> list[Event]:
    """The events of a real match, cut short for most: some seating, some playing, some
    ended; seats named from NAMES (a name may sit twice in one match)."""
    seats = 2 + i % 3
    partnerships = seats == 4 and i % 2 == 0
    events, _ = play_match(
        f"match-{i}",
        make_rules(seats, partnerships),
        seats,
        partnerships,
        i.to_bytes(32, "big"),
        [greedy_policy] * seats,
        random.Random(i),
        names=[NAMES[(i * 7 + k * 3) % len(NAMES)] for k in range(seats)],
    )
    cut = (len(events), 1, seats, 1 + seats + 5 + i % 40)[i % 4]
    return events[:cut]


def write(store: EventStore, match_id: str, events: Sequence[Event]) -> tuple[StoredEvent, ...]:
    """Append `events` to a new stream in a few commands, as a server would."""
    written: list[StoredEvent] = []
    for start in range(0, len(events), 7):
        chunk = [NewEvent(*codec.encode(e)) for e in events[start : start + 7]]
        written += store.append(Append(match_id, start, chunk)).events
    return tuple(written)


def fold_all(projection: MatchListProjection, store: EventStore, last: StoredEvent) -> None:
    """Catch `projection` up to the event `last`: on PostgreSQL a transaction elsewhere in the
    cluster can hold back the global order for a moment (a bound, not a timing check)."""
    deadline = time.monotonic() + 60
    while store.match_list().position(MATCH_LIST) != last.position:
        assert time.monotonic() < deadline, "the listing never reached the last event"
        projection.catch_up()
        time.sleep(0.01)


def listed_as_folded(state: State) -> tuple[str, list[str], list[int], int]:
    return (
        str(state.phase),
        [p.name if p is not None else "" for p in state.players],
        list(state.scores),
        state.version,
    )


def every_page(
    projection: MatchListProjection, phase: str | None = None, player: str = "", size: int = 7
) -> Iterator[list[MatchSummary]]:
    token = ""
    while True:
        rows, token = projection.page(phase, player, size, token)
        yield rows
        if not token:
            return


def listing(projection: MatchListProjection, **filters: str) -> list[MatchSummary]:
    return [row for page in every_page(projection, **filters) for row in page]


@pytest.fixture
def other_store(store: EventStore, backend: Any) -> Iterator[EventStore]:
    """A second store on the same database, as another replica would have."""
    second = open_store(backend.url)
    yield second
    second.close()


def test_the_listing_is_what_folding_each_match_gives(store: EventStore) -> None:
    folded = {}
    for i in range(40):
        events = real_match(i)
        last = write(store, f"match-{i}", events)[-1]
        folded[f"match-{i}"] = fold(events)
    projection = MatchListProjection(store, batch=50)
    fold_all(projection, store, last)

    rows = listing(projection)

    assert [r.match_id for r in rows] == [f"match-{i}" for i in reversed(range(40))]
    for r in rows:
        state = folded[r.match_id]
        assert (r.phase, r.players, r.scores, r.version) == listed_as_folded(state), r.match_id
        assert (r.name, r.seats, r.partnerships, r.preset) == (
            state.name,
            state.seats,
            state.partnerships,
            state.rules.preset,
        )
    assert {str(s.phase) for s in folded.values()} == {"seating", "playing", "ended"}


def write_stepwise(
    store: EventStore, match_id: str, events: Sequence[Event]
) -> tuple[StoredEvent, ...]:
    """Append `events` one command each up to the first deal, then a few at a time: the
    match's creation, its seats and its first deal are recorded at different times."""
    first_deal = next((k for k, e in enumerate(events) if type(e).__name__ == "Dealt"), None)
    upto = len(events) if first_deal is None else first_deal + 1
    written: list[StoredEvent] = []
    for k in range(upto):
        written += store.append(Append(match_id, k, [NewEvent(*codec.encode(events[k]))])).events
    for start in range(upto, len(events), 7):
        chunk = [NewEvent(*codec.encode(e)) for e in events[start : start + 7]]
        written += store.append(Append(match_id, start, chunk)).events
    return tuple(written)


def test_each_match_is_listed_with_when_it_was_created_and_started_and_its_hand(
    store: EventStore,
) -> None:
    written = {}
    for i in range(16):
        events = real_match(i)
        stored = write_stepwise(store, f"match-{i}", events)
        written[f"match-{i}"] = (fold(events), stored)
    projection = MatchListProjection(store, batch=30)
    fold_all(projection, store, stored[-1])

    rows = listing(projection)

    assert len(rows) == 16
    for r in rows:
        state, stored = written[r.match_id]
        dealt = [e for e in stored if e.type == "Dealt"]
        assert r.created_at == stored[0].recorded_at, r.match_id
        assert r.started_at == (dealt[0].recorded_at if dealt else None), r.match_id
        assert r.hand == state.hand, r.match_id
        assert r.created_at.utcoffset() is not None
    assert {r.hand for r in rows if r.phase == "seating"} == {0}
    assert any(r.hand > 1 for r in rows)  # a match past its first hand lists the one in play
    started = [r for r in rows if r.started_at is not None]
    assert started and all(r.started_at > r.created_at for r in started)
    assert all(r.started_at is None for r in rows if r.phase == "seating")


def test_filters_by_phase_and_by_a_seated_name_give_exactly_the_matching_matches(
    store: EventStore,
) -> None:
    folded = {}
    for i in range(30):
        events = real_match(i)
        last = write(store, f"match-{i}", events)[-1]
        folded[f"match-{i}"] = fold(events)
    projection = MatchListProjection(store)
    fold_all(projection, store, last)
    newest_first = [f"match-{i}" for i in reversed(range(30))]

    for phase in ("seating", "playing", "ended"):
        for player in ("", *NAMES):
            got = [r.match_id for r in listing(projection, phase=phase, player=player)]
            want = [
                m
                for m in newest_first
                if folded[m].phase == phase
                and (not player or player in [p.name for p in folded[m].players if p])
            ]
            assert got == want, (phase, player)
    ada = [r.match_id for r in listing(projection, player="ada")]
    assert ada == [m for m in newest_first if "ada" in [p.name for p in folded[m].players if p]]


def test_pages_are_20_by_default_and_100_at_most(store: EventStore) -> None:
    created = real_match(1)[:1]
    for i in range(130):
        last = write(store, f"m{i:03}", created)[-1]
    projection = MatchListProjection(store)
    fold_all(projection, store, last)

    assert len(projection.page(None, "", 0, "")[0]) == 20
    first, token = projection.page(None, "", 1000, "")
    assert len(first) == 100 and token
    rest, last = projection.page(None, "", 1000, token)
    assert len(rest) == 30 and last == ""


def test_two_replicas_folding_one_database_fold_every_event_once(
    store: EventStore, other_store: EventStore
) -> None:
    replicas = [MatchListProjection(store, batch=20), MatchListProjection(other_store, batch=20)]
    folded_here = [0, 0]
    written: list[int] = []

    def run(k: int) -> None:
        own = (store, other_store)[k]
        count = 0
        for i in range(k, 40, 2):
            count += len(write(own, f"match-{i}", real_match(i)))
            folded_here[k] += replicas[k].catch_up()
        written.append(count)

    threads = [threading.Thread(target=run, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in (0, 1):
        folded_here[k] += replicas[k].catch_up()
    deadline = time.monotonic() + 30
    while sum(folded_here) < sum(written) and time.monotonic() < deadline:
        # PostgreSQL may hold back a late commit for a moment (a bound, not a timing check).
        folded_here[0] += replicas[0].catch_up()

    assert sum(folded_here) == sum(written)
    for replica in replicas:
        rows = {r.match_id: r for r in listing(replica)}
        assert sorted(rows) == sorted(f"match-{i}" for i in range(40))
        for i in range(40):
            r = rows[f"match-{i}"]
            assert (r.phase, r.players, r.scores, r.version) == listed_as_folded(
                fold(real_match(i))
            )


def test_a_restart_resumes_from_the_stored_position_and_reads_only_what_is_new(
    store: EventStore, other_store: EventStore
) -> None:
    for i in range(12):
        last = write(store, f"match-{i}", real_match(i))[-1]
    fold_all(MatchListProjection(store), store, last)

    restarted = MatchListProjection(other_store)
    assert restarted.catch_up() == 0
    assert restarted.events_read == 0
    assert len(listing(restarted)) == 12

    new = write(store, "match-new", real_match(12))
    again = MatchListProjection(other_store)
    fold_all(again, other_store, new[-1])
    assert again.events_read == len(new)
    assert listing(again)[0].match_id == "match-new"


def test_a_match_written_here_is_in_the_next_page_without_waiting_for_a_follower(
    store: EventStore,
) -> None:
    projection = MatchListProjection(store)
    assert projection.page(None, "", 0, "")[0] == []
    for i in range(3):
        events = write(store, f"match-{i}", real_match(i * 4))
        projection.expect(events)
        rows, _ = projection.page(None, "", 0, "")
        assert rows[0].match_id == f"match-{i}"
        assert rows[0].version == len(events)


def test_walking_the_pages_while_matches_are_created_gives_each_earlier_match_once(
    store: EventStore, other_store: EventStore
) -> None:
    created = real_match(1)[:1]
    for i in range(60):
        last = write(store, f"old-{i:02}", created)[-1]
    projection = MatchListProjection(store)
    fold_all(projection, store, last)
    stop = threading.Event()

    def create() -> None:
        n = 0
        while not stop.is_set():
            write(other_store, f"new-{n:04}", created)
            n += 1

    creator = threading.Thread(target=create)
    creator.start()
    try:
        seen = [r.match_id for page in every_page(projection, size=5) for r in page]
    finally:
        stop.set()
        creator.join()

    assert len(seen) == len(set(seen))
    assert [m for m in seen if m.startswith("old-")] == [f"old-{i:02}" for i in reversed(range(60))]


def b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


BAD_TOKENS = [
    "x",
    "!!!!",
    "a" * 41,
    "a" * 100_000,
    "[" * 10_000,
    '{"before": 5}',
    "\u00e9" * 8,
    "\x00",
    page_token(5) + "\n",
    " " + page_token(5),
    page_token(5) + "=",
    page_token(5)[:-1],
    b64("before:-5"),
    b64("before:0"),
    b64("before:05"),
    b64("before:" + "9" * 19),  # past 64 bits
    b64("before:1e999"),
    b64("before:1.5"),
    b64("before:\u0665"),  # a digit, but not an ASCII one
    b64('{"before": 5}'),  # the tokens of earlier versions
    b64("[" * 29),
    b64("before:5") + "AAAA",
    "AAAA",
]


@pytest.mark.parametrize("token", BAD_TOKENS, ids=range(len(BAD_TOKENS)))
def test_a_page_token_the_server_did_not_give_is_an_invalid_argument(
    store: EventStore, token: str
) -> None:
    projection = MatchListProjection(store)
    with pytest.raises(InvalidArgument) as raised:
        projection.page(None, "", 0, token)
    assert len(str(raised.value)) < 100


def test_page_tokens_name_the_order_they_were_made_from() -> None:
    for order in (1, 7, 2**40, 10**18 - 1):
        assert parse_page_token(page_token(order)) == order


@pytest.mark.postgres
def test_on_postgresql_a_page_waits_for_a_write_of_its_own_that_an_older_transaction_holds_back(
    pg_database: str,
) -> None:
    store = open_store(pg_database)
    try:
        projection = MatchListProjection(store)
        projection.catch_up()
        with psycopg.connect(pg_database) as blocker:
            # An older transaction still open hides later commits from the global order.
            blocker.execute("SELECT pg_current_xact_id()")
            events = write(store, "match-0", real_match(0))
            projection.expect(events)
            assert projection.catch_up() == 0
            release = threading.Timer(0.3, blocker.commit)
            release.start()
            rows, _ = projection.page(None, "", 0, "")
            release.join()
    finally:
        store.close()
    assert [r.match_id for r in rows] == ["match-0"]


@pytest.mark.postgres
def test_on_postgresql_a_fold_commits_without_a_flush_of_its_own_and_only_it(
    pg_database: str,
) -> None:
    """The listing's commit does not wait for the disk (it is rebuilt from the log, and the
    WAL is flushed in order, so never ahead of the appends it folded); an append on the same
    pooled connections still does."""
    store = open_store(pg_database)
    try:
        lists = store.match_list()
        with lists.folding(MATCH_LIST) as tx:
            folded_on = tx._conn  # type: ignore[attr-defined]
            inside = folded_on.execute("SHOW synchronous_commit").fetchone()[0]
        with psycopg.connect(pg_database) as other:
            server_default = other.execute("SHOW synchronous_commit").fetchone()[0]
        pool = store._pool  # type: ignore[attr-defined]
        with pool.connection() as conn:
            assert conn is folded_on  # the same connection, after the fold's transaction
            after = conn.execute("SHOW synchronous_commit").fetchone()[0]
    finally:
        store.close()
    assert (inside, after) == ("off", server_default) and server_default != "off"


@pytest.mark.postgres
def test_a_store_whose_standby_serves_reads_flushes_its_folds(pg_database: str) -> None:
    """With a read standby the fold's commit waits for its flush like any other: the standby
    is sent WAL only once flushed, so an unflushed fold would reach it late."""
    store = open_store(pg_database, read_url=pg_database)
    try:
        with store.match_list().folding(MATCH_LIST) as tx:
            inside = tx._conn.execute("SHOW synchronous_commit").fetchone()[0]  # type: ignore[attr-defined]
    finally:
        store.close()
    assert inside != "off"


@pytest.mark.postgres
def test_the_server_role_of_deploy_grants_can_fold_and_page_the_listing(pg_database: str) -> None:
    role = f"bergen_app_{uuid.uuid4().hex[:10]}"
    grants = (Path(__file__).parents[2] / "deploy" / "grants.sql").read_text()
    owner = open_store(pg_database)
    last = write(owner, "match-0", real_match(0))[-1]
    owner.close()
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"GRANT CONNECT ON DATABASE {urlsplit(pg_database).path[1:]} TO {role}")
        conn.execute(grants.replace("bergen_app", role))
    parts = urlsplit(pg_database)
    app_url = urlunsplit(parts._replace(netloc=f"{role}@{parts.netloc.rpartition('@')[2]}"))
    try:
        store = open_store(app_url)
        try:
            projection = MatchListProjection(store)
            fold_all(projection, store, last)
            assert [r.match_id for r in projection.page(None, "ada", 0, "")[0]] == ["match-0"]
        finally:
            store.close()
    finally:
        with psycopg.connect(pg_database, autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")


# ----- only authentic rows are folded ---------------------------------------------------------


def insert_row(
    backend: Any,
    match_id: str,
    seq: int,
    event: Event,
    prev_hash: bytes,
    keys: LogKeys | None = None,
) -> None:
    """Insert one row of `match_id` at `seq` after a row whose hash is `prev_hash`, as the
    INSERT role can: authenticated under `keys` when given (a key holder), else with an
    authenticator made up."""
    at = datetime.now(UTC)
    meta = EventMetadata("someone", None, RULES_VERSION, {})
    writing = (keys.writing, keys.writing_key) if keys is not None else ("k1", bytes(32))
    row = build_rows(match_id, seq - 1, [NewEvent(*codec.encode(event))], meta, prev_hash, at,
                     writing)[0]  # fmt: skip
    mac = row.mac if keys is not None else secrets.token_bytes(32)
    sqlite = backend.name == "sqlite"
    backend.tamper(
        "INSERT INTO events (stream_id, seq, type, schema_version, payload, metadata, prev_hash,"
        " hash, salt, recorded_at, key_id, mac"
        + (", position) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,"
           " (SELECT max(position) + 1 FROM events))" if sqlite else ") VALUES (%s, %s, %s, %s,"
           " %s::json, %s::json, %s, %s, %s, %s, %s, %s)"),
        (match_id, seq, row.event.type, row.event.schema_version, row.payload_json,
         row.metadata_json, prev_hash, row.hash, row.salt, at.isoformat(sep=" ") if sqlite else at,
         row.key_id, mac),
    )  # fmt: skip


def insert_undecodable(backend: Any, match_id: str, prev_hash: bytes) -> None:
    """Insert seq 2 of `match_id`, after a row whose hash is `prev_hash`, with metadata that
    names no rules version: a row that cannot be read as an event."""
    row = build_rows(match_id, 1, [NewEvent(*codec.encode(SeatTaken(0, "mallory", "")))],
                     EventMetadata(None, None, RULES_VERSION, {}), prev_hash)[0]  # fmt: skip
    sqlite = backend.name == "sqlite"
    backend.tamper(
        "INSERT INTO events (stream_id, seq, type, schema_version, payload, metadata, prev_hash,"
        " hash, salt" + (", position) VALUES (%s, 2, %s, 1, %s, '{}', %s, %s, %s,"
        " (SELECT max(position) + 1 FROM events))" if sqlite else
        ") VALUES (%s, 2, %s, 1, %s::json, '{}'::json, %s, %s, %s)"),
        (match_id, row.event.type, row.payload_json, row.prev_hash, row.hash, row.salt),
    )  # fmt: skip


@pytest.fixture
def keyed(backend: Any) -> Iterator[tuple[EventStore, LogKeys]]:
    """A store writing and checking rows under a log key, as a server's does."""
    keys = LogKeys.generate()
    s = open_store(backend.url, log_keys=keys)
    yield s, keys
    s.close()


def test_a_row_whose_authenticator_fails_is_never_folded_nor_anything_after_it(
    backend: Any, keyed: tuple[EventStore, LogKeys], caplog: pytest.LogCaptureFixture
) -> None:
    store, keys = keyed
    seating = write(store, "seating", real_match(1))  # MatchCreated only
    last = write(store, "other", real_match(2))[-1]
    projection = MatchListProjection(store)
    fold_all(projection, store, last)
    before = {r.match_id: r for r in listing(projection)}
    assert before["seating"].players == ["", "", ""]

    mallory = SeatTaken(0, "mallory", "")
    insert_row(backend, "seating", 2, mallory, seating[-1].hash)
    forged = store.read_stream("seating")[-1]
    # Even an authentic row after it (a key holder's) is not folded: the match stays put.
    insert_row(backend, "seating", 3, SeatTaken(1, "trudy", ""), forged.hash, keys)
    new = write(store, "new", real_match(3))
    with caplog.at_level(logging.CRITICAL, logger="bergen.server.projections"):
        fold_all(projection, store, new[-1])

    after = {r.match_id: r for r in listing(projection)}
    assert after["seating"] == before["seating"]
    assert after["new"].version == len(new)
    refusals = [r.getMessage() for r in caplog.records if r.levelno == logging.CRITICAL]
    assert len(refusals) == 1, refusals
    assert refusals[0].startswith("LOG TAMPERED: match seating seq 2 is not listed"), refusals
    assert "authenticator does not verify" in refusals[0]

    # Started again from the stored position, past the forged row: still nothing after it.
    insert_row(backend, "seating", 4, SeatTaken(1, "trudy", ""), bytes(32), keys)
    restarted = MatchListProjection(store)
    last = write(store, "newer", real_match(1))[-1]
    fold_all(restarted, store, last)
    assert {r.match_id: r for r in listing(restarted)}["seating"] == before["seating"]


def test_a_row_that_does_not_link_to_the_row_folded_before_it_is_not_folded(
    backend: Any, keyed: tuple[EventStore, LogKeys]
) -> None:
    store, keys = keyed
    seating = write(store, "seating", real_match(1))
    projection = MatchListProjection(store)
    fold_all(projection, store, seating[-1])

    # A key holder's row at the right seq, chained to something else.
    insert_row(backend, "seating", 2, SeatTaken(0, "mallory", ""), bytes(32), keys)
    insert_row(backend, "made-up", 1, real_match(1)[0], secrets.token_bytes(32), keys)
    last = write(store, "new", real_match(1))[-1]
    fold_all(projection, store, last)

    rows = {r.match_id: r for r in listing(projection)}
    assert rows["seating"].players == ["", "", ""] and rows["seating"].version == 1
    assert sorted(rows) == ["new", "seating"]


def test_a_row_that_does_not_decode_is_passed_over_and_holds_up_no_other_match(
    backend: Any, keyed: tuple[EventStore, LogKeys], caplog: pytest.LogCaptureFixture
) -> None:
    store, _ = keyed
    seating = write(store, "seating", real_match(1))
    projection = MatchListProjection(store)
    fold_all(projection, store, seating[-1])
    insert_undecodable(backend, "seating", seating[-1].hash)
    new = write(store, "new", real_match(3))
    with caplog.at_level(logging.CRITICAL, logger="bergen.server.projections"):
        fold_all(projection, store, new[-1])

    rows = {r.match_id: r for r in listing(projection)}
    assert rows["new"].version == len(new)
    assert rows["seating"].version == 1 and rows["seating"].players == ["", "", ""]
    assert any(
        "stream seating seq 2: undecodable event row" in r.getMessage()
        for r in caplog.records
        if r.levelno == logging.CRITICAL
    ), caplog.text


def caught_up(store: EventStore) -> tuple[MatchListProjection, int]:
    """A listing of `store` folded up to its end, and the position it stands at."""
    projection = MatchListProjection(store)
    assert projection.catch_up() == 0
    return projection, store.match_list().position(MATCH_LIST)


def feed_batch(store: EventStore, start: int, last: StoredEvent) -> Sequence[StoredEvent]:
    """What the feed reads: the whole order after the position `start`, up to `last`, in one
    batch (on PostgreSQL, once every transaction older than `last`'s has ended)."""
    deadline = time.monotonic() + 60
    while True:
        batch = store.read_all(start, 1000)
        if batch and batch[-1].position == last.position:
            return batch
        assert time.monotonic() < deadline, f"the order never reached position {last.position}"
        time.sleep(0.01)


def test_batches_the_feed_read_one_after_another_are_folded_in_one_transaction(
    backend: Any, keyed: tuple[EventStore, LogKeys]
) -> None:
    store, _ = keyed
    projection, start = caught_up(store)
    write(store, "first", real_match(2))
    last = write(store, "second", real_match(3))[-1]
    batch = feed_batch(store, start, last)
    folds = 0
    folding = projection._list.folding

    def counted(name: str) -> Any:
        nonlocal folds
        folds += 1
        return folding(name)

    projection._list.folding = counted  # type: ignore[method-assign]
    # Three reads of the feed, one after another (as a busy replica's follower makes them).
    a, b = len(batch) // 3, 2 * len(batch) // 3
    projection.offer(batch[b - 1].position, batch[b:], last.position)
    projection.offer(start, batch[:a], batch[a - 1].position)
    projection.offer(batch[a - 1].position, batch[a:b], batch[b - 1].position)
    assert projection.catch_up() == len(batch)
    assert folds == 1
    assert projection.events_read == 0
    rows = {r.match_id: r for r in listing(projection)}
    assert rows["first"].version == len(real_match(2))
    assert rows["second"].version == len(real_match(3))
    assert store.match_list().position(MATCH_LIST) == last.position


def test_a_batch_the_feed_read_is_folded_without_reading_it_again_and_still_checked(
    backend: Any, keyed: tuple[EventStore, LogKeys]
) -> None:
    store, _ = keyed
    projection, start = caught_up(store)
    seating = write(store, "seating", real_match(1))
    insert_row(backend, "seating", 2, SeatTaken(0, "mallory", ""), seating[-1].hash)  # forged
    last = write(store, "played", real_match(4))[-1]
    batch = feed_batch(store, start, last)

    projection.offer(start + 10**9, batch[:1], batch[0].position)  # from elsewhere: not taken
    projection.offer(start, batch, last.position)
    assert projection.catch_up() == len(batch)  # the forged row passed over, not listed
    assert projection.events_read == 0
    rows = {r.match_id: r for r in listing(projection)}
    assert rows["seating"].players == ["", "", ""] and rows["seating"].version == 1
    assert rows["played"].version == len(real_match(4))
    assert store.match_list().position(MATCH_LIST) == last.position

    newer = write(store, "newer", real_match(2))
    fold_all(projection, store, newer[-1])  # nothing offered: read
    assert projection.events_read == len(newer)
