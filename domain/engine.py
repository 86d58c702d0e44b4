"""`decide`: check a command against the rules and return the events it causes.

A command's events include everything the rules then force (the lead, draws, passes, the
block, the end of the hand, the next deal, the end of the match), each as its own event,
so a client only ever sends a play. Creating a match and taking a seat are decided here;
every other command is played on the rules core, a `fastplay.Board`.
"""

from __future__ import annotations

from .commands import Abandon, Command, CreateMatch, Play, Resign, TakeSeat, Timeout
from .dealing import SEED_BYTES, commitment, deal
from .errors import InvalidArgument, MatchNotInProgress, RuleViolation, SeatUnavailable, shown
from .events import Event, MatchCreated, MatchEnded, SeatTaken, TilePlayed, TimedOut
from .fastplay import Board, first_legal_play
from .rules import Rules, make_rules
from .state import ENDED, SEATING, State, evolve
from .text import check_text
from .vocabulary import MatchEndReason

__all__ = [
    "boards_kept",
    "check_text",
    "command_of",
    "decide",
    "execute",
    "first_legal_play",
    "is_player_id",
    "kept_board",
]

MAX_NAME = 64
MAX_CLIENT_SEED = 256
MAX_MATCH_ID = 64
_HEX = frozenset("0123456789abcdef")


def decide(state: State | None, command: Command) -> tuple[Event, ...]:
    """The events `command` causes in `state` (None before the match exists).

    Raises InvalidArgument for a malformed command, RuleViolation (NotYourTurn,
    IllegalPlay, SeatUnavailable, MatchNotInProgress, ClockViolation) for one the rules
    refuse now.
    """
    return execute(state, command)[0]


def execute(state: State | None, command: Command) -> tuple[tuple[Event, ...], State]:
    """`decide` and the state after its events, in one pass. Raises as `decide`."""
    play = type(command) is Play
    if not play or state is None:
        if isinstance(command, CreateMatch):
            return _create(state, command)
        if state is None:
            raise MatchNotInProgress(
                f"{type(command).__name__}: the match does not exist", reason="MATCH_NOT_FOUND"
            )
        if isinstance(command, TakeSeat):
            return _take_seat(state, command)
    # The Board that made `state` stands for it still, if no other command has taken it up
    # since: the command is played on it. Taking it is one atomic pop (no two threads ever
    # play on one Board); a command refused, or any error, drops it.
    try:
        kept_state, board = _kept.pop()
    except IndexError:
        kept_state = None
    if kept_state is not state:
        board = Board(state, deal)
    if type(command) is Play:
        board.play_checked(command.seat, command.tile, command.end, command.at_ms)
    else:
        board.execute(command)
    events, after = board.commit()
    _kept.append((after, board))
    return events, after


_kept: list[tuple[State, Board]] = []
"""The last State `execute` returned and the Board that made it (one for each thread
deciding at once, at most): a match's commands follow one another on the State each one
returns, so the next takes up the Board where it stands instead of building another (a Board
costs about as much to build as a play costs to make). A State decided on again (another
command on an older State, or the one another match's command took the Board from) finds it
gone and gets a Board of its own."""


def kept_board(state: State) -> Board | None:
    """The Board kept for `state`, if one is (what the next command on `state` is played
    on); None when the next one builds its own."""
    return next((board for kept, board in list(_kept) if kept is state), None)


def boards_kept() -> int:
    """How many Boards are kept (one for each thread deciding at once, at most)."""
    return len(_kept)


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
    if not isinstance(c.rated, bool):
        raise InvalidArgument(f"rated must be true or false, got {shown(c.rated)}")
    # Re-validates seats and partnerships against the rules value given.
    if type(c.seats) is not int or (c.seats, c.partnerships) not in _PLAYABLE:
        make_rules(c.seats, c.partnerships, "standard")
    created = MatchCreated(
        c.match_id, c.seats, c.partnerships, c.rules, commitment(c.server_seed), c.name,
        c.server_seed.hex(), c.rated,
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


def is_player_id(value: object) -> bool:
    """Whether `value` is a player id as the server gives them: a UUID, lowercase."""
    return (
        isinstance(value, str)
        and len(value) == 36
        and all(value[i] == "-" for i in (8, 13, 18, 23))
        and set(value.replace("-", "")) <= _HEX
    )


def _check_player(state: State, c: TakeSeat, seat: int | None) -> None:
    """RATINGS.md section 2: a rated match seats registered players only, and a player holds
    one seat of a match at most. Raises InvalidArgument for a player id or bot flag that is
    not one, RuleViolation (PLAYER_REQUIRED, PLAYER_ALREADY_SEATED)."""
    if c.player != "" and not is_player_id(c.player):
        raise InvalidArgument(f"a player id is a UUID, not {shown(c.player)}")
    if not isinstance(c.bot, bool) or (c.bot and not c.player):
        raise InvalidArgument("bot is true or false, and true only for a registered player")
    if not c.player:
        if state.info.rated:
            raise RuleViolation(
                f"match {state.match_id} is rated: a seat is taken by a registered player, "
                "with its player token",
                reason="PLAYER_REQUIRED",
                match_id=state.match_id,
            )
        return
    for other, p in enumerate(state.info.players):
        if p is not None and p.player_id == c.player and other != seat:
            raise RuleViolation(
                f"match {state.match_id}: this player holds seat {other} already, and a player "
                "holds one seat of a match",
                reason="PLAYER_ALREADY_SEATED",
                match_id=state.match_id,
                seat=other,
            )


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
    _check_player(state, c, seat)
    seated = SeatTaken(seat, name.strip(), seed, c.player, c.bot)
    after = evolve(state, seated)
    # Every seat taken: a Player is always true (`None in players` would call each one's
    # dataclass `__eq__`).
    if not all(after.info.players):
        return (seated,), after
    board = Board(after, deal)
    if after.clocks:
        board.at = 0  # match time starts with the first deal
    board.start_hand(1)
    return (seated, *board.events), board.state()


def command_of(event: Event) -> Command | None:
    """The command a server decided that starts with `event`, as it must be decided again
    to give the same events (a stored log checked by the rules); None for an event only
    ever caused by another (a deal, a draw, points, the end of a hand)."""
    if isinstance(event, TilePlayed):
        return Play(event.seat, event.tile, event.end, event.at_ms)
    if isinstance(event, TimedOut):
        return Timeout(event.seat, event.at_ms)
    if isinstance(event, SeatTaken):
        return TakeSeat(event.name, event.client_seed, event.seat, event.player, event.bot)
    if isinstance(event, MatchEnded):
        if event.reason == MatchEndReason.FORFEIT and event.resigned_seat is not None:
            return Resign(event.resigned_seat, event.at_ms, event.note)
        # Abandoned; or a resignation recorded before resignation was a forfeit.
        return Abandon(event.note, event.resigned_seat)
    if isinstance(event, MatchCreated) and event.server_seed is not None:
        try:
            seed = bytes.fromhex(event.server_seed)
        except ValueError:
            return None
        return CreateMatch(
            event.match_id, event.seats, event.partnerships, event.rules, seed, event.name,
            event.rated,
        )  # fmt: skip
    return None
