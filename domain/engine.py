"""`decide`: check a command against the rules and return the events it causes.

A command's events include everything the rules then force (the lead, draws, passes, the
block, the end of the hand, the next deal, the end of the match), each as its own event,
so a client only ever sends a play.
"""

from __future__ import annotations

import unicodedata

from .commands import Abandon, Command, CreateMatch, Play, Resign, TakeSeat
from .dealing import SEED_BYTES, commitment, deal
from .errors import (
    IllegalPlay,
    InvalidArgument,
    MatchNotInProgress,
    NotYourTurn,
    SeatUnavailable,
    shown,
)
from .events import (
    Dealt,
    DealVoided,
    Event,
    HandEnded,
    MatchCreated,
    MatchEnded,
    Passed,
    PointsScored,
    SeatTaken,
    SeedRevealed,
    TileDrawn,
    TilePlayed,
)
from .rules import Rules, make_rules
from .scoring import BLOCKED_POINTS, blocked_winner, lead_of, play_award
from .state import ENDED, PLAYING, SEATING, State, evolve
from .tiles import End, Tile
from .vocabulary import HandEndReason, MatchEndReason, PointsReason

MAX_NAME = 64
MAX_CLIENT_SEED = 256
MAX_MATCH_ID = 64


class _Run:
    """Events decided so far and the state they lead to."""

    __slots__ = ("events", "state")

    def __init__(self, state: State | None) -> None:
        self.state = state
        self.events: list[Event] = []

    def emit(self, event: Event) -> State:
        self.events.append(event)
        self.state = evolve(self.state, event)
        return self.state


def decide(state: State | None, command: Command) -> tuple[Event, ...]:
    """The events `command` causes in `state` (None before the match exists).

    Raises InvalidArgument for a malformed command, RuleViolation (NotYourTurn,
    IllegalPlay, SeatUnavailable, MatchNotInProgress) for one the rules refuse now.
    """
    return execute(state, command)[0]


def execute(state: State | None, command: Command) -> tuple[tuple[Event, ...], State]:
    """`decide` and the state after its events, in one pass. Raises as `decide`."""
    run = _Run(state)
    if isinstance(command, CreateMatch):
        _create(run, command)
    elif state is None:
        raise MatchNotInProgress(
            f"{type(command).__name__}: the match does not exist", reason="MATCH_NOT_FOUND"
        )
    elif isinstance(command, Play):
        _check_play(state, command)
        _play(run, command.seat, command.tile, _choose_end(state, command))
    elif isinstance(command, TakeSeat):
        _take_seat(run, state, command)
    elif isinstance(command, Resign):
        _resign(run, state, command)
    elif isinstance(command, Abandon):
        if state.phase == ENDED:
            raise MatchNotInProgress(
                f"match {state.match_id} has already ended",
                reason="MATCH_ENDED",
                match_id=state.match_id,
            )
        _end_match(run, MatchEndReason.ABANDONED, None, None, _text(command.reason, "reason", 200))
    else:
        raise InvalidArgument(f"unknown command {type(command).__name__}", reason="UNKNOWN_COMMAND")
    assert run.state is not None
    return tuple(run.events), run.state


def _text(value: object, what: str, limit: int, *, empty: bool = True) -> str:
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be text, got {type(value).__name__}", field=what)
    if len(value) > limit:
        raise InvalidArgument(
            f"{what} is longer than {limit} characters", reason="TEXT_TOO_LONG", field=what
        )
    if not empty and not any(
        not c.isspace() and unicodedata.category(c) not in ("Cf", "Zs") for c in value
    ):
        raise InvalidArgument(
            f"{what} must have a visible character", reason="TEXT_BLANK", field=what
        )
    if any(unicodedata.category(c) in ("Cc", "Cs") for c in value):
        raise InvalidArgument(
            f"{what} must not contain control characters",
            reason="CONTROL_CHARACTER",
            field=what,
        )
    for i, c in enumerate(value):
        if unicodedata.category(c) in _INVISIBLE:
            # A bidi override or a zero-width character makes a name that reads as another
            # (or reverses what follows it on an opponent's screen).
            raise InvalidArgument(
                f"{what} must not contain invisible or format characters (U+{ord(c):04X} at {i})",
                reason="INVISIBLE_CHARACTER",
                field=what,
            )
    return value


_INVISIBLE = frozenset({"Cf", "Co", "Cn", "Zl", "Zp"})
"""Unicode categories refused in text besides controls (Cc) and surrogates (Cs): format
(bidi overrides, zero-width), private use, unassigned, line and paragraph separators.
Ordinary spaces (Zs) are kept."""


def _create(run: _Run, c: CreateMatch) -> None:
    if run.state is not None:
        raise MatchNotInProgress(
            f"match {run.state.match_id} already exists",
            reason="MATCH_EXISTS",
            match_id=run.state.match_id,
        )
    _text(c.match_id, "match id", MAX_MATCH_ID, empty=False)
    _text(c.name, "match name", 100)
    if not isinstance(c.server_seed, bytes) or len(c.server_seed) != SEED_BYTES:
        raise InvalidArgument(f"the server seed must be {SEED_BYTES} bytes")
    # Checked here so that every accepted command gives events the codec can read back.
    if not isinstance(c.partnerships, bool):
        raise InvalidArgument(f"partnerships must be true or false, got {shown(c.partnerships)}")
    if not isinstance(c.rules, Rules):
        raise InvalidArgument(f"rules must be a Rules value, got {type(c.rules).__name__}")
    # Re-validates seats and partnerships against the rules value given.
    make_rules(c.seats, c.partnerships, "standard")
    run.emit(
        MatchCreated(
            match_id=c.match_id,
            seats=c.seats,
            partnerships=c.partnerships,
            rules=c.rules,
            commitment=commitment(c.server_seed),
            name=c.name,
            server_seed=c.server_seed.hex(),
        )
    )


def _take_seat(run: _Run, state: State, c: TakeSeat) -> None:
    name = _text(c.name, "name", MAX_NAME, empty=False)
    seed = _text(c.client_seed, "client seed", MAX_CLIENT_SEED)
    if state.phase == ENDED:
        raise MatchNotInProgress(
            f"match {state.match_id} has ended", reason="MATCH_ENDED", match_id=state.match_id
        )
    if state.phase != SEATING:
        raise SeatUnavailable(
            f"match {state.match_id}: every seat is taken",
            reason="MATCH_FULL",
            match_id=state.match_id,
        )
    if c.seat is None:
        seat = state.players.index(None)
    else:
        if isinstance(c.seat, bool) or not isinstance(c.seat, int):
            raise InvalidArgument("seat must be a number")
        if not 0 <= c.seat < state.seats:
            raise InvalidArgument(
                f"match {state.match_id} has seats 0..{state.seats - 1}, not {c.seat}",
                reason="NO_SUCH_SEAT",
                match_id=state.match_id,
                seat=c.seat,
            )
        seat = c.seat
        if state.players[seat] is not None:
            raise SeatUnavailable(
                f"match {state.match_id}: seat {seat} is taken",
                reason="SEAT_TAKEN",
                match_id=state.match_id,
                seat=seat,
            )
    after = run.emit(SeatTaken(seat=seat, name=name.strip(), client_seed=seed))
    if all(p is not None for p in after.players):
        _start_hand(run, 1)


def _check_play(state: State, c: Play) -> None:
    if state.phase != PLAYING or state.hand_over:
        raise _not_being_played(state)
    if isinstance(c.seat, bool) or not isinstance(c.seat, int):
        raise InvalidArgument(f"seat must be a number, got {shown(c.seat)}")
    if not isinstance(c.tile, Tile):
        raise InvalidArgument("a play needs a tile", reason="TILE_REQUIRED")
    if c.end is not None and not isinstance(c.end, End):
        raise InvalidArgument("end must be left or right", reason="INVALID_END")
    if state.turn != c.seat:
        raise NotYourTurn(
            f"match {state.match_id}, hand {state.hand}: seat {state.turn} is to play, "
            f"not seat {c.seat}",
            reason="NOT_YOUR_TURN",
            match_id=state.match_id,
            seat=c.seat,
        )
    if c.tile not in state.hands[c.seat]:
        raise IllegalPlay(
            f"match {state.match_id}, hand {state.hand}: seat {c.seat} does not hold {c.tile}",
            reason="TILE_NOT_HELD",
            match_id=state.match_id,
            seat=c.seat,
        )
    if state.must_play is not None and c.tile != state.must_play:
        raise IllegalPlay(
            f"match {state.match_id}, hand {state.hand}: seat {c.seat} must play the tile it "
            f"drew, {state.must_play}",
            reason="MUST_PLAY_DRAWN_TILE",
            match_id=state.match_id,
            seat=c.seat,
        )
    if not state.fits(c.tile):
        assert state.ends is not None
        raise IllegalPlay(
            f"match {state.match_id}, hand {state.hand}: {c.tile} fits neither end "
            f"({state.ends[0]}|{state.ends[1]})",
            reason="TILE_DOES_NOT_FIT",
            match_id=state.match_id,
            seat=c.seat,
        )


def _not_being_played(state: State) -> MatchNotInProgress:
    return MatchNotInProgress(
        f"match {state.match_id} is not being played ({state.phase})",
        reason="MATCH_ENDED" if state.phase == ENDED else "MATCH_NOT_IN_PROGRESS",
        match_id=state.match_id,
    )


def _choose_end(state: State, c: Play) -> End:
    assert state.ends is not None
    left, right = state.ends[0], state.ends[1]
    on_left, on_right = c.tile.has(left), c.tile.has(right)
    if (c.end is End.LEFT and not on_left) or (c.end is End.RIGHT and not on_right):
        raise IllegalPlay(
            f"match {state.match_id}, hand {state.hand}: {c.tile} does not fit the "
            f"{c.end.value} end ({left if c.end is End.LEFT else right})",
            reason="TILE_DOES_NOT_FIT",
            match_id=state.match_id,
            seat=c.seat,
        )
    if c.end is not None:
        return c.end
    if on_left and on_right:
        raise IllegalPlay(
            f"match {state.match_id}, hand {state.hand}: {c.tile} fits both ends "
            f"({left}|{right}); say which",
            reason="END_REQUIRED",
            match_id=state.match_id,
            seat=c.seat,
        )
    return End.LEFT if on_left else End.RIGHT


def _start_hand(run: _Run, number: int) -> None:
    state = run.state
    assert state is not None and state.server_seed is not None
    seed = bytes.fromhex(state.server_seed)
    client_seeds = [p.client_seed if p is not None else "" for p in state.players]
    attempt = 1
    while True:
        hands, boneyard = deal(seed, state.match_id, number, attempt, client_seeds)
        run.emit(Dealt(hand=number, attempt=attempt, hands=hands, boneyard=boneyard))
        lead = lead_of(state.rules, hands)
        if lead is not None:
            break
        run.emit(DealVoided(hand=number, attempt=attempt))
        attempt += 1
    _play(run, lead[0], lead[1], None)


def _play(run: _Run, seat: int, tile: Tile, end: End | None) -> None:
    before = run.state
    assert before is not None
    side = before.side_of(seat)
    state = run.emit(TilePlayed(hand=before.hand, seat=seat, tile=tile, end=end))
    assert state.ends is not None
    points, base, reason = play_award(
        state.rules, tile, state.ends, len(state.line), state.scores[side]
    )
    if points and reason is not None:
        state = run.emit(
            PointsScored(
                hand=state.hand, side=side, points=points, reason=reason, base=base, seat=seat
            )
        )
        if _target_reached_now(state):
            _match_over_in_hand(run)
            return
    if not state.hands[seat]:
        dp = state.rules.domino_points
        state = run.emit(
            PointsScored(
                hand=state.hand,
                side=side,
                points=dp,
                reason=PointsReason.DOMINO,
                base=dp,
                seat=seat,
            )
        )
        _end_hand(run, HandEndReason.DOMINO, side, dp)
        return
    if _is_blocked(state):
        _block(run)
        return
    _advance(run)


def _target_reached_now(state: State) -> bool:
    return state.rules.match_end == "instant" and max(state.scores) >= state.rules.target


def _is_blocked(state: State) -> bool:
    return state.drawable == 0 and not any(state.holds_fitting(s) for s in range(state.seats))


def _advance(run: _Run) -> None:
    """Resolve everything forced from the seat to move on, until a seat has a choice."""
    while True:
        state = run.state
        assert state is not None and state.turn is not None
        seat = state.turn
        if state.holds_fitting(seat):
            return
        if state.drawable > 0:
            limit = 1 if state.rules.draw == "one_then_pass" else state.drawable
            for _ in range(limit):
                state = run.emit(TileDrawn(hand=state.hand, seat=seat, tile=state.boneyard[0]))
                if state.must_play is not None:
                    return
                if _is_blocked(state):
                    _block(run)
                    return
        run.emit(Passed(hand=state.hand, seat=seat))


def _block(run: _Run) -> None:
    state = run.state
    assert state is not None
    side_tiles = [
        [t for s in seats for t in state.hands[s] if t is not None] for seats in state.sides
    ]
    winner = blocked_winner(state.rules, side_tiles)
    if winner is not None:
        run.emit(
            PointsScored(
                hand=state.hand,
                side=winner,
                points=BLOCKED_POINTS,
                reason=PointsReason.BLOCKED,
                base=BLOCKED_POINTS,
                seat=None,
            )
        )
    _end_hand(run, HandEndReason.BLOCKED, winner, BLOCKED_POINTS if winner is not None else 0)


def _end_hand(run: _Run, reason: HandEndReason, side: int | None, points: int) -> None:
    state = run.state
    assert state is not None
    state = run.emit(
        HandEnded(hand=state.hand, reason=reason, side=side, points=points, scores=state.scores)
    )
    top = max(state.scores)
    if top >= state.rules.target:
        leaders = [i for i, s in enumerate(state.scores) if s == top]
        if len(leaders) == 1:
            _end_match(run, MatchEndReason.TARGET, leaders[0], None, "")
            return
        # end_of_hand: a tie for highest plays another hand (RULES.md section 7).
    _start_hand(run, state.hand + 1)


def _match_over_in_hand(run: _Run) -> None:
    state = run.state
    assert state is not None
    run.emit(
        HandEnded(
            hand=state.hand,
            reason=HandEndReason.MATCH_OVER,
            side=None,
            points=0,
            scores=state.scores,
        )
    )
    top = max(state.scores)
    _end_match(run, MatchEndReason.TARGET, state.scores.index(top), None, "")


def _end_match(
    run: _Run, reason: MatchEndReason, winner: int | None, resigned: int | None, note: str
) -> None:
    state = run.state
    assert state is not None and state.server_seed is not None
    run.emit(
        MatchEnded(
            reason=reason,
            winner_side=winner,
            scores=state.scores,
            resigned_seat=resigned,
            note=note,
        )
    )
    run.emit(SeedRevealed(server_seed=state.server_seed))


def _resign(run: _Run, state: State, c: Resign) -> None:
    if state.phase != PLAYING:
        raise _not_being_played(state)
    if isinstance(c.seat, bool) or not isinstance(c.seat, int) or not 0 <= c.seat < state.seats:
        raise InvalidArgument(
            f"match {state.match_id} has no seat {shown(c.seat)}",
            reason="NO_SUCH_SEAT",
            match_id=state.match_id,
        )
    _end_match(run, MatchEndReason.ABANDONED, None, c.seat, f"seat {c.seat} resigned")
