"""The rules of Bergen as a pure model: standard library only.

`decide(state, command)` checks a command and returns the events it causes;
`evolve(state, event)` applies one fact; `fold(events)` is the only way state is rebuilt.
"""

from .codec import decode, encode
from .commands import Abandon, Command, CreateMatch, Play, Resign, TakeSeat, Timeout
from .dealing import commitment, deal, deal_key, shuffle
from .describe import describe, phrase
from .engine import command_of, decide, execute, first_legal_play
from .errors import (
    BergenError,
    ClockViolation,
    ConcurrencyConflict,
    CorruptRecord,
    IllegalPlay,
    InvalidArgument,
    InvalidOptions,
    MatchNotInProgress,
    NotFound,
    NotYourTurn,
    PermissionDenied,
    RuleViolation,
    SeatUnavailable,
    Unauthenticated,
)
from .events import (
    EVENT_TYPES,
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
from .policies import POLICIES, greedy_policy, random_policy
from .record import RECORD_FORMAT, build_record
from .rules import PRESETS, RULES_VERSION, Rules, make_rules
from .scoring import ranking
from .state import ENDED, PLAYING, SEATING, State, evolve, fold
from .tiles import ALL_TILES, End, Tile
from .views import Clock, View, redact_event, redact_stream, view
from .vocabulary import (
    ForfeitCause,
    HandEndReason,
    MatchEndReason,
    Phase,
    PointsReason,
    StepKind,
)

__all__ = [
    "ALL_TILES",
    "ENDED",
    "EVENT_TYPES",
    "PLAYING",
    "POLICIES",
    "PRESETS",
    "RECORD_FORMAT",
    "RULES_VERSION",
    "SEATING",
    "Abandon",
    "BergenError",
    "Clock",
    "ClockViolation",
    "Command",
    "ConcurrencyConflict",
    "CorruptRecord",
    "CreateMatch",
    "DealVoided",
    "Dealt",
    "End",
    "Event",
    "ForfeitCause",
    "HandEndReason",
    "HandEnded",
    "IllegalPlay",
    "InvalidArgument",
    "InvalidOptions",
    "MatchCreated",
    "MatchEndReason",
    "MatchEnded",
    "MatchNotInProgress",
    "NotFound",
    "NotYourTurn",
    "Passed",
    "PermissionDenied",
    "Phase",
    "Play",
    "PointsReason",
    "PointsScored",
    "Resign",
    "RuleViolation",
    "Rules",
    "SeatTaken",
    "SeatUnavailable",
    "SeedRevealed",
    "State",
    "StepKind",
    "TakeSeat",
    "Tile",
    "TileDrawn",
    "TilePlayed",
    "TimedOut",
    "Timeout",
    "Unauthenticated",
    "View",
    "build_record",
    "command_of",
    "commitment",
    "deal",
    "deal_key",
    "decide",
    "decode",
    "describe",
    "encode",
    "evolve",
    "execute",
    "first_legal_play",
    "fold",
    "greedy_policy",
    "make_rules",
    "phrase",
    "random_policy",
    "ranking",
    "redact_event",
    "redact_stream",
    "shuffle",
    "view",
]
