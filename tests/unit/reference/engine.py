"""The reference engine: every command decided event by event, each event evolving the
State the next one is decided on (the reference `evolve`).

This was the server's engine before the rules core (`bergen.domain.fastplay.Board`) decided
every command; it is kept here, apart from production code, so that the core can be checked
against it: the same events and the same states, or the same error, for every command.
"""

from __future__ import annotations

from bergen.domain.commands import Abandon, Command, CreateMatch, Play, Resign, TakeSeat, Timeout
from bergen.domain.dealing import SEED_BYTES, commitment, deal
from bergen.domain.errors import (
    ClockViolation,
    IllegalPlay,
    InvalidArgument,
    MatchNotInProgress,
    NotYourTurn,
    SeatUnavailable,
    shown,
)
from bergen.domain.events import (
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
    TimedOut,
)
from bergen.domain.rules import Rules, make_rules
from bergen.domain.scoring import BLOCKED_POINTS, blocked_winner, lead_of, play_award
from bergen.domain.state import ENDED, PLAYING, SEATING, State
from bergen.domain.text import check_text
from bergen.domain.tiles import End, Tile
from bergen.domain.vocabulary import ForfeitCause, HandEndReason, MatchEndReason, PointsReason

from .evolve import evolve

MAX_NAME = 64
MAX_CLIENT_SEED = 256
MAX_MATCH_ID = 64


class _Run:
    """Events decided so far and the state they lead to; `at_ms` is the command's time in a
    clocked match (None without a clock), given to every action it causes."""

    __slots__ = ("at_ms", "events", "state")

    def __init__(self, state: State | None) -> None:
        self.state = state
        self.events: list[Event] = []
        self.at_ms: int | None = None

    def emit(self, event: Event) -> State:
        self.events.append(event)
        self.state = evolve(self.state, event)
        return self.state


def decide(state: State | None, command: Command) -> tuple[Event, ...]:
    """The events `command` causes in `state` (None before the match exists).

    Raises InvalidArgument for a malformed command, RuleViolation (NotYourTurn,
    IllegalPlay, SeatUnavailable, MatchNotInProgress, ClockViolation) for one the rules
    refuse now.
    """
    return execute(state, command)[0]


def execute(state: State | None, command: Command) -> tuple[tuple[Event, ...], State]:
    """`decide` and the state after its events. Raises as `decide`."""
    return execute_evolving(state, command)


def execute_evolving(state: State | None, command: Command) -> tuple[tuple[Event, ...], State]:
    """`execute` event by event: each event evolves the state the next one is decided on.
    Raises as `decide`."""
    if isinstance(command, CreateMatch):
        return _create(state, command)
    run = _Run(state)
    if state is None:
        raise MatchNotInProgress(
            f"{type(command).__name__}: the match does not exist", reason="MATCH_NOT_FOUND"
        )
    elif isinstance(command, Play):
        _check_play(state, command)
        end = _choose_end(state, command)
        if state.clocks:
            run.at_ms = _time(state, command.at_ms)
            _check_not_fallen(state, run.at_ms)
        _play(run, command.seat, command.tile, end, chosen=True)
    elif isinstance(command, TakeSeat):
        return _take_seat(state, command)
    elif isinstance(command, Timeout):
        _timeout(run, state, command)
    elif isinstance(command, Resign):
        _resign(run, state, command)
    elif isinstance(command, Abandon):
        if state.phase == ENDED:
            raise MatchNotInProgress(
                f"match {state.match_id} has already ended",
                reason="MATCH_ENDED",
                match_id=state.match_id,
            )
        seat = command.resigned_seat
        if seat is not None and (
            isinstance(seat, bool) or not isinstance(seat, int) or not 0 <= seat < state.seats
        ):
            raise InvalidArgument(
                f"match {state.match_id} has no seat {shown(seat)}",
                reason="NO_SUCH_SEAT",
                match_id=state.match_id,
            )
        _end_match(
            run, MatchEndReason.ABANDONED, None, seat, check_text(command.reason, "reason", 200)
        )
    else:
        raise InvalidArgument(f"unknown command {type(command).__name__}", reason="UNKNOWN_COMMAND")
    assert run.state is not None
    return tuple(run.events), run.state


def _create(state: State | None, c: CreateMatch) -> tuple[tuple[Event, ...], State]:
    if state is not None:
        raise MatchNotInProgress(
            f"match {state.match_id} already exists",
            reason="MATCH_EXISTS",
            match_id=state.match_id,
        )
    check_text(c.match_id, "match id", MAX_MATCH_ID, empty=False)
    check_text(c.name, "match name", 100)
    if not isinstance(c.server_seed, bytes) or len(c.server_seed) != SEED_BYTES:
        raise InvalidArgument(f"the server seed must be {SEED_BYTES} bytes")
    # Checked here so that every accepted command gives events the codec can read back.
    if not isinstance(c.partnerships, bool):
        raise InvalidArgument(f"partnerships must be true or false, got {shown(c.partnerships)}")
    if not isinstance(c.rules, Rules):
        raise InvalidArgument(f"rules must be a Rules value, got {type(c.rules).__name__}")
    # Re-validates seats and partnerships against the rules value given.
    if type(c.seats) is not int or (c.seats, c.partnerships) not in _PLAYABLE:
        make_rules(c.seats, c.partnerships, "standard")
    created = MatchCreated(
        c.match_id, c.seats, c.partnerships, c.rules, commitment(c.server_seed), c.name,
        c.server_seed.hex(),
    )  # fmt: skip
    return (created,), evolve(None, created)


_PLAYABLE = frozenset(
    (seats, partnerships)
    for seats in (2, 3, 4)
    for partnerships in (False, True)
    if seats == 4 or not partnerships
)
"""The seat counts and partnership settings `make_rules` accepts (checked by building the
rules only for anything else, which raises)."""


def _take_seat(state: State, c: TakeSeat) -> tuple[tuple[Event, ...], State]:
    name = check_text(c.name, "name", MAX_NAME, empty=False)
    seed = check_text(c.client_seed, "client seed", MAX_CLIENT_SEED)
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
        if not 0 <= c.seat < state.info.seats:
            raise InvalidArgument(
                f"match {state.match_id} has seats 0..{state.seats - 1}, not {c.seat}",
                reason="NO_SUCH_SEAT",
                match_id=state.match_id,
                seat=c.seat,
            )
        seat = c.seat
        if state.info.players[seat] is not None:
            raise SeatUnavailable(
                f"match {state.match_id}: seat {seat} is taken",
                reason="SEAT_TAKEN",
                match_id=state.match_id,
                seat=seat,
            )
    seated = SeatTaken(seat, name.strip(), seed)
    after = evolve(state, seated)
    # Every seat taken: a Player is always true (`None in players` would call each one's
    # dataclass `__eq__`).
    if not all(after.info.players):
        return (seated,), after
    run = _Run(after)
    if after.clocks:
        run.at_ms = 0  # match time starts with the first deal
    _start_hand(run, 1)
    assert run.state is not None
    return (seated, *run.events), run.state


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


def _time(state: State, at_ms: object) -> int:
    """The command's time in a clocked match: `at_ms`, or the latest time recorded if that
    is later. Raises InvalidArgument when it is missing or not a whole number >= 0."""
    if at_ms is None:
        raise InvalidArgument(
            f"match {state.match_id} is played on a clock: the command needs its at_ms",
            reason="AT_MS_REQUIRED",
            match_id=state.match_id,
        )
    if isinstance(at_ms, bool) or not isinstance(at_ms, int) or at_ms < 0:
        raise InvalidArgument(
            f"at_ms must be a whole number of milliseconds >= 0, got {shown(at_ms)}",
            reason="INVALID_AT_MS",
            match_id=state.match_id,
        )
    return at_ms if at_ms > state.at_ms else state.at_ms


def _check_not_fallen(state: State, at_ms: int) -> None:
    """Raises ClockViolation CLOCK_EXPIRED when the running clock has fallen by `at_ms`:
    only the timeout may be recorded then."""
    due = state.due_at_ms
    if due is not None and at_ms >= due:
        raise ClockViolation(
            f"match {state.match_id}, hand {state.hand}: seat {state.running}'s time ran out "
            f"at {due} ms (now {at_ms} ms); its timeout comes first",
            reason="CLOCK_EXPIRED",
            match_id=state.match_id,
            seat=state.running,
            due_at_ms=due,
            at_ms=at_ms,
        )


def first_legal_play(state: State, seat: int) -> tuple[Tile, End] | None:
    """The play a timeout makes for `seat` (RULES.md section 11): its first legal play in
    canonical order, tiles 0-0 .. 6-6 and the left end before the right; None when it has
    none."""
    plays = state.legal_plays(seat)
    if not plays:
        return None
    return min(plays, key=lambda p: (p[0].index, p[1] is not End.LEFT))


def _play(
    run: _Run, seat: int, tile: Tile, end: End | None, *, chosen: bool = False, auto: bool = False
) -> None:
    before = run.state
    assert before is not None
    side = before.side_of(seat)
    at = run.at_ms
    if at is None:
        event = TilePlayed(hand=before.hand, seat=seat, tile=tile, end=end)
    else:
        if auto:
            left = before.rules.clock_increment * 1000
        elif chosen:
            left = before.clock_left(seat, at) + before.rules.clock_increment * 1000
        else:
            left = before.clocks[seat]  # the forced lead takes no time and earns none
        event = TilePlayed(before.hand, seat, tile, end, at, left, auto)
    state = run.emit(event)
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
                state = run.emit(TileDrawn(state.hand, seat, state.boneyard[0], run.at_ms))
                if state.must_play is not None:
                    return
                if _is_blocked(state):
                    _block(run)
                    return
        run.emit(Passed(state.hand, seat, run.at_ms))


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
    run: _Run,
    reason: MatchEndReason,
    winner: int | None,
    resigned: int | None,
    note: str,
    forfeited: int | None = None,
    cause: ForfeitCause | None = None,
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
            forfeited_side=forfeited,
            cause=cause,
            at_ms=run.at_ms if forfeited is not None else None,
        )
    )
    run.emit(SeedRevealed(server_seed=state.server_seed))


def _forfeit(run: _Run, side: int, cause: ForfeitCause, resigned: int | None, note: str) -> None:
    """RULES.md section 11: the match ends at once, scores stand, and the winner is the best
    of the other sides (none on a tie for best)."""
    state = run.state
    assert state is not None
    others = [i for i in range(len(state.scores)) if i != side]
    top = max(state.scores[i] for i in others)
    leaders = [i for i in others if state.scores[i] == top]
    winner = leaders[0] if len(leaders) == 1 else None
    _end_match(run, MatchEndReason.FORFEIT, winner, resigned, note, side, cause)


def _seat_number(state: State, seat: object) -> int:
    if isinstance(seat, bool) or not isinstance(seat, int) or not 0 <= seat < state.seats:
        raise InvalidArgument(
            f"match {state.match_id} has no seat {shown(seat)}",
            reason="NO_SUCH_SEAT",
            match_id=state.match_id,
        )
    return seat


def _resign(run: _Run, state: State, c: Resign) -> None:
    if state.phase != PLAYING:
        raise _not_being_played(state)
    seat = _seat_number(state, c.seat)
    if state.clocks:
        run.at_ms = _time(state, c.at_ms)
        _check_not_fallen(state, run.at_ms)
    note = check_text(c.note, "note", 240) or f"seat {seat} resigned"
    _forfeit(run, state.side_of(seat), ForfeitCause.RESIGNED, seat, note)


def _timeout(run: _Run, state: State, c: Timeout) -> None:
    if not state.clocks:
        raise ClockViolation(
            f"match {state.match_id} is not played on a clock",
            reason="NO_CLOCK",
            match_id=state.match_id,
        )
    if state.phase != PLAYING or state.hand_over:
        raise _not_being_played(state)
    seat = _seat_number(state, c.seat)
    at = _time(state, c.at_ms)
    due = state.due_at_ms
    if state.running != seat or due is None:
        raise ClockViolation(
            f"match {state.match_id}, hand {state.hand}: seat {seat}'s clock is not running "
            f"(seat {state.running} is to play)",
            reason="CLOCK_NOT_RUNNING",
            match_id=state.match_id,
            seat=seat,
        )
    if at < due:
        raise ClockViolation(
            f"match {state.match_id}, hand {state.hand}: seat {seat} has {due - at} ms left "
            f"at {at} ms; its time runs out at {due} ms",
            reason="CLOCK_NOT_EXPIRED",
            match_id=state.match_id,
            seat=seat,
            due_at_ms=due,
            at_ms=at,
        )
    run.at_ms = at
    after = run.emit(TimedOut(hand=state.hand, seat=seat, at_ms=at))
    rules = after.rules
    if rules.on_timeout == "forfeit" or after.timeouts[seat] >= rules.timeouts_to_forfeit:
        _forfeit(
            run, after.side_of(seat), ForfeitCause.TIMEOUT, None, f"seat {seat} ran out of time"
        )
        return
    play = first_legal_play(after, seat)
    assert play is not None, "a running clock belongs to a seat with a play"
    _play(run, seat, play[0], play[1], auto=True)
