"""A spectator's view of an ended match not in the cache is made from the record the server kept
of it (one row), not from its events (a page each once the log outgrows memory), and is the
view the events give; anything wrong with the record sends the read back to the events. On
SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import Backend
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bergen.api.signing import RecordSigner
from bergen.domain.errors import LogTampered
from bergen.domain.state import ENDED
from bergen.domain.views import view
from bergen.server.app import Application, Settings, build_application
from bergen.server.feed import EventFeed
from bergen.server.identity import Caller
from bergen.server.keys import LogKeys
from bergen.server.store import EventStore, open_store
from bergen.server.store.records import RECORDS_TABLE

SIGNER = RecordSigner(Ed25519PrivateKey.generate())


@pytest.fixture
def keys() -> LogKeys:
    return LogKeys.generate()


@pytest.fixture
def store(backend: Backend, keys: LogKeys) -> Iterator[EventStore]:
    s = open_store(backend.url, log_keys=keys)
    yield s
    s.close()


def _app(store: EventStore, keys: LogKeys) -> Application:
    """An application with an empty cache of folded matches, as after a restart."""
    return build_application(store, EventFeed(store), Settings(signer=SIGNER), log_keys=keys)


def _ended(
    app: Application,
    plays: int,
    options: dict[str, object] | None = None,
    order: tuple[int, ...] = (0, 1),
    bots: bool = False,
) -> tuple[str, list[str]]:
    """A two-seat match named "kept" with `options`, its seats taken in `order` (by bot
    players when `bots`), `plays` plays, then ended by a resignation; its seat tokens."""
    state = app.commands.create_match(Caller(), 2, False, None, options or {}, "kept")
    match_id = state.match_id
    tokens = ["", ""]
    for i in order:
        player = app.players.register(f"robot {i} {match_id[-6:]}", True)[0] if bots else None
        tokens[i] = app.commands.join_match(
            match_id, i, "" if bots else f"p{i}", "", player=player
        )[1]
    for _ in range(plays):
        v = app.queries.get_view(Caller(tokens[0]), match_id)
        if v.phase == ENDED:
            break
        assert v.turn is not None
        caller = Caller(tokens[v.turn])
        tile, end = app.queries.get_view(caller, match_id).legal_plays[0]
        app.commands.play(caller, match_id, tile, end, None, None)
    app.commands.resign(Caller(tokens[1]), match_id, None)
    return match_id, tokens


@pytest.mark.parametrize(
    ("plays", "options", "order", "bots"),
    [
        (0, None, (0, 1), False),
        (5, None, (1, 0), False),
        (40, None, (0, 1), True),
        (12, {"clock": "fischer", "clock_initial": 600}, (1, 0), True),
    ],
    ids=["at once", "seats taken backwards", "bots", "clocked"],
)
def test_an_ended_match_s_view_is_made_from_its_kept_record_and_is_the_events_view(
    store: EventStore,
    keys: LogKeys,
    plays: int,
    options: dict[str, object] | None,
    order: tuple[int, ...],
    bots: bool,
) -> None:
    match_id, _ = _ended(_app(store, keys), plays, options, order, bots)
    _app(store, keys).queries.record_text(Caller(), match_id)  # kept, as the recorder keeps it
    again = _app(store, keys)
    kept, rematch_of = again.queries.match_view(Caller(), match_id)
    assert again.repository.cached(match_id) is None  # no event was folded for it
    from_events = view(again.repository.load(match_id).state, None)
    assert kept == from_events
    assert kept.phase == ENDED and kept.name == "kept" and rematch_of is None
    assert store.records().repairs[RECORDS_TABLE] == 0


def test_a_rematch_s_kept_view_names_the_match_it_follows(store: EventStore, keys: LogKeys) -> None:
    app = _app(store, keys)
    old_id, tokens = _ended(app, 3)
    rematch, _ = app.commands.create_rematch(Caller(tokens[0]), old_id)
    new_id = rematch.state.match_id
    held = [
        app.commands.join_match(new_id, i, f"p{i}", "", previous_token=tokens[i])[1]
        for i in range(2)
    ]
    app.commands.resign(Caller(held[0]), new_id, None)
    app.queries.record_text(Caller(), new_id)
    again = _app(store, keys)
    kept, rematch_of = again.queries.match_view(Caller(), new_id)
    assert again.repository.cached(new_id) is None
    assert rematch_of == old_id
    assert kept == view(again.repository.load(new_id).state, None)


def test_a_seat_s_view_and_a_match_without_a_kept_record_are_read_from_the_events(
    store: EventStore, keys: LogKeys
) -> None:
    match_id, tokens = _ended(_app(store, keys), 4)
    unkept = _app(store, keys)
    v, _ = unkept.queries.match_view(Caller(), match_id)  # no record kept yet
    assert unkept.repository.cached(match_id) is not None and v.phase == ENDED
    unkept.queries.record_text(Caller(), match_id)
    seat = _app(store, keys)
    seat.queries.match_view(Caller(tokens[0]), match_id)
    assert seat.repository.cached(match_id) is not None  # a seat's view: from the events


def test_a_changed_kept_record_is_not_served_and_the_view_comes_from_the_events(
    backend: Backend, store: EventStore, keys: LogKeys
) -> None:
    match_id, _ = _ended(_app(store, keys), 6)
    _app(store, keys).queries.record_text(Caller(), match_id)
    truth = view(_app(store, keys).repository.load(match_id).state, None)
    # Someone holding the database role swaps the scores in the record's text.
    backend.tamper(
        "UPDATE match_records SET record = replace(record, '\"scores\"', '\"score5\"')"
        " WHERE match_id = %s",
        (match_id,),
    )
    again = _app(store, keys)
    kept, _ = again.queries.match_view(Caller(), match_id)
    assert kept == truth
    assert again.repository.cached(match_id) is not None  # read from the events
    assert store.records().repairs[RECORDS_TABLE] >= 1


def test_once_a_changed_row_is_found_the_kept_view_is_refused_too(
    backend: Backend, store: EventStore, keys: LogKeys
) -> None:
    match_id, tokens = _ended(_app(store, keys), 6)
    _app(store, keys).queries.record_text(Caller(), match_id)
    backend.tamper(
        "UPDATE events SET payload = '{\"seat\": 0}' WHERE stream_id = %s AND seq = 5",
        (match_id,),
    )
    app = _app(store, keys)
    app.queries.match_view(Caller(), match_id)  # the kept record: the row is not read
    with pytest.raises(LogTampered):
        app.queries.match_view(Caller(tokens[0]), match_id)  # a seat's view reads it
    with pytest.raises(LogTampered):
        app.queries.match_view(Caller(), match_id)
