"""Helpers shared by the unit tests: crafted deals, a match driver, event filters."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bergen.domain import dealing
from bergen.domain.commands import Command, CreateMatch, Play, TakeSeat
from bergen.domain.engine import execute
from bergen.domain.events import Event, PointsScored, TilePlayed
from bergen.domain.rules import Rules, make_rules
from bergen.domain.state import State, evolve
from bergen.domain.tiles import ALL_TILES, End, Tile, hand_size

SEED = bytes(range(32))


def T(text: str) -> Tile:
    return Tile.parse(text)


def tiles(text: str) -> tuple[Tile, ...]:
    return tuple(Tile.parse(t) for t in text.split())


def end(name: str | None) -> End | None:
    return None if name is None else End(name)


Deal = tuple[tuple[tuple[Tile, ...], ...], tuple[Tile, ...]]


def make_deal(hands: Iterable[str], front: str = "", reserve: str = "") -> Deal:
    """A realistic deal: full hands, then the boneyard as `front`, the remaining tiles in
    canonical order, and `reserve` (the last 2 tiles) when given."""
    seat_hands = tuple(tiles(h) for h in hands)
    seats = len(seat_hands)
    assert all(len(h) == hand_size(seats) for h in seat_hands), "hands must be full"
    head, tail = tiles(front), tiles(reserve)
    used = [t for h in seat_hands for t in h] + list(head) + list(tail)
    assert len(set(used)) == len(used), "a tile is used twice"
    rest = tuple(t for t in ALL_TILES if t not in used)
    boneyard = head + rest + tail
    assert len(boneyard) == 28 - seats * hand_size(seats)
    assert not tail or len(tail) == 2
    return seat_hands, boneyard


def install_deals(monkeypatch: Any, deals: Mapping[tuple[int, int], Deal]) -> list[tuple]:
    """Replace the engine's deal: crafted (hands, boneyard) per (hand, attempt), the real fair
    deal for any other. Returns the list of (hand, attempt) asked for, in order."""
    asked: list[tuple] = []
    real = dealing.deal

    def crafted(server_seed, match_id, hand, attempt, client_seeds):  # type: ignore[no-untyped-def]
        asked.append((hand, attempt))
        if (hand, attempt) in deals:
            hands, boneyard = deals[(hand, attempt)]
            assert len(hands) == len(client_seeds)
            return hands, boneyard
        return real(server_seed, match_id, hand, attempt, client_seeds)

    monkeypatch.setattr("bergen.domain.engine.deal", crafted)
    return asked


def rules_for(
    seats: int = 2,
    partnerships: bool = False,
    preset: str | None = "standard",
    **options: object,
) -> Rules:
    return make_rules(seats, partnerships, preset, options)


@dataclass
class Game:
    """Drives a match through `execute`, keeping every event and the state."""

    seats: int = 2
    partnerships: bool = False
    rules: Rules | None = None
    match_id: str = "m-1"
    server_seed: bytes = SEED
    events: list[Event] = field(default_factory=list)
    state: State | None = None
    last: tuple[Event, ...] = ()

    def __post_init__(self) -> None:
        if self.rules is None:
            self.rules = make_rules(self.seats, self.partnerships, "standard")

    def do(self, command: Command) -> tuple[Event, ...]:
        events, self.state = execute(self.state, command)
        self.events.extend(events)
        self.last = events
        return events

    def create(self) -> Game:
        assert self.rules is not None
        self.do(
            CreateMatch(
                self.match_id, self.seats, self.partnerships, self.rules, self.server_seed, "t"
            )
        )
        return self

    def sit(self, seats: Iterable[int] | None = None) -> tuple[Event, ...]:
        for seat in range(self.seats) if seats is None else seats:
            self.do(TakeSeat(name=f"p{seat}", client_seed=f"c{seat}", seat=seat))
        return self.last

    def start(self) -> Game:
        self.create()
        self.sit()
        return self

    def play(self, seat: int, tile: str, at: str | None = None) -> tuple[Event, ...]:
        return self.do(Play(seat=seat, tile=T(tile), end=end(at)))

    def fold_in(self, *events: Event) -> None:
        """Apply crafted facts (setting up scores), as a stored stream would hold them."""
        for e in events:
            self.state = evolve(self.state, e)
            self.events.append(e)

    def set_score(self, side: int, score: int) -> None:
        """Bring `side` to `score` by folding a crafted PointsScored."""
        assert self.state is not None
        delta = score - self.state.scores[side]
        assert delta >= 0
        if delta:
            self.fold_in(
                PointsScored(
                    hand=self.state.hand,
                    side=side,
                    points=delta,
                    reason="double_header",
                    base=delta,
                    seat=None,
                )
            )

    @property
    def s(self) -> State:
        assert self.state is not None
        return self.state


def points(events: Iterable[Event]) -> list[tuple[int, int, str, int]]:
    """(side, points, reason, base) of every PointsScored."""
    return [(e.side, e.points, e.reason, e.base) for e in events if isinstance(e, PointsScored)]


def of_type(events: Iterable[Event], cls: type) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


def played(events: Iterable[Event]) -> list[tuple[int, str, str | None]]:
    return [
        (e.seat, str(e.tile), None if e.end is None else e.end.value)
        for e in events
        if isinstance(e, TilePlayed)
    ]


def line_tiles(state: State) -> list[Tile]:
    return [Tile.of(a, b) for a, b in state.line]


def all_tiles_accounted(state: State) -> list[Tile | None]:
    return [t for h in state.hands for t in h] + list(state.boneyard) + line_tiles(state)
