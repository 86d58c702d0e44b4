"""Translation between domain values and the `bergen.v1` messages, both ways. No rules here.

`*_out` turns a domain value into a message (the server's answers); `*_in` turns a message
into a domain value (the server reading a request, a client reading an answer). Every closed
set of words has one explicit table below, from the domain's word to the enum number; the
domain keeps its words (the ones stored in events and written in records).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from google.protobuf.timestamp_pb2 import Timestamp

from bergen.domain import events as ev
from bergen.domain.errors import CorruptRecord, InvalidArgument, InvalidOptions
from bergen.domain.ratings import Rating
from bergen.domain.rules import Rules
from bergen.domain.tiles import ALL_TILES, End, Tile
from bergen.domain.tournament_pairing import REVEAL_WINDOW, Settings
from bergen.domain.views import View
from bergen.domain.vocabulary import (
    ForfeitCause,
    HandEndReason,
    MatchEndReason,
    Phase,
    PointsReason,
)
from bergen.v1 import bergen_pb2 as pb

W = TypeVar("W", bound=str)
N = TypeVar("N", bound=int)


class Words(Generic[W, N]):
    """One closed set: each domain word and its enum number, both ways. Number 0 (the
    enum's *_UNSPECIFIED) stands for no word."""

    def __init__(self, what: str, numbers: Mapping[W, N]) -> None:
        self.what = what
        self.numbers: Mapping[W, N] = MappingProxyType(dict(numbers))
        self.words: Mapping[int, W] = MappingProxyType({n: w for w, n in numbers.items()})
        if len(self.words) != len(self.numbers) or 0 in self.words:
            raise ValueError(f"{what}: the numbers must be distinct and not 0")

    def out(self, word: W) -> N:
        """The enum number of a domain word. Raises KeyError for a word of no table (a bug:
        the domain makes only the words it lists)."""
        return self.numbers[word]

    def into(self, number: int, error: type[InvalidArgument] = InvalidArgument) -> W:
        """The domain word of an enum number. Raises `error` for 0 or an unknown number."""
        word = self.words.get(number)
        if word is None:
            problem = "is not set" if number == 0 else f"has no value {number}"
            raise error(f"{self.what} {problem}", field=self.what)
        return word


# Keyed by str: the match listing's rows hold a phase as its stored word.
PHASE: Words[str, pb.Phase] = Words(
    "phase",
    {Phase.SEATING: pb.PHASE_SEATING, Phase.PLAYING: pb.PHASE_PLAYING, Phase.ENDED: pb.PHASE_ENDED},
)
# RULES.md section 9.
PRESET = Words(
    "preset",
    {
        "standard": pb.PRESET_STANDARD,
        "american": pb.PRESET_AMERICAN,
        "pips": pb.PRESET_PIPS,
        "eastern": pb.PRESET_EASTERN,
        "custom": pb.PRESET_CUSTOM,
    },
)
LEAD = Words(
    "lead",
    {
        "lowest_double": pb.LEAD_LOWEST_DOUBLE,
        "highest_double": pb.LEAD_HIGHEST_DOUBLE,
        "lowest_double_else_lowest_tile": pb.LEAD_LOWEST_DOUBLE_ELSE_LOWEST_TILE,
    },
)
DRAW = Words("draw", {"until_fits": pb.DRAW_UNTIL_FITS, "one_then_pass": pb.DRAW_ONE_THEN_PASS})
BLOCKED = Words(
    "blocked",
    {
        "german": pb.BLOCKED_GERMAN,
        "american": pb.BLOCKED_AMERICAN,
        "eastern": pb.BLOCKED_EASTERN,
        "pips": pb.BLOCKED_PIPS,
    },
)
ENDGAME_REDUCTION = Words(
    "endgame_reduction", {"on": pb.ENDGAME_REDUCTION_ON, "off": pb.ENDGAME_REDUCTION_OFF}
)
MATCH_END = Words(
    "match_end", {"instant": pb.MATCH_END_INSTANT, "end_of_hand": pb.MATCH_END_END_OF_HAND}
)
POINTS_REASON = Words(
    "points reason",
    {
        PointsReason.DOUBLE_HEADER: pb.POINTS_REASON_DOUBLE_HEADER,
        PointsReason.TRIPLE_HEADER: pb.POINTS_REASON_TRIPLE_HEADER,
        PointsReason.DOUBLE_BONUS: pb.POINTS_REASON_DOUBLE_BONUS,
        PointsReason.DOMINO: pb.POINTS_REASON_DOMINO,
        PointsReason.BLOCKED: pb.POINTS_REASON_BLOCKED,
    },
)
HAND_END_REASON = Words(
    "hand end reason",
    {
        HandEndReason.DOMINO: pb.HAND_END_REASON_DOMINO,
        HandEndReason.BLOCKED: pb.HAND_END_REASON_BLOCKED,
        HandEndReason.MATCH_OVER: pb.HAND_END_REASON_MATCH_OVER,
    },
)
MATCH_END_REASON = Words(
    "match end reason",
    {
        MatchEndReason.TARGET: pb.MATCH_END_REASON_TARGET,
        MatchEndReason.ABANDONED: pb.MATCH_END_REASON_ABANDONED,
        MatchEndReason.FORFEIT: pb.MATCH_END_REASON_FORFEIT,
    },
)
FORFEIT_CAUSE = Words(
    "forfeit cause",
    {
        ForfeitCause.TIMEOUT: pb.FORFEIT_CAUSE_TIMEOUT,
        ForfeitCause.RESIGNED: pb.FORFEIT_CAUSE_RESIGNED,
    },
)
# RULES.md sections 9 and 11.
CLOCK = Words("clock", {"none": pb.CLOCK_NONE, "fischer": pb.CLOCK_FISCHER})
ON_TIMEOUT = Words(
    "on_timeout", {"autoplay": pb.ON_TIMEOUT_AUTOPLAY, "forfeit": pb.ON_TIMEOUT_FORFEIT}
)

# RATINGS.md section 1.
RATING_POOL = Words(
    "pool",
    {
        "2": pb.RATING_POOL_TWO,
        "3": pb.RATING_POOL_THREE,
        "4": pb.RATING_POOL_FOUR,
        "pairs": pb.RATING_POOL_PAIRS,
    },
)

# The rule options that are words, by option name.
OPTION_WORDS: Mapping[str, Words[str, Any]] = {
    "lead": LEAD,
    "draw": DRAW,
    "blocked": BLOCKED,
    "endgame_reduction": ENDGAME_REDUCTION,
    "match_end": MATCH_END,
    "clock": CLOCK,
    "on_timeout": ON_TIMEOUT,
}
_NUMBER_OPTIONS = (
    "double_bonus",
    "domino_points",
    "target",
    "clock_initial",
    "clock_increment",
    "timeouts_to_forfeit",
)

PHASES: Mapping[str, pb.Phase] = PHASE.numbers
PHASE_NAMES: Mapping[int, str] = PHASE.words
ENDS: Mapping[End | None, pb.End] = {
    None: pb.END_UNSPECIFIED,
    End.LEFT: pb.END_LEFT,
    End.RIGHT: pb.END_RIGHT,
}
_END_OF: Mapping[int, End | None] = {n: e for e, n in ENDS.items()}


# Tiles, ends and times ------------------------------------------------------------------


def tile_in(
    msg: pb.Tile, what: str = "tile", error: type[InvalidArgument] = InvalidArgument
) -> Tile:
    """Raises `error` for numbers outside 0..6."""
    if msg.low > 6 or msg.high > 6:
        raise error(f"{what}: numbers must be 0..6, got {msg.low}-{msg.high}")
    return Tile.of(msg.low, msg.high)


def tile_out(t: Tile) -> pb.Tile:
    return pb.Tile(low=t.low, high=t.high)


def end_in(value: int, error: type[InvalidArgument] = InvalidArgument) -> End | None:
    """None for END_UNSPECIFIED. Raises `error` for an unknown enum number."""
    if value not in _END_OF:
        raise error(f"end has no value {value}", field="end")
    return _END_OF[value]


def timestamp_out(at: datetime) -> Timestamp:
    """Raises ValueError for a naive datetime (a time without its zone is ambiguous)."""
    if at.tzinfo is None:
        raise ValueError(f"a time without a zone: {at.isoformat()}")
    ts = Timestamp()
    ts.FromDatetime(at.astimezone(UTC))
    return ts


def timestamp_in(ts: Timestamp) -> datetime:
    """The time in UTC."""
    return ts.ToDatetime(tzinfo=UTC)


# Rules ----------------------------------------------------------------------------------


def rules_out(r: Rules) -> pb.Rules:
    msg = pb.Rules(
        preset=PRESET.out(r.preset),
        lead=LEAD.out(r.lead),
        draw=DRAW.out(r.draw),
        double_bonus=r.double_bonus,
        domino_points=r.domino_points,
        blocked=BLOCKED.out(r.blocked),
        endgame_reduction=ENDGAME_REDUCTION.out(r.endgame_reduction),
        match_end=MATCH_END.out(r.match_end),
        target=r.target,
        clock=CLOCK.out(r.clock),
    )
    if r.clocked:
        msg.clock_initial = r.clock_initial
        msg.clock_increment = r.clock_increment
        msg.on_timeout = ON_TIMEOUT.out(r.on_timeout)
        msg.timeouts_to_forfeit = r.timeouts_to_forfeit
    return msg


def rules_in(msg: pb.Rules, error: type[InvalidArgument] = CorruptRecord) -> Rules:
    """Raises `error` for an unset or unknown word, InvalidOptions for rules that cannot be."""
    return Rules(
        preset=PRESET.into(msg.preset, error),
        lead=LEAD.into(msg.lead, error),
        draw=DRAW.into(msg.draw, error),
        double_bonus=msg.double_bonus,
        domino_points=msg.domino_points,
        blocked=BLOCKED.into(msg.blocked, error),
        endgame_reduction=ENDGAME_REDUCTION.into(msg.endgame_reduction, error),
        match_end=MATCH_END.into(msg.match_end, error),
        target=msg.target,
        **_clock_in(msg, error),
    )


def _clock_in(msg: pb.Rules, error: type[InvalidArgument]) -> dict[str, Any]:
    # A server without clocks leaves `clock` unset: no clock.
    if msg.clock in (pb.CLOCK_UNSPECIFIED, pb.CLOCK_NONE):
        return {}
    return {
        "clock": CLOCK.into(msg.clock, error),
        "clock_initial": msg.clock_initial,
        "clock_increment": msg.clock_increment,
        "on_timeout": ON_TIMEOUT.into(msg.on_timeout, error),
        "timeouts_to_forfeit": msg.timeouts_to_forfeit,
    }


def preset_in(value: int) -> str | None:
    """A request's preset; None for PRESET_UNSPECIFIED. Raises InvalidOptions for an unknown
    number."""
    return None if value == pb.PRESET_UNSPECIFIED else PRESET.into(value, InvalidOptions)


def options_in(msg: pb.RuleOptions) -> dict[str, object]:
    """The options set in a RuleOptions message. Raises InvalidOptions for an unset or
    unknown enum number."""
    options: dict[str, object] = {
        name: words.into(getattr(msg, name), InvalidOptions)
        for name, words in OPTION_WORDS.items()
        if msg.HasField(name)
    }
    options.update({n: getattr(msg, n) for n in _NUMBER_OPTIONS if msg.HasField(n)})
    return options


def options_out(options: Mapping[str, object]) -> pb.RuleOptions:
    """Options by name (words and numbers as `make_rules` takes them). Raises InvalidOptions
    for an unknown option or word, or a number that is not one."""
    msg = pb.RuleOptions()
    for name, value in options.items():
        words = OPTION_WORDS.get(name)
        if words is not None:
            number = words.numbers.get(value) if isinstance(value, str) else None
            if number is None:
                raise InvalidOptions(f"option {name} has no value {value!r:.40}", field=name)
            setattr(msg, name, number)
        elif name in _NUMBER_OPTIONS and type(value) is int and value >= 0:
            setattr(msg, name, value)
        else:
            raise InvalidOptions(f"no option {name!r:.40} with value {value!r:.40}", field=name)
    return msg


# Views and events, out ------------------------------------------------------------------


def result_out(r: ev.MatchEnded) -> pb.Result:
    msg = pb.Result(
        reason=MATCH_END_REASON.out(r.reason),
        scores=list(r.scores),
        note=r.note,
    )
    if r.winner_side is not None:
        msg.winner_side = r.winner_side
    if r.resigned_seat is not None:
        msg.resigned_seat = r.resigned_seat
    if r.forfeited_side is not None:
        msg.forfeited_side = r.forfeited_side
    if r.cause is not None:
        msg.cause = FORFEIT_CAUSE.out(r.cause)
    if r.at_ms is not None:
        msg.at_ms = r.at_ms
    return msg


def view_out(v: View) -> pb.MatchView:
    msg = pb.MatchView(
        phase=PHASE.out(v.phase),
        server_seed=v.server_seed or "",
        hand_number=v.hand,
        boneyard_size=v.boneyard_size,
        drawable=v.drawable,
        scores=v.scores,
        version=v.version,
        at_ms=v.at_ms,
    )
    # The repeated parts, and the fields a match never changes, go in as the bytes each
    # would be serialized to (made once, below), merged in one parse: less than half the
    # time of building them field by field.
    tiles, pieces, plays = _TILE_BYTES, _LINE_BYTES, _PLAY_BYTES
    parts = [_fixed_bytes(v.match_id, v.name, v.rules, v.partnerships, v.commitment)]
    parts += [tiles[t.index] for t in v.tiles]
    parts += [pieces[a * 7 + b] for a, b in v.line]
    parts += [plays[t.index][e] for t, e in v.legal_plays]
    sizes, partnerships = v.hand_sizes, v.partnerships
    ids, bots = v.player_ids or ("",) * len(v.players), v.bots or (False,) * len(v.players)
    parts += [
        _seat_bytes(
            seat, name, sizes[seat], seat % 2 if partnerships else seat, ids[seat], bots[seat]
        )
        for seat, name in enumerate(v.players)
    ]
    if v.ends is not None:
        parts.append(_ends_bytes(*v.ends))
    if v.must_play is not None:
        parts.append(_MUST_PLAY_BYTES[v.must_play.index])
    msg.MergeFromString(b"".join(parts))
    for c in v.clocks:
        clock = pb.SeatClock(seat=c.seat, left_ms=c.left_ms, running=c.running, timeouts=c.timeouts)
        if c.falls_at_ms is not None:
            clock.falls_at_ms = c.falls_at_ms
        msg.clocks.append(clock)
    if v.seat is not None:
        msg.viewer_seat = v.seat
    if v.revealed_hands is not None:
        msg.revealed_hands.extend(pb.Hand(tiles=[tile_out(t) for t in h]) for h in v.revealed_hands)
    if v.turn is not None:
        msg.turn = v.turn
    if v.result is not None:
        msg.result.CopyFrom(result_out(v.result))
    if v.rated:
        msg.rated = True
    return msg


_TILE_BYTES: list[bytes] = [
    pb.MatchView(my_tiles=[tile_out(t)]).SerializeToString() for t in ALL_TILES
]
"""Tile index -> a MatchView's bytes holding just that tile in `my_tiles`."""
_LINE_BYTES: list[bytes] = [
    pb.MatchView(line=[pb.LineTile(left=a, right=b)]).SerializeToString()
    for a in range(7)
    for b in range(7)
]
"""a * 7 + b -> a MatchView's bytes holding just the piece (a, b) of the line."""
_PLAY_BYTES: list[dict[End | None, bytes]] = [
    {
        e: pb.MatchView(legal_plays=[pb.LegalPlay(tile=tile_out(t), end=n)]).SerializeToString()
        for e, n in ENDS.items()
    }
    for t in ALL_TILES
]
"""Tile index -> end -> a MatchView's bytes holding just that legal play."""


_MUST_PLAY_BYTES: list[bytes] = [
    pb.MatchView(must_play=tile_out(t)).SerializeToString() for t in ALL_TILES
]
"""Tile index -> a MatchView's bytes holding just that tile as `must_play`."""


@functools.lru_cache(maxsize=256)  # 7 * 7 * 2 * 2 ends at most
def _ends_bytes(left: int, right: int, left_double: bool, right_double: bool) -> bytes:
    """A MatchView's bytes holding just these ends."""
    ends = pb.Ends(left=left, right=right, left_double=left_double, right_double=right_double)
    return pb.MatchView(ends=ends).SerializeToString()


@functools.lru_cache(maxsize=4096)
def _fixed_bytes(
    match_id: str, name: str, rules: Rules, partnerships: bool, commitment: str
) -> bytes:
    """A MatchView's bytes holding just the fields a match never changes."""
    return pb.MatchView(
        match_id=match_id,
        name=name,
        rules=rules_out(rules),
        partnerships=partnerships,
        commitment=commitment,
    ).SerializeToString()


@functools.lru_cache(maxsize=4096)
def _seat_bytes(
    seat: int, name: str | None, tile_count: int, side: int, player_id: str = "", bot: bool = False
) -> bytes:
    """A MatchView's bytes holding just one seat's SeatInfo."""
    info = pb.SeatInfo(
        seat=seat,
        name=name or "",
        taken=name is not None,
        tile_count=tile_count,
        side=side,
        player_id=player_id,
        bot=bot,
    )
    return pb.MatchView(seats=[info]).SerializeToString()


def event_out(seq: int, e: ev.Event) -> pb.Event:
    """One event (already redacted for its viewer) as a message; hidden tiles are absent."""
    msg = pb.Event(seq=seq)
    if isinstance(e, ev.MatchCreated):
        msg.match_created.CopyFrom(
            pb.MatchCreated(
                match_id=e.match_id,
                seats=e.seats,
                partnerships=e.partnerships,
                rules=rules_out(e.rules),
                commitment=e.commitment,
                name=e.name,
                rated=e.rated,
            )
        )
    elif isinstance(e, ev.SeatTaken):
        msg.seat_taken.CopyFrom(
            pb.SeatTaken(
                seat=e.seat,
                name=e.name,
                client_seed=e.client_seed,
                player_id=e.player,
                bot=e.bot,
            )
        )
    elif isinstance(e, ev.Dealt):
        hands = [
            pb.DealtHand(tiles=[tile_out(t) for t in h if t is not None], count=len(h))
            for h in e.hands
        ]
        msg.dealt.CopyFrom(
            pb.Dealt(
                hand=e.hand,
                attempt=e.attempt,
                hands=hands,
                boneyard=[tile_out(t) for t in e.boneyard if t is not None],
                boneyard_size=len(e.boneyard),
            )
        )
    elif isinstance(e, ev.DealVoided):
        msg.deal_voided.CopyFrom(pb.DealVoided(hand=e.hand, attempt=e.attempt))
    elif isinstance(e, ev.TilePlayed):
        # Set in place (the body is present once a field of it is set, even to zero).
        played = msg.tile_played
        played.hand, played.seat, played.end, played.auto = e.hand, e.seat, ENDS[e.end], e.auto
        played.tile.low, played.tile.high = e.tile.low, e.tile.high
        if e.at_ms is not None:
            played.at_ms = e.at_ms
        if e.clock_ms is not None:
            played.clock_ms = e.clock_ms
    elif isinstance(e, ev.TileDrawn):
        drawn = msg.tile_drawn
        drawn.hand, drawn.seat = e.hand, e.seat
        if e.tile is not None:
            drawn.tile.low, drawn.tile.high = e.tile.low, e.tile.high
        if e.at_ms is not None:
            drawn.at_ms = e.at_ms
    elif isinstance(e, ev.Passed):
        passed = msg.passed
        passed.hand, passed.seat = e.hand, e.seat
        if e.at_ms is not None:
            passed.at_ms = e.at_ms
    elif isinstance(e, ev.TimedOut):
        msg.timed_out.CopyFrom(pb.TimedOut(hand=e.hand, seat=e.seat, at_ms=e.at_ms))
    elif isinstance(e, ev.PointsScored):
        scored = pb.PointsScored(
            hand=e.hand,
            side=e.side,
            points=e.points,
            reason=POINTS_REASON.out(e.reason),
            base=e.base,
        )
        if e.seat is not None:
            scored.seat = e.seat
        msg.points_scored.CopyFrom(scored)
    elif isinstance(e, ev.HandEnded):
        ended = pb.HandEnded(
            hand=e.hand,
            reason=HAND_END_REASON.out(e.reason),
            points=e.points,
            scores=list(e.scores),
        )
        if e.side is not None:
            ended.side = e.side
        msg.hand_ended.CopyFrom(ended)
    elif isinstance(e, ev.MatchEnded):
        msg.match_ended.CopyFrom(pb.MatchEnded(result=result_out(e)))
    elif isinstance(e, ev.SeedRevealed):
        msg.seed_revealed.CopyFrom(pb.SeedRevealed(server_seed=e.server_seed))
    return msg


# Events, in: clients fold what the server sent like the server folds its log --------------


def result_in(msg: pb.Result) -> ev.MatchEnded:
    """Raises CorruptRecord for an unset or unknown reason."""
    return ev.MatchEnded(
        reason=MATCH_END_REASON.into(msg.reason, CorruptRecord),
        winner_side=msg.winner_side if msg.HasField("winner_side") else None,
        scores=tuple(msg.scores),
        resigned_seat=msg.resigned_seat if msg.HasField("resigned_seat") else None,
        note=msg.note,
        forfeited_side=msg.forfeited_side if msg.HasField("forfeited_side") else None,
        cause=None if msg.cause == 0 else FORFEIT_CAUSE.into(msg.cause, CorruptRecord),
        at_ms=msg.at_ms if msg.HasField("at_ms") else None,
    )


def event_in(msg: pb.Event) -> tuple[int, ev.Event]:
    """(seq, event); tiles the server hid are None. Raises CorruptRecord for an empty event,
    an unknown enum number or a tile that is not one."""

    def tile(t: pb.Tile) -> Tile:
        return tile_in(t, f"event {msg.seq}: tile", CorruptRecord)

    kind = msg.WhichOneof("body")
    if kind == "match_created":
        m = msg.match_created
        return msg.seq, ev.MatchCreated(
            m.match_id,
            m.seats,
            m.partnerships,
            rules_in(m.rules),
            m.commitment,
            m.name,
            None,
            m.rated,
        )
    if kind == "seat_taken":
        s = msg.seat_taken
        return msg.seq, ev.SeatTaken(s.seat, s.name, s.client_seed, s.player_id, s.bot)
    if kind == "dealt":
        d = msg.dealt
        hands = tuple(
            tuple(tile(t) for t in h.tiles) if h.tiles else (None,) * h.count for h in d.hands
        )
        boneyard = tuple(tile(t) for t in d.boneyard) if d.boneyard else (None,) * d.boneyard_size
        return msg.seq, ev.Dealt(d.hand, d.attempt, hands, boneyard)
    if kind == "deal_voided":
        return msg.seq, ev.DealVoided(msg.deal_voided.hand, msg.deal_voided.attempt)
    if kind == "tile_played":
        p = msg.tile_played
        return msg.seq, ev.TilePlayed(
            p.hand,
            p.seat,
            tile(p.tile),
            end_in(p.end, CorruptRecord),
            p.at_ms if p.HasField("at_ms") else None,
            p.clock_ms if p.HasField("clock_ms") else None,
            p.auto,
        )
    if kind == "tile_drawn":
        t = msg.tile_drawn
        return msg.seq, ev.TileDrawn(
            t.hand,
            t.seat,
            tile(t.tile) if t.HasField("tile") else None,
            t.at_ms if t.HasField("at_ms") else None,
        )
    if kind == "passed":
        a = msg.passed
        return msg.seq, ev.Passed(a.hand, a.seat, a.at_ms if a.HasField("at_ms") else None)
    if kind == "timed_out":
        o = msg.timed_out
        return msg.seq, ev.TimedOut(o.hand, o.seat, o.at_ms)
    if kind == "points_scored":
        p2 = msg.points_scored
        return msg.seq, ev.PointsScored(
            p2.hand,
            p2.side,
            p2.points,
            POINTS_REASON.into(p2.reason, CorruptRecord),
            p2.base,
            p2.seat if p2.HasField("seat") else None,
        )
    if kind == "hand_ended":
        h2 = msg.hand_ended
        return msg.seq, ev.HandEnded(
            h2.hand,
            HAND_END_REASON.into(h2.reason, CorruptRecord),
            h2.side if h2.HasField("side") else None,
            h2.points,
            tuple(h2.scores),
        )
    if kind == "match_ended":
        return msg.seq, result_in(msg.match_ended.result)
    if kind == "seed_revealed":
        return msg.seq, ev.SeedRevealed(msg.seed_revealed.server_seed)
    raise CorruptRecord(f"event {msg.seq} has no body")


# Tournaments ------------------------------------------------------------------------------

TOURNAMENT_FORMAT: Words[str, pb.TournamentFormat] = Words(
    "format",
    {"round_robin": pb.TOURNAMENT_FORMAT_ROUND_ROBIN, "swiss": pb.TOURNAMENT_FORMAT_SWISS},
)
TOURNAMENT_PHASE: Words[str, pb.TournamentPhase] = Words(
    "phase",
    {
        "registration": pb.TOURNAMENT_PHASE_REGISTRATION,
        "reveal": pb.TOURNAMENT_PHASE_REVEAL,
        "running": pb.TOURNAMENT_PHASE_RUNNING,
        "ended": pb.TOURNAMENT_PHASE_ENDED,
    },
)


# The record's words (TOURNAMENT.md section 6): who acted, and what an intervention did.
ACTOR: Words[str, pb.Actor] = Words(
    "actor",
    {
        "entrant": pb.ACTOR_ENTRANT,
        "organiser": pb.ACTOR_ORGANISER,
        "server": pb.ACTOR_SERVER,
    },
)
WITHDRAWN_BY: Words[str, pb.Actor] = Words(
    "withdrawn_by",
    {"entrant": pb.ACTOR_ENTRANT, "organiser": pb.ACTOR_ORGANISER, "no_reveal": pb.ACTOR_SERVER},
)
INTERVENTION_ACTION: Words[str, pb.InterventionAction] = Words(
    "action",
    {
        "withdraw": pb.INTERVENTION_ACTION_WITHDRAW,
        "abandon": pb.INTERVENTION_ACTION_ABANDON,
        "forfeit": pb.INTERVENTION_ACTION_FORFEIT,
        "start_round": pb.INTERVENTION_ACTION_START_ROUND,
        "cancel": pb.INTERVENTION_ACTION_CANCEL,
    },
)
SETTLE_ACTION: Words[str, pb.SettleAction] = Words(
    "action", {"abandon": pb.SETTLE_ACTION_ABANDON, "forfeit": pb.SETTLE_ACTION_FORFEIT}
)


def tournament_settings_in(msg: pb.TournamentSettings) -> tuple[Settings, bool]:
    """The settings a request gives, and whether rounds are started by hand. The table's
    rules are written as the record writes them: the preset and the options given. Raises
    InvalidArgument (an unknown format), InvalidOptions."""
    fmt = TOURNAMENT_FORMAT.into(msg.format)
    options = options_in(msg.options)
    preset = preset_in(msg.preset) or (None if options else "standard")
    rules: dict[str, Any] = {"preset": preset} if preset is not None else {}
    rules.update(options)
    settings = Settings(
        format=fmt,
        seats=msg.seats,
        partnerships=msg.partnerships,
        rules=rules,
        rounds=msg.rounds if fmt == "swiss" else (msg.rounds or None),
        double_round_robin=msg.double_round_robin,
        round_delay=msg.round_delay,
        max_entrants=msg.max_entrants or None,
        rated=msg.rated,
        reveal_window=msg.reveal_window or REVEAL_WINDOW,
    )
    return settings, msg.rounds_by_hand


def tournament_settings_out(s: Settings, by_hand: bool = False) -> pb.TournamentSettings:
    preset = s.rules.get("preset")
    return pb.TournamentSettings(
        format=TOURNAMENT_FORMAT.out(s.format),
        seats=s.seats,
        partnerships=s.partnerships,
        preset=PRESET.out(str(preset)) if preset is not None else pb.PRESET_CUSTOM,
        options=options_out({k: v for k, v in s.rules.items() if k != "preset"}),
        rounds=s.rounds or 0,
        double_round_robin=s.double_round_robin,
        round_delay=s.round_delay,
        max_entrants=s.max_entrants or 0,
        rounds_by_hand=by_hand,
        rated=s.rated,
        reveal_window=s.reveal_window,
    )


def table_result_out(r: Mapping[str, Any]) -> pb.TableResult:
    """A table's result as the tournament record writes it."""
    msg = pb.TableResult(
        reason=MATCH_END_REASON.out(MatchEndReason(r["reason"])),
        scores=r["scores"],
        places=r["places"],
        match_points=r["match_points"],
        margins=r["margins"],
    )
    if r.get("forfeited_side") is not None:
        msg.forfeited_side = r["forfeited_side"]
    return msg


def tournament_view_out(
    record: Mapping[str, Any],
    settings: Settings,
    *,
    phase: str,
    total_rounds: int,
    version: int,
    by_hand: bool = False,
    live_scores: Mapping[str, Sequence[int]] | None = None,
    bots: Sequence[Sequence[bool]] = (),
    reveal_deadline_ms: int | None = None,
) -> pb.TournamentView:
    """A tournament's view from its record so far (TOURNAMENT.md section 6) and what the
    record does not hold: its phase, its rounds in all, its version, the live scores of its
    tables in play (by match id), whether each entrant's registered players are programs (in
    registration order), and while its entrants reveal their seeds, when that ends."""
    live = live_scores or {}
    msg = pb.TournamentView(
        tournament_id=record["tournament_id"],
        name=record.get("name") or "",
        settings=tournament_settings_out(settings, by_hand),
        commitment=record["commitment"],
        phase=TOURNAMENT_PHASE.out(phase),
        round=len(record["rounds"]),
        total_rounds=total_rounds,
        seeding=record.get("seeding") or [],
        tournament_seed=record.get("tournament_seed") or "",
        version=version,
    )
    if phase == "reveal" and reveal_deadline_ms is not None:
        msg.reveal_deadline_ms = reveal_deadline_ms
    for k, e in enumerate(record["entrants"]):
        seed = e["client_seed"]
        entrant = msg.entrants.add(
            entrant=e["entrant"],
            players=e.get("players") or [],
            client_seed=seed or "",
            client_seed_commitment=e.get("client_seed_commitment") or "",
            revealed=seed is not None,
            player_ids=[p or "" for p in e.get("player_ids") or ()],
            bots=bots[k] if k < len(bots) and e.get("player_ids") else (),
        )
        if e.get("withdrawn_after_round") is not None:
            entrant.withdrawn_after_round = e["withdrawn_after_round"]
        if e.get("withdrawn_by") is not None:
            entrant.withdrawn_by = WITHDRAWN_BY.out(e["withdrawn_by"])
    for i in record.get("interventions") or ():
        intervention = msg.interventions.add(
            round=i["round"],
            action=INTERVENTION_ACTION.out(i["action"]),
            by=ACTOR.out(i["by"]),
            note=i["reason"],
        )
        if i["table"] is not None:
            intervention.table = i["table"]
        if i["entrant"] is not None:
            intervention.entrant = i["entrant"]
        if i["action"] == "cancel":
            msg.cancelled = True
    for r in record["rounds"]:
        rnd = msg.rounds.add(round=r["round"], byes=r["byes"])
        for t in r["tables"]:
            table = rnd.tables.add(
                table=t["table"],
                match_id=t["match_id"] or "",
                sides=[side[0] for side in t["sides"]],
            )
            if t["result"] is not None:
                table.result.CopyFrom(table_result_out(t["result"]))
            elif t["match_id"] in live:
                table.live_scores.extend(live[t["match_id"]])
    for s in record["standings"]:
        msg.standings.add(
            rank=s["rank"],
            entrant=s["entrant"],
            match_points=s["match_points"],
            margin=s["margin"],
            buchholz=s["buchholz"],
            wins=s["wins"],
        )
    return msg


# Players and ratings --------------------------------------------------------------------


def pool_rating_out(pool: str, r: Rating) -> pb.PoolRating:
    """A player's rating in a pool, as RATINGS.md section 4 shows it."""
    return pb.PoolRating(
        pool=RATING_POOL.out(pool),
        rating=r.display,
        mu=r.mu,
        sigma=r.sigma,
        provisional=r.provisional,
        rated_matches=r.matches,
    )


def pool_rating_in(msg: pb.PoolRating) -> tuple[str, Rating]:
    """(pool, rating) of a message. Raises CorruptRecord for an unknown pool."""
    return RATING_POOL.into(msg.pool, CorruptRecord), Rating(msg.mu, msg.sigma, msg.rated_matches)
