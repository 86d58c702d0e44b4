"""A small test client of bergen.v1.BergenService over the generated stubs.

Create, join and play helpers with bearer metadata; a driver that plays random legal moves
through one or several servers (replicas); a watcher thread; and the translation of served
events back into domain events, so that a replay can be folded with `bergen.domain.fold`.

Enums are read and written here by buf's naming alone (a domain word `w` of enum `TypeName`
is the value `TYPE_NAME_W`), not through `bergen.api.convert`, so that these tests check
the server's tables independently.
"""

from __future__ import annotations

import json
import random
import re
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf.descriptor import EnumDescriptor
from google.protobuf.message import Message

from bergen.domain import events as ev
from bergen.domain.rules import Rules
from bergen.domain.state import State, fold
from bergen.domain.tiles import End, Tile
from bergen.domain.vocabulary import ForfeitCause, HandEndReason, MatchEndReason, PointsReason
from bergen.v1 import bergen_pb2 as pb
from bergen.v1 import bergen_pb2_grpc as rpc

RPC_TIMEOUT_S = 20.0
Metadata = tuple[tuple[str, str], ...]


def bearer(token: str | None) -> Metadata:
    """The metadata that presents `token` (none for None)."""
    return () if token is None else (("authorization", f"Bearer {token}"),)


def new_command_id() -> str:
    return uuid.uuid4().hex


class Client:
    """One channel to one server, with typed helpers. Every call raises grpc.RpcError."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.channel = grpc.insecure_channel(target)
        self.stub = rpc.BergenServiceStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def create(
        self,
        seats: int = 2,
        *,
        partnerships: bool = False,
        preset: str = "standard",
        name: str = "",
        token: str | None = None,
        **options: Any,
    ) -> pb.CreateMatchResponse:
        request = pb.CreateMatchRequest(
            seats=seats,
            partnerships=partnerships,
            preset=word_number(pb.Preset.DESCRIPTOR, preset),  # type: ignore[arg-type]
            name=name,
            options=rule_options(**options),
        )
        return self.stub.CreateMatch(request, metadata=bearer(token), timeout=RPC_TIMEOUT_S)

    def join(
        self, match_id: str, name: str, *, seat: int | None = None, client_seed: str = ""
    ) -> pb.JoinMatchResponse:
        request = pb.JoinMatchRequest(match_id=match_id, name=name, client_seed=client_seed)
        if seat is not None:
            request.seat = seat
        return self.stub.JoinMatch(request, timeout=RPC_TIMEOUT_S)

    def view(self, match_id: str, token: str | None = None) -> pb.MatchView:
        reply: pb.GetMatchResponse = self.stub.GetMatch(
            pb.GetMatchRequest(match_id=match_id), metadata=bearer(token), timeout=RPC_TIMEOUT_S
        )
        return reply.view

    def play(
        self,
        match_id: str,
        tile: pb.Tile,
        end: int,
        token: str | None,
        *,
        command_id: str = "",
        expected_version: int | None = None,
        timeout: float = RPC_TIMEOUT_S,
    ) -> pb.PlayResponse:
        request = pb.PlayRequest(match_id=match_id, tile=tile, end=end, command_id=command_id)  # type: ignore[arg-type]
        if expected_version is not None:
            request.expected_version = expected_version
        return self.stub.Play(request, metadata=bearer(token), timeout=timeout)

    def resign(self, match_id: str, token: str | None, command_id: str = "") -> pb.ResignResponse:
        return self.stub.Resign(
            pb.ResignRequest(match_id=match_id, command_id=command_id),
            metadata=bearer(token),
            timeout=RPC_TIMEOUT_S,
        )

    def watch(
        self, match_id: str, token: str | None = None, after_seq: int = 0, timeout: float = 60.0
    ) -> Any:
        """The WatchMatch call: an iterator of WatchMatchResponse that can be cancelled."""
        return self.stub.WatchMatch(
            pb.WatchMatchRequest(match_id=match_id, after_seq=after_seq),
            metadata=bearer(token),
            timeout=timeout,
        )

    def replay(
        self, match_id: str, token: str | None = None, after_seq: int = 0
    ) -> pb.GetReplayResponse:
        return self.stub.GetReplay(
            pb.GetReplayRequest(match_id=match_id, after_seq=after_seq),
            metadata=bearer(token),
            timeout=RPC_TIMEOUT_S,
        )

    def record(self, match_id: str) -> dict[str, Any]:
        reply = self.stub.GetRecord(pb.GetRecordRequest(match_id=match_id), timeout=RPC_TIMEOUT_S)
        record: dict[str, Any] = json.loads(reply.record_json)
        return record

    def abandon(self, match_id: str, token: str | None, note: str = "") -> pb.AbandonMatchResponse:
        return self.stub.AbandonMatch(
            pb.AbandonMatchRequest(match_id=match_id, note=note),
            metadata=bearer(token),
            timeout=RPC_TIMEOUT_S,
        )


@dataclass
class Table:
    """A match with every seat taken: its id and each seat's token."""

    match_id: str
    seats: int
    tokens: list[str]
    created: pb.CreateMatchResponse
    joins: list[pb.JoinMatchResponse] = field(default_factory=list)

    @property
    def version(self) -> int:
        """The version right after the last seat was taken."""
        return max(j.view.version for j in self.joins)


def seat_everyone(
    client: Client,
    seats: int,
    *,
    partnerships: bool = False,
    preset: str = "standard",
    name: str = "",
    before_joining: Callable[[str], None] | None = None,
    **options: Any,
) -> Table:
    """Create a match and take every seat (so that the first hand is dealt)."""
    created = client.create(
        seats, partnerships=partnerships, preset=preset, name=name or "e2e", **options
    )
    if before_joining is not None:
        before_joining(created.match_id)
    table = Table(created.match_id, seats, [""] * seats, created)
    for i in range(seats):
        joined = client.join(created.match_id, f"player {i}", client_seed=f"seed-{i}")
        table.tokens[joined.seat] = joined.seat_token
        table.joins.append(joined)
    assert sorted(j.seat for j in table.joins) == list(range(seats))
    return table


@dataclass
class Move:
    """A Play the driver made and what it was answered."""

    seat: int
    command_id: str
    request: pb.PlayRequest
    response: pb.PlayResponse
    via: int


def play_random_move(
    clients: Sequence[Client], rng: random.Random, table: Table, known_version: int = 0
) -> Move:
    """Play one random legal move for the seat to play, each call through a random client.

    Asserts that every server reads the latest state: a view is never older than
    `known_version`.
    """
    i = rng.randrange(len(clients))
    public = clients[i].view(table.match_id)
    assert public.version >= known_version, (public.version, known_version)
    assert public.phase == pb.PHASE_PLAYING, public
    assert public.HasField("turn"), f"nobody to play in a live match: {public}"
    seat = public.turn
    token = table.tokens[seat]
    j = rng.randrange(len(clients))
    mine = clients[j].view(table.match_id, token)
    assert mine.version >= public.version
    assert mine.legal_plays, f"seat {seat} has no legal play on its turn: {mine}"
    choice = rng.choice(mine.legal_plays)
    command_id = new_command_id()
    k = rng.randrange(len(clients))
    request = pb.PlayRequest(
        match_id=table.match_id, tile=choice.tile, end=choice.end, command_id=command_id
    )
    response = clients[k].stub.Play(request, metadata=bearer(token), timeout=RPC_TIMEOUT_S)
    assert not response.replayed
    return Move(seat, command_id, request, response, k)


def play_to_end(
    clients: Sequence[Client],
    rng: random.Random,
    table: Table,
    *,
    after_move: Callable[[Move], None] | None = None,
    max_moves: int = 3000,
) -> list[Move]:
    """Random legal moves until the match ends. Returns the moves made."""
    moves: list[Move] = []
    version = table.version
    for _ in range(max_moves):
        move = play_random_move(clients, rng, table, version)
        moves.append(move)
        view = move.response.view
        assert view.version > version
        version = view.version
        if after_move is not None:
            after_move(move)
        if view.phase == pb.PHASE_ENDED:
            return moves
    raise AssertionError(f"match {table.match_id} did not end in {max_moves} moves")


class Watcher(threading.Thread):
    """Reads a WatchMatch stream to its end in the background."""

    def __init__(
        self, client: Client, match_id: str, token: str | None = None, after_seq: int = 0
    ) -> None:
        super().__init__(daemon=True)
        self.call = client.watch(match_id, token, after_seq)
        self.items: list[pb.WatchMatchResponse] = []
        self.error: grpc.RpcError | None = None
        self.finished = threading.Event()
        self.first = threading.Event()
        self._changed = threading.Condition()

    def run(self) -> None:
        try:
            for item in self.call:
                with self._changed:
                    self.items.append(item)
                    self._changed.notify_all()
                self.first.set()
        except grpc.RpcError as e:
            self.error = e
        finally:
            self.finished.set()
            self.first.set()
            with self._changed:
                self._changed.notify_all()

    def started(self, timeout: float = 60.0) -> Watcher:
        """Start and wait for the first message (the view). Raises AssertionError."""
        self.start()
        assert self.first.wait(timeout), "no first message on the watch stream"
        assert self.error is None, self.error
        return self

    @property
    def last_seq(self) -> int:
        with self._changed:
            for item in reversed(self.items):
                if item.HasField("event"):
                    return int(item.event.seq)
                return int(item.view.version)
        return 0

    def wait_for_seq(self, seq: int, timeout: float = 60.0) -> None:
        """Block until an item at `seq` (or later) has come. Raises AssertionError."""
        with self._changed:
            ok = self._changed.wait_for(
                lambda: self.finished.is_set() or self._last_seq_locked() >= seq, timeout
            )
        assert ok and self.last_seq >= seq, (
            f"watcher saw up to seq {self.last_seq}, not {seq} (error {self.error})"
        )

    def _last_seq_locked(self) -> int:
        for item in reversed(self.items):
            return int(item.event.seq) if item.HasField("event") else int(item.view.version)
        return 0

    def view(self) -> pb.MatchView:
        assert self.items and self.items[0].HasField("view"), self.items[:1]
        return self.items[0].view

    def events(self) -> list[pb.Event]:
        return [i.event for i in self.items[1:]]

    def cancel(self) -> None:
        self.call.cancel()


# enums by name --------------------------------------------------------------------------


def _prefix(enum: EnumDescriptor) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", enum.name).upper() + "_"


def word_number(enum: EnumDescriptor, word: str) -> int:
    """The number of domain word `word` in `enum` (`lowest_double` -> LEAD_LOWEST_DOUBLE).
    Raises KeyError when the enum has no such value."""
    return int(enum.values_by_name[_prefix(enum) + word.upper()].number)


def number_word(enum: EnumDescriptor, number: int) -> str:
    """The domain word of `number` in `enum`. Raises KeyError for an unknown number."""
    return str(enum.values_by_number[number].name.removeprefix(_prefix(enum)).lower())


def create_swiss(
    client: Client, name: str, token: str, *, rounds: int, target: int, seats: int = 2
) -> str:
    """A Swiss tournament of `rounds` rounds at `seats`-seat standard tables to `target`,
    created with the organiser's `token`; returns its id."""
    created: pb.CreateTournamentResponse = client.stub.CreateTournament(
        pb.CreateTournamentRequest(
            name=name,
            settings=pb.TournamentSettings(
                format=pb.TOURNAMENT_FORMAT_SWISS,
                seats=seats,
                preset=pb.PRESET_STANDARD,
                options=rule_options(target=target),
                rounds=rounds,
            ),
        ),
        metadata=bearer(token),
        timeout=RPC_TIMEOUT_S,
    )
    return created.tournament_id


def rule_options(**options: Any) -> pb.RuleOptions:
    """RuleOptions from domain words and numbers (`lead="highest_double", target=5`)."""
    msg = pb.RuleOptions()
    for name, value in options.items():
        enum = pb.RuleOptions.DESCRIPTOR.fields_by_name[name].enum_type
        setattr(msg, name, value if enum is None else word_number(enum, value))
    return msg


# served messages back to domain values ------------------------------------------------


def tile_in(t: pb.Tile) -> Tile:
    return Tile.of(t.low, t.high)


def _end_in(value: int) -> End | None:
    return {pb.END_UNSPECIFIED: None, pb.END_LEFT: End.LEFT, pb.END_RIGHT: End.RIGHT}[value]


def rules_in(r: pb.Rules) -> Rules:
    def word(name: str) -> str:
        return number_word(pb.Rules.DESCRIPTOR.fields_by_name[name].enum_type, getattr(r, name))

    return Rules(
        preset=word("preset"),
        lead=word("lead"),
        draw=word("draw"),
        double_bonus=r.double_bonus,
        domino_points=r.domino_points,
        blocked=word("blocked"),
        endgame_reduction=word("endgame_reduction"),
        match_end=word("match_end"),
        target=r.target,
    )


def event_in(msg: pb.Event) -> ev.Event:
    """The domain event a served event stands for; hidden tiles become None. Raises
    AssertionError for an event with no body."""
    kind = msg.WhichOneof("body")
    if kind == "match_created":
        m = msg.match_created
        return ev.MatchCreated(
            m.match_id, m.seats, m.partnerships, rules_in(m.rules), m.commitment, m.name, None
        )
    if kind == "seat_taken":
        return ev.SeatTaken(msg.seat_taken.seat, msg.seat_taken.name, msg.seat_taken.client_seed)
    if kind == "dealt":
        d = msg.dealt
        hands = tuple(
            tuple(tile_in(t) for t in h.tiles) if h.tiles else (None,) * h.count for h in d.hands
        )
        boneyard: tuple[Tile | None, ...] = (
            tuple(tile_in(t) for t in d.boneyard) if d.boneyard else (None,) * d.boneyard_size
        )
        return ev.Dealt(d.hand, d.attempt, hands, boneyard)
    if kind == "deal_voided":
        return ev.DealVoided(msg.deal_voided.hand, msg.deal_voided.attempt)
    if kind == "tile_played":
        p = msg.tile_played
        return ev.TilePlayed(p.hand, p.seat, tile_in(p.tile), _end_in(p.end))
    if kind == "tile_drawn":
        d2 = msg.tile_drawn
        return ev.TileDrawn(d2.hand, d2.seat, tile_in(d2.tile) if d2.HasField("tile") else None)
    if kind == "passed":
        return ev.Passed(msg.passed.hand, msg.passed.seat)
    if kind == "points_scored":
        s = msg.points_scored
        return ev.PointsScored(
            s.hand,
            s.side,
            s.points,
            PointsReason(number_word(pb.PointsReason.DESCRIPTOR, s.reason)),
            s.base,
            s.seat if s.HasField("seat") else None,
        )
    if kind == "hand_ended":
        h = msg.hand_ended
        return ev.HandEnded(
            h.hand,
            HandEndReason(number_word(pb.HandEndReason.DESCRIPTOR, h.reason)),
            h.side if h.HasField("side") else None,
            h.points,
            tuple(h.scores),
        )
    if kind == "match_ended":
        r = msg.match_ended.result
        return ev.MatchEnded(
            MatchEndReason(number_word(pb.MatchEndReason.DESCRIPTOR, r.reason)),
            r.winner_side if r.HasField("winner_side") else None,
            tuple(r.scores),
            r.resigned_seat if r.HasField("resigned_seat") else None,
            r.note,
            r.forfeited_side if r.HasField("forfeited_side") else None,
            ForfeitCause(number_word(pb.ForfeitCause.DESCRIPTOR, r.cause)) if r.cause else None,
            r.at_ms if r.HasField("at_ms") else None,
        )
    if kind == "seed_revealed":
        return ev.SeedRevealed(msg.seed_revealed.server_seed)
    raise AssertionError(f"an event with no body: {msg}")


def fold_served(events: Sequence[pb.Event]) -> State:
    """Fold served events; checks they are numbered 1..N first."""
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    return fold(event_in(e) for e in events)


def tiles_in(message: Message) -> Iterator[Tile]:
    """Every tile anywhere inside `message`: Tile and LineTile submessages, at any depth."""
    name = message.DESCRIPTOR.full_name
    if name == "bergen.v1.Tile":
        yield Tile.of(message.low, message.high)  # type: ignore[attr-defined]
        return
    if name == "bergen.v1.LineTile":
        yield Tile.of(message.left, message.right)  # type: ignore[attr-defined]
        return
    for descriptor, value in message.ListFields():
        if descriptor.message_type is None:
            continue
        if descriptor.is_repeated:
            for item in value:
                yield from tiles_in(item)
        else:
            yield from tiles_in(value)
