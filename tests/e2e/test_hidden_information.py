"""Hidden information: across random matches at each seating, under each preset, every message
served before the end to a seat or to a spectator is walked, and none shows a tile that was
then in another seat's hand or in the boneyard, nor the server seed.

The truth is read after each match from the stored log (nothing hidden there). Each served
message is checked against the state at the version it speaks of (an event's seq, a view's
version); a tile becomes public once played, and the viewer's own tiles are its to see. The
driver moves in lockstep with the watch streams, so no stream message can have been computed
after a later command.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field

import grpc
import pytest
from google.protobuf.message import Message

from bergen.domain.events import Event, MatchCreated, MatchEnded
from bergen.domain.state import State, evolve
from bergen.domain.tiles import Tile
from bergen.v1 import bergen_pb2 as pb

from .client import Client, Watcher, bearer, play_random_move, seat_everyone, tiles_in
from .servers import ServerFarm
from .truth import full_events, store_at

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

SEATINGS = [(2, False), (3, False), (4, False), (4, True)]
PRESETS = ["standard", "american", "pips", "eastern"]
TABLES = [(SEATINGS[i % 4], PRESETS[(i + i // 4) % 4]) for i in range(8)]
"""The matches' seatings and presets: each seating twice, under two presets, and each preset
twice, at two seatings."""
MATCHES = len(TABLES)
Viewer = int | None


@dataclass
class Served:
    """One message served to one viewer, and the version its content speaks of."""

    viewer: Viewer
    what: str
    version: int
    message: Message


@dataclass
class Log:
    served: list[Served] = field(default_factory=list)

    def view(self, viewer: Viewer, what: str, view: pb.MatchView) -> None:
        self.served.append(Served(viewer, what, view.version, view))

    def events(self, viewer: Viewer, what: str, events: list[pb.Event]) -> None:
        self.served.extend(Served(viewer, what, e.seq, e) for e in events)


@pytest.fixture(scope="module")
def server_url(module_farm: ServerFarm, module_sqlite_url: str) -> Iterator[tuple[str, str]]:
    server = module_farm.start(module_sqlite_url)
    yield server.target, module_sqlite_url


def states_of(events: list[Event]) -> list[State | None]:
    """The state after each prefix: states[k] after the first k events."""
    states: list[State | None] = [None]
    state: State | None = None
    for e in events:
        state = evolve(state, e)
        states.append(state)
    return states


def hidden_from(state: State | None, viewer: Viewer) -> set[Tile]:
    """Tiles `viewer` may not see in `state`: other seats' hands and the boneyard."""
    if state is None:
        return set()
    hidden = {t for t in state.boneyard if t is not None}
    for seat, hand in enumerate(state.hands):
        if seat != viewer:
            hidden.update(t for t in hand if t is not None)
    return hidden


def play_logged_match(client: Client, rng: random.Random, log: Log, match_no: int) -> int:
    """Plays one random match, logging every message served to each seat and a spectator.
    Returns the seq of the first event of the command that ended the match."""
    (seats, partnerships), preset = TABLES[match_no]
    watchers: dict[Viewer, Watcher] = {}

    def spectate(match_id: str) -> None:
        watchers[None] = Watcher(client, match_id).started()

    table = seat_everyone(
        client,
        seats,
        partnerships=partnerships,
        preset=preset,
        name=f"hidden {match_no}",
        before_joining=spectate,
    )
    for joined in table.joins:
        log.view(joined.seat, "JoinMatch", joined.view)
    for seat, token in enumerate(table.tokens):
        watchers[seat] = Watcher(client, table.match_id, token).started()
    viewers: list[Viewer] = [None, *range(seats)]
    version = table.version
    while True:
        for w in watchers.values():
            w.wait_for_seq(version)
        # Every viewer's view at every version; replays for one viewer at a time (each one
        # holds the whole stream so far), and for every viewer now and then.
        replayed = viewers if rng.random() < 0.2 else [rng.choice(viewers)]
        for viewer in viewers:
            token = None if viewer is None else table.tokens[viewer]
            log.view(viewer, "GetMatch", client.view(table.match_id, token))
            if viewer in replayed:
                replay = client.replay(table.match_id, token, after_seq=rng.randrange(version + 1))
                assert not replay.complete
                log.events(viewer, "GetReplay", list(replay.events))
        # The stored log (every hand in it) is for the organiser only while the match is live.
        viewer = rng.choice(viewers)
        token = None if viewer is None else table.tokens[viewer]
        with pytest.raises(grpc.RpcError) as refused:
            client.stub.GetAuditLog(
                pb.GetAuditLogRequest(match_id=table.match_id), metadata=bearer(token), timeout=10
            )
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION  # type: ignore[attr-defined]
        move = play_random_move([client], rng, table, version)
        log.events(move.seat, "Play", list(move.response.events))
        log.view(move.seat, "Play", move.response.view)
        if move.response.view.phase == pb.PHASE_ENDED:
            final_first = move.response.events[0].seq
            break
        version = move.response.view.version
    for viewer, w in watchers.items():
        w.join(30)
        assert w.finished.is_set() and w.error is None, (viewer, w.error)
        log.view(viewer, "WatchMatch", w.view())
        log.events(viewer, "WatchMatch", w.events())
    return int(final_first)


def test_no_message_served_before_the_end_shows_a_hidden_tile_or_the_seed(
    server_url: tuple[str, str],
) -> None:
    target, url = server_url
    rng = random.Random("hidden information")
    checked = 0
    with Client(target) as client:
        for match_no in range(MATCHES):
            log = Log()
            final_first = play_logged_match(client, rng, log, match_no)
            match_id = log.served[0].message.match_id  # type: ignore[attr-defined]
            truth = full_events(url, match_id)
            assert isinstance(truth[-2], MatchEnded)
            states = states_of(truth)
            with store_at(url) as store:
                created = store.read_stream(match_id)[0]
            seed = str(created.payload["server_seed"]).encode()
            assert isinstance(truth[0], MatchCreated)
            for served in log.served:
                if served.version >= final_first:
                    continue  # served with, or after, the end: everything is public then
                state = states[served.version]
                assert state is not None
                seen = set(tiles_in(served.message))
                leaked = seen & hidden_from(state, served.viewer)
                assert not leaked, (
                    f"match {match_id}: {served.what} to "
                    f"{'a spectator' if served.viewer is None else f'seat {served.viewer}'} "
                    f"at version {served.version} shows hidden {sorted(map(str, leaked))}: "
                    f"{served.message}"
                )
                assert seed not in served.message.SerializeToString(), served
                if isinstance(served.message, pb.MatchView):
                    view = served.message
                    seated = served.viewer is not None
                    assert not view.server_seed and not view.revealed_hands, view
                    mine = state.hands[served.viewer] if seated and state.hands else ()
                    assert sorted(map(tiles_in_one, view.my_tiles)) == sorted(mine), (
                        "the view's own tiles are not the seat's hand: the check is off"
                    )
                checked += 1
    assert checked > MATCHES * 100


def tiles_in_one(t: pb.Tile) -> Tile:
    return Tile.of(t.low, t.high)
