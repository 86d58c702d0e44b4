"""The stored truth, read straight from the database the servers write: every stream folds,
every chain verifies, and what the API served agrees with it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from bergen.domain import codec
from bergen.domain.events import Event, MatchCreated
from bergen.domain.players import decode_player_event, fold_player
from bergen.domain.state import State, fold
from bergen.server.projections import PLAYER_STREAM_PREFIX, is_match_stream
from bergen.server.store import EventStore, StoredEvent, open_store


@contextmanager
def store_at(url: str) -> Iterator[EventStore]:
    store = open_store(url)
    try:
        yield store
    finally:
        store.close()


def all_streams(
    store: EventStore, unless_at: dict[str, int] | None = None
) -> dict[str, tuple[StoredEvent, ...]]:
    """Every stream of the store, read in full; with `unless_at`, not those still at the
    version it gives them."""
    streams: dict[str, tuple[StoredEvent, ...]] = {}
    after: str | None = None
    while True:
        page = store.list_streams(after, 100)
        if not page:
            return streams
        for info in page:
            if unless_at is not None and unless_at.get(info.stream_id) == info.version:
                continue
            streams[info.stream_id] = store.read_stream(info.stream_id)
            assert len(streams[info.stream_id]) >= info.version
        after = page[-1].stream_id


def decoded(stored: Sequence[StoredEvent]) -> list[Event]:
    return [codec.decode(e.type, e.schema_version, e.payload) for e in stored]


def check_stream(store: EventStore, match_id: str, stored: Sequence[StoredEvent]) -> State:
    """Asserts the stream is numbered 1..N, its chain verifies and it folds. Returns the state."""
    assert [e.seq for e in stored] == list(range(1, len(stored) + 1)), match_id
    report = store.verify_chain(match_id)
    assert report.ok, report
    assert report.events == len(stored)
    state = fold(decoded(stored))
    assert state.version == len(stored)
    return state


def check_every_match(url: str, checked: dict[str, int] | None = None) -> dict[str, State]:
    """Reads every stream of the database at `url`; asserts each is gap-free, verifies and
    folds (a registered player's as a player's; a tournament's and a hand-off's are passed
    over). Returns each match's state.

    With `checked` (stream id -> its version when it was last checked so), a stream still at
    that version is passed over, since the log is append-only (it is what was checked), and
    each stream checked now is noted in it: a caller checking after each of many steps reads
    only what each step wrote."""
    with store_at(url) as store:
        streams = all_streams(store, checked)
        if checked is not None:
            checked.update({stream_id: len(stored) for stream_id, stored in streams.items()})
        for stream_id, stored in streams.items():
            if stream_id.startswith(PLAYER_STREAM_PREFIX):
                assert store.verify_chain(stream_id).ok, stream_id
                events = [decode_player_event(e.type, e.schema_version, e.payload) for e in stored]
                assert PLAYER_STREAM_PREFIX + fold_player(events).player_id == stream_id
        return {m: check_stream(store, m, s) for m, s in streams.items() if is_match_stream(m)}


def full_events(url: str, match_id: str) -> list[Event]:
    """The match's events as stored (nothing hidden), with MatchCreated's seed left out as
    the API leaves it out."""
    with store_at(url) as store:
        events = decoded(store.read_stream(match_id))
    return [replace(e, server_seed=None) if isinstance(e, MatchCreated) else e for e in events]
