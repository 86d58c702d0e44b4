import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class End(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    END_UNSPECIFIED: _ClassVar[End]
    END_LEFT: _ClassVar[End]
    END_RIGHT: _ClassVar[End]

class Phase(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PHASE_UNSPECIFIED: _ClassVar[Phase]
    PHASE_SEATING: _ClassVar[Phase]
    PHASE_PLAYING: _ClassVar[Phase]
    PHASE_ENDED: _ClassVar[Phase]

class Preset(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PRESET_UNSPECIFIED: _ClassVar[Preset]
    PRESET_STANDARD: _ClassVar[Preset]
    PRESET_AMERICAN: _ClassVar[Preset]
    PRESET_PIPS: _ClassVar[Preset]
    PRESET_EASTERN: _ClassVar[Preset]
    PRESET_CUSTOM: _ClassVar[Preset]

class Lead(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LEAD_UNSPECIFIED: _ClassVar[Lead]
    LEAD_LOWEST_DOUBLE: _ClassVar[Lead]
    LEAD_HIGHEST_DOUBLE: _ClassVar[Lead]
    LEAD_LOWEST_DOUBLE_ELSE_LOWEST_TILE: _ClassVar[Lead]

class Draw(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DRAW_UNSPECIFIED: _ClassVar[Draw]
    DRAW_UNTIL_FITS: _ClassVar[Draw]
    DRAW_ONE_THEN_PASS: _ClassVar[Draw]

class Blocked(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BLOCKED_UNSPECIFIED: _ClassVar[Blocked]
    BLOCKED_GERMAN: _ClassVar[Blocked]
    BLOCKED_AMERICAN: _ClassVar[Blocked]
    BLOCKED_EASTERN: _ClassVar[Blocked]
    BLOCKED_PIPS: _ClassVar[Blocked]

class EndgameReduction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ENDGAME_REDUCTION_UNSPECIFIED: _ClassVar[EndgameReduction]
    ENDGAME_REDUCTION_ON: _ClassVar[EndgameReduction]
    ENDGAME_REDUCTION_OFF: _ClassVar[EndgameReduction]

class MatchEnd(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MATCH_END_UNSPECIFIED: _ClassVar[MatchEnd]
    MATCH_END_INSTANT: _ClassVar[MatchEnd]
    MATCH_END_END_OF_HAND: _ClassVar[MatchEnd]

class Clock(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CLOCK_UNSPECIFIED: _ClassVar[Clock]
    CLOCK_NONE: _ClassVar[Clock]
    CLOCK_FISCHER: _ClassVar[Clock]

class OnTimeout(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ON_TIMEOUT_UNSPECIFIED: _ClassVar[OnTimeout]
    ON_TIMEOUT_AUTOPLAY: _ClassVar[OnTimeout]
    ON_TIMEOUT_FORFEIT: _ClassVar[OnTimeout]

class MatchEndReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MATCH_END_REASON_UNSPECIFIED: _ClassVar[MatchEndReason]
    MATCH_END_REASON_TARGET: _ClassVar[MatchEndReason]
    MATCH_END_REASON_ABANDONED: _ClassVar[MatchEndReason]
    MATCH_END_REASON_FORFEIT: _ClassVar[MatchEndReason]

class ForfeitCause(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FORFEIT_CAUSE_UNSPECIFIED: _ClassVar[ForfeitCause]
    FORFEIT_CAUSE_TIMEOUT: _ClassVar[ForfeitCause]
    FORFEIT_CAUSE_RESIGNED: _ClassVar[ForfeitCause]

class PointsReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    POINTS_REASON_UNSPECIFIED: _ClassVar[PointsReason]
    POINTS_REASON_DOUBLE_HEADER: _ClassVar[PointsReason]
    POINTS_REASON_TRIPLE_HEADER: _ClassVar[PointsReason]
    POINTS_REASON_DOUBLE_BONUS: _ClassVar[PointsReason]
    POINTS_REASON_DOMINO: _ClassVar[PointsReason]
    POINTS_REASON_BLOCKED: _ClassVar[PointsReason]

class HandEndReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HAND_END_REASON_UNSPECIFIED: _ClassVar[HandEndReason]
    HAND_END_REASON_DOMINO: _ClassVar[HandEndReason]
    HAND_END_REASON_BLOCKED: _ClassVar[HandEndReason]
    HAND_END_REASON_MATCH_OVER: _ClassVar[HandEndReason]

class TournamentFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOURNAMENT_FORMAT_UNSPECIFIED: _ClassVar[TournamentFormat]
    TOURNAMENT_FORMAT_ROUND_ROBIN: _ClassVar[TournamentFormat]
    TOURNAMENT_FORMAT_SWISS: _ClassVar[TournamentFormat]

class TournamentPhase(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOURNAMENT_PHASE_UNSPECIFIED: _ClassVar[TournamentPhase]
    TOURNAMENT_PHASE_REGISTRATION: _ClassVar[TournamentPhase]
    TOURNAMENT_PHASE_RUNNING: _ClassVar[TournamentPhase]
    TOURNAMENT_PHASE_ENDED: _ClassVar[TournamentPhase]
    TOURNAMENT_PHASE_REVEAL: _ClassVar[TournamentPhase]

class Actor(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACTOR_UNSPECIFIED: _ClassVar[Actor]
    ACTOR_ENTRANT: _ClassVar[Actor]
    ACTOR_ORGANISER: _ClassVar[Actor]
    ACTOR_SERVER: _ClassVar[Actor]

class InterventionAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INTERVENTION_ACTION_UNSPECIFIED: _ClassVar[InterventionAction]
    INTERVENTION_ACTION_WITHDRAW: _ClassVar[InterventionAction]
    INTERVENTION_ACTION_ABANDON: _ClassVar[InterventionAction]
    INTERVENTION_ACTION_FORFEIT: _ClassVar[InterventionAction]
    INTERVENTION_ACTION_START_ROUND: _ClassVar[InterventionAction]
    INTERVENTION_ACTION_CANCEL: _ClassVar[InterventionAction]

class SettleAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SETTLE_ACTION_UNSPECIFIED: _ClassVar[SettleAction]
    SETTLE_ACTION_ABANDON: _ClassVar[SettleAction]
    SETTLE_ACTION_FORFEIT: _ClassVar[SettleAction]

class RatingPool(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RATING_POOL_UNSPECIFIED: _ClassVar[RatingPool]
    RATING_POOL_TWO: _ClassVar[RatingPool]
    RATING_POOL_THREE: _ClassVar[RatingPool]
    RATING_POOL_FOUR: _ClassVar[RatingPool]
    RATING_POOL_PAIRS: _ClassVar[RatingPool]
END_UNSPECIFIED: End
END_LEFT: End
END_RIGHT: End
PHASE_UNSPECIFIED: Phase
PHASE_SEATING: Phase
PHASE_PLAYING: Phase
PHASE_ENDED: Phase
PRESET_UNSPECIFIED: Preset
PRESET_STANDARD: Preset
PRESET_AMERICAN: Preset
PRESET_PIPS: Preset
PRESET_EASTERN: Preset
PRESET_CUSTOM: Preset
LEAD_UNSPECIFIED: Lead
LEAD_LOWEST_DOUBLE: Lead
LEAD_HIGHEST_DOUBLE: Lead
LEAD_LOWEST_DOUBLE_ELSE_LOWEST_TILE: Lead
DRAW_UNSPECIFIED: Draw
DRAW_UNTIL_FITS: Draw
DRAW_ONE_THEN_PASS: Draw
BLOCKED_UNSPECIFIED: Blocked
BLOCKED_GERMAN: Blocked
BLOCKED_AMERICAN: Blocked
BLOCKED_EASTERN: Blocked
BLOCKED_PIPS: Blocked
ENDGAME_REDUCTION_UNSPECIFIED: EndgameReduction
ENDGAME_REDUCTION_ON: EndgameReduction
ENDGAME_REDUCTION_OFF: EndgameReduction
MATCH_END_UNSPECIFIED: MatchEnd
MATCH_END_INSTANT: MatchEnd
MATCH_END_END_OF_HAND: MatchEnd
CLOCK_UNSPECIFIED: Clock
CLOCK_NONE: Clock
CLOCK_FISCHER: Clock
ON_TIMEOUT_UNSPECIFIED: OnTimeout
ON_TIMEOUT_AUTOPLAY: OnTimeout
ON_TIMEOUT_FORFEIT: OnTimeout
MATCH_END_REASON_UNSPECIFIED: MatchEndReason
MATCH_END_REASON_TARGET: MatchEndReason
MATCH_END_REASON_ABANDONED: MatchEndReason
MATCH_END_REASON_FORFEIT: MatchEndReason
FORFEIT_CAUSE_UNSPECIFIED: ForfeitCause
FORFEIT_CAUSE_TIMEOUT: ForfeitCause
FORFEIT_CAUSE_RESIGNED: ForfeitCause
POINTS_REASON_UNSPECIFIED: PointsReason
POINTS_REASON_DOUBLE_HEADER: PointsReason
POINTS_REASON_TRIPLE_HEADER: PointsReason
POINTS_REASON_DOUBLE_BONUS: PointsReason
POINTS_REASON_DOMINO: PointsReason
POINTS_REASON_BLOCKED: PointsReason
HAND_END_REASON_UNSPECIFIED: HandEndReason
HAND_END_REASON_DOMINO: HandEndReason
HAND_END_REASON_BLOCKED: HandEndReason
HAND_END_REASON_MATCH_OVER: HandEndReason
TOURNAMENT_FORMAT_UNSPECIFIED: TournamentFormat
TOURNAMENT_FORMAT_ROUND_ROBIN: TournamentFormat
TOURNAMENT_FORMAT_SWISS: TournamentFormat
TOURNAMENT_PHASE_UNSPECIFIED: TournamentPhase
TOURNAMENT_PHASE_REGISTRATION: TournamentPhase
TOURNAMENT_PHASE_RUNNING: TournamentPhase
TOURNAMENT_PHASE_ENDED: TournamentPhase
TOURNAMENT_PHASE_REVEAL: TournamentPhase
ACTOR_UNSPECIFIED: Actor
ACTOR_ENTRANT: Actor
ACTOR_ORGANISER: Actor
ACTOR_SERVER: Actor
INTERVENTION_ACTION_UNSPECIFIED: InterventionAction
INTERVENTION_ACTION_WITHDRAW: InterventionAction
INTERVENTION_ACTION_ABANDON: InterventionAction
INTERVENTION_ACTION_FORFEIT: InterventionAction
INTERVENTION_ACTION_START_ROUND: InterventionAction
INTERVENTION_ACTION_CANCEL: InterventionAction
SETTLE_ACTION_UNSPECIFIED: SettleAction
SETTLE_ACTION_ABANDON: SettleAction
SETTLE_ACTION_FORFEIT: SettleAction
RATING_POOL_UNSPECIFIED: RatingPool
RATING_POOL_TWO: RatingPool
RATING_POOL_THREE: RatingPool
RATING_POOL_FOUR: RatingPool
RATING_POOL_PAIRS: RatingPool

class Tile(_message.Message):
    __slots__ = ("low", "high")
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    low: int
    high: int
    def __init__(self, low: _Optional[int] = ..., high: _Optional[int] = ...) -> None: ...

class Rules(_message.Message):
    __slots__ = ("preset", "lead", "draw", "double_bonus", "domino_points", "blocked", "endgame_reduction", "match_end", "target", "clock", "clock_initial", "clock_increment", "on_timeout", "timeouts_to_forfeit")
    PRESET_FIELD_NUMBER: _ClassVar[int]
    LEAD_FIELD_NUMBER: _ClassVar[int]
    DRAW_FIELD_NUMBER: _ClassVar[int]
    DOUBLE_BONUS_FIELD_NUMBER: _ClassVar[int]
    DOMINO_POINTS_FIELD_NUMBER: _ClassVar[int]
    BLOCKED_FIELD_NUMBER: _ClassVar[int]
    ENDGAME_REDUCTION_FIELD_NUMBER: _ClassVar[int]
    MATCH_END_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    CLOCK_FIELD_NUMBER: _ClassVar[int]
    CLOCK_INITIAL_FIELD_NUMBER: _ClassVar[int]
    CLOCK_INCREMENT_FIELD_NUMBER: _ClassVar[int]
    ON_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUTS_TO_FORFEIT_FIELD_NUMBER: _ClassVar[int]
    preset: Preset
    lead: Lead
    draw: Draw
    double_bonus: int
    domino_points: int
    blocked: Blocked
    endgame_reduction: EndgameReduction
    match_end: MatchEnd
    target: int
    clock: Clock
    clock_initial: int
    clock_increment: int
    on_timeout: OnTimeout
    timeouts_to_forfeit: int
    def __init__(self, preset: _Optional[_Union[Preset, str]] = ..., lead: _Optional[_Union[Lead, str]] = ..., draw: _Optional[_Union[Draw, str]] = ..., double_bonus: _Optional[int] = ..., domino_points: _Optional[int] = ..., blocked: _Optional[_Union[Blocked, str]] = ..., endgame_reduction: _Optional[_Union[EndgameReduction, str]] = ..., match_end: _Optional[_Union[MatchEnd, str]] = ..., target: _Optional[int] = ..., clock: _Optional[_Union[Clock, str]] = ..., clock_initial: _Optional[int] = ..., clock_increment: _Optional[int] = ..., on_timeout: _Optional[_Union[OnTimeout, str]] = ..., timeouts_to_forfeit: _Optional[int] = ...) -> None: ...

class RuleOptions(_message.Message):
    __slots__ = ("lead", "draw", "double_bonus", "domino_points", "blocked", "endgame_reduction", "match_end", "target", "clock", "clock_initial", "clock_increment", "on_timeout", "timeouts_to_forfeit")
    LEAD_FIELD_NUMBER: _ClassVar[int]
    DRAW_FIELD_NUMBER: _ClassVar[int]
    DOUBLE_BONUS_FIELD_NUMBER: _ClassVar[int]
    DOMINO_POINTS_FIELD_NUMBER: _ClassVar[int]
    BLOCKED_FIELD_NUMBER: _ClassVar[int]
    ENDGAME_REDUCTION_FIELD_NUMBER: _ClassVar[int]
    MATCH_END_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    CLOCK_FIELD_NUMBER: _ClassVar[int]
    CLOCK_INITIAL_FIELD_NUMBER: _ClassVar[int]
    CLOCK_INCREMENT_FIELD_NUMBER: _ClassVar[int]
    ON_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUTS_TO_FORFEIT_FIELD_NUMBER: _ClassVar[int]
    lead: Lead
    draw: Draw
    double_bonus: int
    domino_points: int
    blocked: Blocked
    endgame_reduction: EndgameReduction
    match_end: MatchEnd
    target: int
    clock: Clock
    clock_initial: int
    clock_increment: int
    on_timeout: OnTimeout
    timeouts_to_forfeit: int
    def __init__(self, lead: _Optional[_Union[Lead, str]] = ..., draw: _Optional[_Union[Draw, str]] = ..., double_bonus: _Optional[int] = ..., domino_points: _Optional[int] = ..., blocked: _Optional[_Union[Blocked, str]] = ..., endgame_reduction: _Optional[_Union[EndgameReduction, str]] = ..., match_end: _Optional[_Union[MatchEnd, str]] = ..., target: _Optional[int] = ..., clock: _Optional[_Union[Clock, str]] = ..., clock_initial: _Optional[int] = ..., clock_increment: _Optional[int] = ..., on_timeout: _Optional[_Union[OnTimeout, str]] = ..., timeouts_to_forfeit: _Optional[int] = ...) -> None: ...

class CreateMatchRequest(_message.Message):
    __slots__ = ("seats", "partnerships", "preset", "options", "name", "creator_token", "rematch_of", "rated")
    SEATS_FIELD_NUMBER: _ClassVar[int]
    PARTNERSHIPS_FIELD_NUMBER: _ClassVar[int]
    PRESET_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CREATOR_TOKEN_FIELD_NUMBER: _ClassVar[int]
    REMATCH_OF_FIELD_NUMBER: _ClassVar[int]
    RATED_FIELD_NUMBER: _ClassVar[int]
    seats: int
    partnerships: bool
    preset: Preset
    options: RuleOptions
    name: str
    creator_token: str
    rematch_of: str
    rated: bool
    def __init__(self, seats: _Optional[int] = ..., partnerships: _Optional[bool] = ..., preset: _Optional[_Union[Preset, str]] = ..., options: _Optional[_Union[RuleOptions, _Mapping]] = ..., name: _Optional[str] = ..., creator_token: _Optional[str] = ..., rematch_of: _Optional[str] = ..., rated: _Optional[bool] = ...) -> None: ...

class CreateMatchResponse(_message.Message):
    __slots__ = ("match_id", "commitment", "rules", "replayed")
    MATCH_ID_FIELD_NUMBER: _ClassVar[int]
    COMMITMENT_FIELD_NUMBER: _ClassVar[int]
    RULES_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    match_id: str
    commitment: str
    rules: Rules
    replayed: bool
    def __init__(self, match_id: _Optional[str] = ..., commitment: _Optional[str] = ..., rules: _Optional[_Union[Rules, _Mapping]] = ..., replayed: _Optional[bool] = ...) -> None: ...

class JoinMatchRequest(_message.Message):
    __slots__ = ("match_id", "seat", "name", "client_seed", "seat_token", "previous_seat_token", "player_token")
    MATCH_ID_FIELD_NUMBER: _ClassVar[int]
    SEAT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SEED_FIELD_NUMBER: _ClassVar[int]
    SEAT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_SEAT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PLAYER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    match_id: str
    seat: int
    name: str
    client_seed: str
    seat_token: str
    previous_seat_token: str
    player_token: str
    def __init__(self, match_id: _Optional[str] = ..., seat: _Optional[int] = ..., name: _Optional[str] = ..., client_seed: _Optional[str] = ..., seat_token: _Optional[str] = ..., previous_seat_token: _Optional[str] = ..., player_token: _Optional[str] = ...) -> None: ...

class JoinMatchResponse(_message.Message):
    __slots__ = ("seat", "seat_token", "view")
    SEAT_FIELD_NUMBER: _ClassVar[int]
    SEAT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    seat: int
    seat_token: str
    view: MatchView
    def __init__(self, seat: _Optional[int] = ..., seat_token: _Optional[str] = ..., view: _Optional[_Union[MatchView, _Mapping]] = ...) -> None: ...

class GetMatchRequest(_message.Message):
    __slots__ = ("match_id",)
    MATCH_ID_FIELD_NUMBER: _ClassVar[int]
    match_id: str
    def __init__(self, match_id: _Optional[str] = ...) -> None: ...

class GetMatchResponse(_message.Message):
    __slots__ = ("view",)
    VIEW_FIELD_NUMBER: _ClassVar[int]
    view: MatchView
    def __init__(self, view: _Optional[_Union[MatchView, _Mapping]] = ...) -> None: ...

class SeatInfo(_message.Message):
    __slots__ = ("seat", "name", "taken", "tile_count", "side", "player_id", "bot")
    SEAT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TAKEN_FIELD_NUMBER: _ClassVar[int]
    TILE_COUNT_FIELD_NUMBER: _ClassVar[int]
    SIDE_FIELD_NUMBER: _ClassVar[int]
    PLAYER_ID_FIELD_NUMBER: _ClassVar[int]
    BOT_FIELD_NUMBER: _ClassVar[int]
    seat: int
    name: str
    taken: bool
    tile_count: int
    side: int
    player_id: str
    bot: bool
    def __init__(self, seat: _Optional[int] = ..., name: _Optional[str] = ..., taken: _Optional[bool] = ..., tile_count: _Optional[int] = ..., side: _Optional[int] = ..., player_id: _Optional[str] = ..., bot: _Optional[bool] = ...) -> None: ...

class LineTile(_message.Message):
    __slots__ = ("left", "right")
    LEFT_FIELD_NUMBER: _ClassVar[int]
    RIGHT_FIELD_NUMBER: _ClassVar[int]
    left: int
    right: int
    def __init__(self, left: _Optional[int] = ..., right: _Optional[int] = ...) -> None: ...

class Ends(_message.Message):
    __slots__ = ("left", "right", "left_double", "right_double")
    LEFT_FIELD_NUMBER: _ClassVar[int]
    RIGHT_FIELD_NUMBER: _ClassVar[int]
    LEFT_DOUBLE_FIELD_NUMBER: _ClassVar[int]
    RIGHT_DOUBLE_FIELD_NUMBER: _ClassVar[int]
    left: int
    right: int
    left_double: bool
    right_double: bool
    def __init__(self, left: _Optional[int] = ..., right: _Optional[int] = ..., left_double: _Optional[bool] = ..., right_double: _Optional[bool] = ...) -> None: ...

class LegalPlay(_message.Message):
    __slots__ = ("tile", "end")
    TILE_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    tile: Tile
    end: End
    def __init__(self, tile: _Optional[_Union[Tile, _Mapping]] = ..., end: _Optional[_Union[End, str]] = ...) -> None: ...

class Hand(_message.Message):
    __slots__ = ("tiles",)
    TILES_FIELD_NUMBER: _ClassVar[int]
    tiles: _containers.RepeatedCompositeFieldContainer[Tile]
    def __init__(self, tiles: _Optional[_Iterable[_Union[Tile, _Mapping]]] = ...) -> None: ...

class Result(_message.Message):
    __slots__ = ("reason", "winner_side", "scores", "resigned_seat", "note", "forfeited_side", "cause", "at_ms")
    REASON_FIELD_NUMBER: _ClassVar[int]
    WINNER_SIDE_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    RESIGNED_SEAT_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    FORFEITED_SIDE_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    reason: MatchEndReason
    winner_side: int
    scores: _containers.RepeatedScalarFieldContainer[int]
    resigned_seat: int
    note: str
    forfeited_side: int
    cause: ForfeitCause
    at_ms: int
    def __init__(self, reason: _Optional[_Union[MatchEndReason, str]] = ..., winner_side: _Optional[int] = ..., scores: _Optional[_Iterable[int]] = ..., resigned_seat: _Optional[int] = ..., note: _Optional[str] = ..., forfeited_side: _Optional[int] = ..., cause: _Optional[_Union[ForfeitCause, str]] = ..., at_ms: _Optional[int] = ...) -> None: ...

class SeatClock(_message.Message):
    __slots__ = ("seat", "left_ms", "running", "falls_at_ms", "timeouts")
    SEAT_FIELD_NUMBER: _ClassVar[int]
    LEFT_MS_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    FALLS_AT_MS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUTS_FIELD_NUMBER: _ClassVar[int]
    seat: int
    left_ms: int
    running: bool
    falls_at_ms: int
    timeouts: int
    def __init__(self, seat: _Optional[int] = ..., left_ms: _Optional[int] = ..., running: _Optional[bool] = ..., falls_at_ms: _Optional[int] = ..., timeouts: _Optional[int] = ...) -> None: ...

class MatchView(_message.Message):
    __slots__ = ("match_id", "name", "phase", "rules", "partnerships", "viewer_seat", "seats", "commitment", "server_seed", "hand_number", "my_tiles", "revealed_hands", "boneyard_size", "drawable", "line", "ends", "scores", "turn", "must_play", "legal_plays", "result", "version", "clocks", "at_ms", "server_at_ms", "rematch_of", "rated")
    MATCH_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    RULES_FIELD_NUMBER: _ClassVar[int]
    PARTNERSHIPS_FIELD_NUMBER: _ClassVar[int]
    VIEWER_SEAT_FIELD_NUMBER: _ClassVar[int]
    SEATS_FIELD_NUMBER: _ClassVar[int]
    COMMITMENT_FIELD_NUMBER: _ClassVar[int]
    SERVER_SEED_FIELD_NUMBER: _ClassVar[int]
    HAND_NUMBER_FIELD_NUMBER: _ClassVar[int]
    MY_TILES_FIELD_NUMBER: _ClassVar[int]
    REVEALED_HANDS_FIELD_NUMBER: _ClassVar[int]
    BONEYARD_SIZE_FIELD_NUMBER: _ClassVar[int]
    DRAWABLE_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    ENDS_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    MUST_PLAY_FIELD_NUMBER: _ClassVar[int]
    LEGAL_PLAYS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CLOCKS_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    SERVER_AT_MS_FIELD_NUMBER: _ClassVar[int]
    REMATCH_OF_FIELD_NUMBER: _ClassVar[int]
    RATED_FIELD_NUMBER: _ClassVar[int]
    match_id: str
    name: str
    phase: Phase
    rules: Rules
    partnerships: bool
    viewer_seat: int
    seats: _containers.RepeatedCompositeFieldContainer[SeatInfo]
    commitment: str
    server_seed: str
    hand_number: int
    my_tiles: _containers.RepeatedCompositeFieldContainer[Tile]
    revealed_hands: _containers.RepeatedCompositeFieldContainer[Hand]
    boneyard_size: int
    drawable: int
    line: _containers.RepeatedCompositeFieldContainer[LineTile]
    ends: Ends
    scores: _containers.RepeatedScalarFieldContainer[int]
    turn: int
    must_play: Tile
    legal_plays: _containers.RepeatedCompositeFieldContainer[LegalPlay]
    result: Result
    version: int
    clocks: _containers.RepeatedCompositeFieldContainer[SeatClock]
    at_ms: int
    server_at_ms: int
    rematch_of: str
    rated: bool
    def __init__(self, match_id: _Optional[str] = ..., name: _Optional[str] = ..., phase: _Optional[_Union[Phase, str]] = ..., rules: _Optional[_Union[Rules, _Mapping]] = ..., partnerships: _Optional[bool] = ..., viewer_seat: _Optional[int] = ..., seats: _Optional[_Iterable[_Union[SeatInfo, _Mapping]]] = ..., commitment: _Optional[str] = ..., server_seed: _Optional[str] = ..., hand_number: _Optional[int] = ..., my_tiles: _Optional[_Iterable[_Union[Tile, _Mapping]]] = ..., revealed_hands: _Optional[_Iterable[_Union[Hand, _Mapping]]] = ..., boneyard_size: _Optional[int] = ..., drawable: _Optional[int] = ..., line: _Optional[_Iterable[_Union[LineTile, _Mapping]]] = ..., ends: _Optional[_Union[Ends, _Mapping]] = ..., scores: _Optional[_Iterable[int]] = ..., turn: _Optional[int] = ..., must_play: _Optional[_Union[Tile, _Mapping]] = ..., legal_plays: _Optional[_Iterable[_Union[LegalPlay, _Mapping]]] = ..., result: _Optional[_Union[Result, _Mapping]] = ..., version: _Optional[int] = ..., clocks: _Optional[_Iterable[_Union[SeatClock, _Mapping]]] = ..., at_ms: _Optional[int] = ..., server_at_ms: _Optional[int] = ..., rematch_of: _Optional[str] = ..., rated: _Optional[bool] = ...) -> None: ...

class PlayRequest(_message.Message):
    __slots__ = ("match_id", "tile", "end", "expected_version", "command_id")
    MATCH_ID_FIELD_NUMBER: _ClassVar[int]
    TILE_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    match_id: str
    tile: Tile
    end: End
    expected_version: int
    command_id: str
    def __init__(self, match_id: _Optional[str] = ..., tile: _Optional[_Union[Tile, _Mapping]] = ..., end: _Optional[_Union[End, str]] = ..., expected_version: _Optional[int] = ..., command_id: _Optional[str] = ...) -> None: ...

class PlayResponse(_message.Message):
    __slots__ = ("events", "view", "replayed")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[Event]
    view: MatchView
    replayed: bool
    def __init__(self, events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ..., view: _Optional[_Union[MatchView, _Mapping]] = ..., replayed: _Optional[bool] = ...) -> None: ...

class ResignRequest(_message.Message):
    __slots__ = ("match_id", "command_id")
    MATCH_ID_FIELD_NUMBER: _ClassVar[int]
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    match_id: str
    command_id: str
    def __init__(self, match_id: _Optional[str] = ..., command_id: _Optional[str] = ...) -> None: ...

class ResignResponse(_message.Message):
    __slots__ = ("events", "view")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[Event]
    view: MatchView
    def __init__(self, events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ..., view: _Optional[_Union[MatchView, _Mapping]] = ...) -> None: ...

class WatchMatchRequest(_message.Message):
    __slots__ = ("match_id", "after_seq", "batched")
    MATCH_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    BATCHED_FIELD_NUMBER: _ClassVar[int]
    match_id: str
    after_seq: int
    batched: bool
    def __init__(self, match_id: _Optional[str] = ..., after_seq: _Optional[int] = ..., batched: _Optional[bool] = ...) -> None: ...

class WatchMatchResponse(_message.Message):
    __slots__ = ("view", "event", "events")
    VIEW_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    view: MatchView
    event: Event
    events: _containers.RepeatedCompositeFieldContainer[Event]
    def __init__(self, view: _Optional[_Union[MatchView, _Mapping]] = ..., event: _Optional[_Union[Event, _Mapping]] = ..., events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ...) -> None: ...

class WatchMatchesRequest(_message.Message):
    __slots__ = ("follows",)
    class Follow(_message.Message):
        __slots__ = ("match_id", "after_seq", "seat_token")
        MATCH_ID_FIELD_NUMBER: _ClassVar[int]
        AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
        SEAT_TOKEN_FIELD_NUMBER: _ClassVar[int]
        match_id: str
        after_seq: int
        seat_token: str
        def __init__(self, match_id: _Optional[str] = ..., after_seq: _Optional[int] = ..., seat_token: _Optional[str] = ...) -> None: ...
    FOLLOWS_FIELD_NUMBER: _ClassVar[int]
    follows: _containers.RepeatedCompositeFieldContainer[WatchMatchesRequest.Follow]
    def __init__(self, follows: _Optional[_Iterable[_Union[WatchMatchesRequest.Follow, _Mapping]]] = ...) -> None: ...

class WatchMatchesResponse(_message.Message):
    __slots__ = ("follow", "match_id", "view", "events", "ended")
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    MATCH_ID_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    ENDED_FIELD_NUMBER: _ClassVar[int]
    follow: int
    match_id: str
    view: MatchView
    events: _containers.RepeatedCompositeFieldContainer[Event]
    ended: bool
    def __init__(self, follow: _Optional[int] = ..., match_id: _Optional[str] = ..., view: _Optional[_Union[MatchView, _Mapping]] = ..., events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ..., ended: _Optional[bool] = ...) -> None: ...

class GetReplayRequest(_message.Message):
    __slots__ = ("match_id", "after_seq")
    MATCH_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    match_id: str
    after_seq: int
    def __init__(self, match_id: _Optional[str] = ..., after_seq: _Optional[int] = ...) -> None: ...

class GetReplayResponse(_message.Message):
    __slots__ = ("events", "complete")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[Event]
    complete: bool
    def __init__(self, events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ..., complete: _Optional[bool] = ...) -> None: ...

class GetRecordRequest(_message.Message):
    __slots__ = ("match_id",)
    MATCH_ID_FIELD_NUMBER: _ClassVar[int]
    match_id: str
    def __init__(self, match_id: _Optional[str] = ...) -> None: ...

class GetRecordResponse(_message.Message):
    __slots__ = ("record_json",)
    RECORD_JSON_FIELD_NUMBER: _ClassVar[int]
    record_json: str
    def __init__(self, record_json: _Optional[str] = ...) -> None: ...

class ExportRecordsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ExportRecordsResponse(_message.Message):
    __slots__ = ("records_json", "next_page_token", "refused_match_ids")
    RECORDS_JSON_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    REFUSED_MATCH_IDS_FIELD_NUMBER: _ClassVar[int]
    records_json: _containers.RepeatedScalarFieldContainer[str]
    next_page_token: str
    refused_match_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, records_json: _Optional[_Iterable[str]] = ..., next_page_token: _Optional[str] = ..., refused_match_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class GetServerInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetServerInfoResponse(_message.Message):
    __slots__ = ("signature_algorithm", "public_key", "record_format", "rules_version")
    SIGNATURE_ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    RECORD_FORMAT_FIELD_NUMBER: _ClassVar[int]
    RULES_VERSION_FIELD_NUMBER: _ClassVar[int]
    signature_algorithm: str
    public_key: str
    record_format: str
    rules_version: str
    def __init__(self, signature_algorithm: _Optional[str] = ..., public_key: _Optional[str] = ..., record_format: _Optional[str] = ..., rules_version: _Optional[str] = ...) -> None: ...

class GetAuditLogRequest(_message.Message):
    __slots__ = ("match_id",)
    MATCH_ID_FIELD_NUMBER: _ClassVar[int]
    match_id: str
    def __init__(self, match_id: _Optional[str] = ...) -> None: ...

class AuditEvent(_message.Message):
    __slots__ = ("seq", "type", "schema_version", "payload_json", "metadata_json", "prev_hash", "salt", "hash", "recorded_at", "position")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    PREV_HASH_FIELD_NUMBER: _ClassVar[int]
    SALT_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    RECORDED_AT_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    seq: int
    type: str
    schema_version: int
    payload_json: str
    metadata_json: str
    prev_hash: str
    salt: str
    hash: str
    recorded_at: _timestamp_pb2.Timestamp
    position: int
    def __init__(self, seq: _Optional[int] = ..., type: _Optional[str] = ..., schema_version: _Optional[int] = ..., payload_json: _Optional[str] = ..., metadata_json: _Optional[str] = ..., prev_hash: _Optional[str] = ..., salt: _Optional[str] = ..., hash: _Optional[str] = ..., recorded_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., position: _Optional[int] = ...) -> None: ...

class GetAuditLogResponse(_message.Message):
    __slots__ = ("match_id", "events")
    MATCH_ID_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    match_id: str
    events: _containers.RepeatedCompositeFieldContainer[AuditEvent]
    def __init__(self, match_id: _Optional[str] = ..., events: _Optional[_Iterable[_Union[AuditEvent, _Mapping]]] = ...) -> None: ...

class ListMatchesRequest(_message.Message):
    __slots__ = ("phase", "player_name", "page_size", "page_token")
    PHASE_FIELD_NUMBER: _ClassVar[int]
    PLAYER_NAME_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    phase: Phase
    player_name: str
    page_size: int
    page_token: str
    def __init__(self, phase: _Optional[_Union[Phase, str]] = ..., player_name: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class MatchSummary(_message.Message):
    __slots__ = ("match_id", "name", "phase", "seat_count", "partnerships", "preset", "players", "scores", "version", "created_at", "started_at", "hand", "rematch_of", "player_ids", "bots", "rated")
    MATCH_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    SEAT_COUNT_FIELD_NUMBER: _ClassVar[int]
    PARTNERSHIPS_FIELD_NUMBER: _ClassVar[int]
    PRESET_FIELD_NUMBER: _ClassVar[int]
    PLAYERS_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    HAND_FIELD_NUMBER: _ClassVar[int]
    REMATCH_OF_FIELD_NUMBER: _ClassVar[int]
    PLAYER_IDS_FIELD_NUMBER: _ClassVar[int]
    BOTS_FIELD_NUMBER: _ClassVar[int]
    RATED_FIELD_NUMBER: _ClassVar[int]
    match_id: str
    name: str
    phase: Phase
    seat_count: int
    partnerships: bool
    preset: Preset
    players: _containers.RepeatedScalarFieldContainer[str]
    scores: _containers.RepeatedScalarFieldContainer[int]
    version: int
    created_at: _timestamp_pb2.Timestamp
    started_at: _timestamp_pb2.Timestamp
    hand: int
    rematch_of: str
    player_ids: _containers.RepeatedScalarFieldContainer[str]
    bots: _containers.RepeatedScalarFieldContainer[bool]
    rated: bool
    def __init__(self, match_id: _Optional[str] = ..., name: _Optional[str] = ..., phase: _Optional[_Union[Phase, str]] = ..., seat_count: _Optional[int] = ..., partnerships: _Optional[bool] = ..., preset: _Optional[_Union[Preset, str]] = ..., players: _Optional[_Iterable[str]] = ..., scores: _Optional[_Iterable[int]] = ..., version: _Optional[int] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., hand: _Optional[int] = ..., rematch_of: _Optional[str] = ..., player_ids: _Optional[_Iterable[str]] = ..., bots: _Optional[_Iterable[bool]] = ..., rated: _Optional[bool] = ...) -> None: ...

class ListMatchesResponse(_message.Message):
    __slots__ = ("matches", "next_page_token")
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    matches: _containers.RepeatedCompositeFieldContainer[MatchSummary]
    next_page_token: str
    def __init__(self, matches: _Optional[_Iterable[_Union[MatchSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class AbandonMatchRequest(_message.Message):
    __slots__ = ("match_id", "note")
    MATCH_ID_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    match_id: str
    note: str
    def __init__(self, match_id: _Optional[str] = ..., note: _Optional[str] = ...) -> None: ...

class AbandonMatchResponse(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[Event]
    def __init__(self, events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("seq", "match_created", "seat_taken", "dealt", "deal_voided", "tile_played", "tile_drawn", "passed", "points_scored", "hand_ended", "match_ended", "seed_revealed", "timed_out")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    MATCH_CREATED_FIELD_NUMBER: _ClassVar[int]
    SEAT_TAKEN_FIELD_NUMBER: _ClassVar[int]
    DEALT_FIELD_NUMBER: _ClassVar[int]
    DEAL_VOIDED_FIELD_NUMBER: _ClassVar[int]
    TILE_PLAYED_FIELD_NUMBER: _ClassVar[int]
    TILE_DRAWN_FIELD_NUMBER: _ClassVar[int]
    PASSED_FIELD_NUMBER: _ClassVar[int]
    POINTS_SCORED_FIELD_NUMBER: _ClassVar[int]
    HAND_ENDED_FIELD_NUMBER: _ClassVar[int]
    MATCH_ENDED_FIELD_NUMBER: _ClassVar[int]
    SEED_REVEALED_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    seq: int
    match_created: MatchCreated
    seat_taken: SeatTaken
    dealt: Dealt
    deal_voided: DealVoided
    tile_played: TilePlayed
    tile_drawn: TileDrawn
    passed: Passed
    points_scored: PointsScored
    hand_ended: HandEnded
    match_ended: MatchEnded
    seed_revealed: SeedRevealed
    timed_out: TimedOut
    def __init__(self, seq: _Optional[int] = ..., match_created: _Optional[_Union[MatchCreated, _Mapping]] = ..., seat_taken: _Optional[_Union[SeatTaken, _Mapping]] = ..., dealt: _Optional[_Union[Dealt, _Mapping]] = ..., deal_voided: _Optional[_Union[DealVoided, _Mapping]] = ..., tile_played: _Optional[_Union[TilePlayed, _Mapping]] = ..., tile_drawn: _Optional[_Union[TileDrawn, _Mapping]] = ..., passed: _Optional[_Union[Passed, _Mapping]] = ..., points_scored: _Optional[_Union[PointsScored, _Mapping]] = ..., hand_ended: _Optional[_Union[HandEnded, _Mapping]] = ..., match_ended: _Optional[_Union[MatchEnded, _Mapping]] = ..., seed_revealed: _Optional[_Union[SeedRevealed, _Mapping]] = ..., timed_out: _Optional[_Union[TimedOut, _Mapping]] = ...) -> None: ...

class MatchCreated(_message.Message):
    __slots__ = ("match_id", "seats", "partnerships", "rules", "commitment", "name", "rated")
    MATCH_ID_FIELD_NUMBER: _ClassVar[int]
    SEATS_FIELD_NUMBER: _ClassVar[int]
    PARTNERSHIPS_FIELD_NUMBER: _ClassVar[int]
    RULES_FIELD_NUMBER: _ClassVar[int]
    COMMITMENT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    RATED_FIELD_NUMBER: _ClassVar[int]
    match_id: str
    seats: int
    partnerships: bool
    rules: Rules
    commitment: str
    name: str
    rated: bool
    def __init__(self, match_id: _Optional[str] = ..., seats: _Optional[int] = ..., partnerships: _Optional[bool] = ..., rules: _Optional[_Union[Rules, _Mapping]] = ..., commitment: _Optional[str] = ..., name: _Optional[str] = ..., rated: _Optional[bool] = ...) -> None: ...

class SeatTaken(_message.Message):
    __slots__ = ("seat", "name", "client_seed", "player_id", "bot")
    SEAT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SEED_FIELD_NUMBER: _ClassVar[int]
    PLAYER_ID_FIELD_NUMBER: _ClassVar[int]
    BOT_FIELD_NUMBER: _ClassVar[int]
    seat: int
    name: str
    client_seed: str
    player_id: str
    bot: bool
    def __init__(self, seat: _Optional[int] = ..., name: _Optional[str] = ..., client_seed: _Optional[str] = ..., player_id: _Optional[str] = ..., bot: _Optional[bool] = ...) -> None: ...

class DealtHand(_message.Message):
    __slots__ = ("tiles", "count")
    TILES_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    tiles: _containers.RepeatedCompositeFieldContainer[Tile]
    count: int
    def __init__(self, tiles: _Optional[_Iterable[_Union[Tile, _Mapping]]] = ..., count: _Optional[int] = ...) -> None: ...

class Dealt(_message.Message):
    __slots__ = ("hand", "attempt", "hands", "boneyard", "boneyard_size")
    HAND_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    HANDS_FIELD_NUMBER: _ClassVar[int]
    BONEYARD_FIELD_NUMBER: _ClassVar[int]
    BONEYARD_SIZE_FIELD_NUMBER: _ClassVar[int]
    hand: int
    attempt: int
    hands: _containers.RepeatedCompositeFieldContainer[DealtHand]
    boneyard: _containers.RepeatedCompositeFieldContainer[Tile]
    boneyard_size: int
    def __init__(self, hand: _Optional[int] = ..., attempt: _Optional[int] = ..., hands: _Optional[_Iterable[_Union[DealtHand, _Mapping]]] = ..., boneyard: _Optional[_Iterable[_Union[Tile, _Mapping]]] = ..., boneyard_size: _Optional[int] = ...) -> None: ...

class DealVoided(_message.Message):
    __slots__ = ("hand", "attempt")
    HAND_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    hand: int
    attempt: int
    def __init__(self, hand: _Optional[int] = ..., attempt: _Optional[int] = ...) -> None: ...

class TilePlayed(_message.Message):
    __slots__ = ("hand", "seat", "tile", "end", "at_ms", "clock_ms", "auto")
    HAND_FIELD_NUMBER: _ClassVar[int]
    SEAT_FIELD_NUMBER: _ClassVar[int]
    TILE_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    CLOCK_MS_FIELD_NUMBER: _ClassVar[int]
    AUTO_FIELD_NUMBER: _ClassVar[int]
    hand: int
    seat: int
    tile: Tile
    end: End
    at_ms: int
    clock_ms: int
    auto: bool
    def __init__(self, hand: _Optional[int] = ..., seat: _Optional[int] = ..., tile: _Optional[_Union[Tile, _Mapping]] = ..., end: _Optional[_Union[End, str]] = ..., at_ms: _Optional[int] = ..., clock_ms: _Optional[int] = ..., auto: _Optional[bool] = ...) -> None: ...

class TileDrawn(_message.Message):
    __slots__ = ("hand", "seat", "tile", "at_ms")
    HAND_FIELD_NUMBER: _ClassVar[int]
    SEAT_FIELD_NUMBER: _ClassVar[int]
    TILE_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    hand: int
    seat: int
    tile: Tile
    at_ms: int
    def __init__(self, hand: _Optional[int] = ..., seat: _Optional[int] = ..., tile: _Optional[_Union[Tile, _Mapping]] = ..., at_ms: _Optional[int] = ...) -> None: ...

class Passed(_message.Message):
    __slots__ = ("hand", "seat", "at_ms")
    HAND_FIELD_NUMBER: _ClassVar[int]
    SEAT_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    hand: int
    seat: int
    at_ms: int
    def __init__(self, hand: _Optional[int] = ..., seat: _Optional[int] = ..., at_ms: _Optional[int] = ...) -> None: ...

class TimedOut(_message.Message):
    __slots__ = ("hand", "seat", "at_ms")
    HAND_FIELD_NUMBER: _ClassVar[int]
    SEAT_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    hand: int
    seat: int
    at_ms: int
    def __init__(self, hand: _Optional[int] = ..., seat: _Optional[int] = ..., at_ms: _Optional[int] = ...) -> None: ...

class PointsScored(_message.Message):
    __slots__ = ("hand", "side", "points", "reason", "base", "seat")
    HAND_FIELD_NUMBER: _ClassVar[int]
    SIDE_FIELD_NUMBER: _ClassVar[int]
    POINTS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    BASE_FIELD_NUMBER: _ClassVar[int]
    SEAT_FIELD_NUMBER: _ClassVar[int]
    hand: int
    side: int
    points: int
    reason: PointsReason
    base: int
    seat: int
    def __init__(self, hand: _Optional[int] = ..., side: _Optional[int] = ..., points: _Optional[int] = ..., reason: _Optional[_Union[PointsReason, str]] = ..., base: _Optional[int] = ..., seat: _Optional[int] = ...) -> None: ...

class HandEnded(_message.Message):
    __slots__ = ("hand", "reason", "side", "points", "scores")
    HAND_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SIDE_FIELD_NUMBER: _ClassVar[int]
    POINTS_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    hand: int
    reason: HandEndReason
    side: int
    points: int
    scores: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, hand: _Optional[int] = ..., reason: _Optional[_Union[HandEndReason, str]] = ..., side: _Optional[int] = ..., points: _Optional[int] = ..., scores: _Optional[_Iterable[int]] = ...) -> None: ...

class MatchEnded(_message.Message):
    __slots__ = ("result",)
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: Result
    def __init__(self, result: _Optional[_Union[Result, _Mapping]] = ...) -> None: ...

class SeedRevealed(_message.Message):
    __slots__ = ("server_seed",)
    SERVER_SEED_FIELD_NUMBER: _ClassVar[int]
    server_seed: str
    def __init__(self, server_seed: _Optional[str] = ...) -> None: ...

class TournamentSettings(_message.Message):
    __slots__ = ("format", "seats", "partnerships", "preset", "options", "rounds", "double_round_robin", "round_delay", "max_entrants", "rounds_by_hand", "rated", "reveal_window")
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    SEATS_FIELD_NUMBER: _ClassVar[int]
    PARTNERSHIPS_FIELD_NUMBER: _ClassVar[int]
    PRESET_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    DOUBLE_ROUND_ROBIN_FIELD_NUMBER: _ClassVar[int]
    ROUND_DELAY_FIELD_NUMBER: _ClassVar[int]
    MAX_ENTRANTS_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_BY_HAND_FIELD_NUMBER: _ClassVar[int]
    RATED_FIELD_NUMBER: _ClassVar[int]
    REVEAL_WINDOW_FIELD_NUMBER: _ClassVar[int]
    format: TournamentFormat
    seats: int
    partnerships: bool
    preset: Preset
    options: RuleOptions
    rounds: int
    double_round_robin: bool
    round_delay: int
    max_entrants: int
    rounds_by_hand: bool
    rated: bool
    reveal_window: int
    def __init__(self, format: _Optional[_Union[TournamentFormat, str]] = ..., seats: _Optional[int] = ..., partnerships: _Optional[bool] = ..., preset: _Optional[_Union[Preset, str]] = ..., options: _Optional[_Union[RuleOptions, _Mapping]] = ..., rounds: _Optional[int] = ..., double_round_robin: _Optional[bool] = ..., round_delay: _Optional[int] = ..., max_entrants: _Optional[int] = ..., rounds_by_hand: _Optional[bool] = ..., rated: _Optional[bool] = ..., reveal_window: _Optional[int] = ...) -> None: ...

class CreateTournamentRequest(_message.Message):
    __slots__ = ("name", "settings")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    name: str
    settings: TournamentSettings
    def __init__(self, name: _Optional[str] = ..., settings: _Optional[_Union[TournamentSettings, _Mapping]] = ...) -> None: ...

class CreateTournamentResponse(_message.Message):
    __slots__ = ("tournament_id", "commitment")
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    COMMITMENT_FIELD_NUMBER: _ClassVar[int]
    tournament_id: str
    commitment: str
    def __init__(self, tournament_id: _Optional[str] = ..., commitment: _Optional[str] = ...) -> None: ...

class RegisterEntrantRequest(_message.Message):
    __slots__ = ("tournament_id", "players", "client_seed", "player_tokens", "registered_player_tokens", "client_seed_commitment")
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    PLAYERS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SEED_FIELD_NUMBER: _ClassVar[int]
    PLAYER_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_PLAYER_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SEED_COMMITMENT_FIELD_NUMBER: _ClassVar[int]
    tournament_id: str
    players: _containers.RepeatedScalarFieldContainer[str]
    client_seed: str
    player_tokens: _containers.RepeatedScalarFieldContainer[str]
    registered_player_tokens: _containers.RepeatedScalarFieldContainer[str]
    client_seed_commitment: str
    def __init__(self, tournament_id: _Optional[str] = ..., players: _Optional[_Iterable[str]] = ..., client_seed: _Optional[str] = ..., player_tokens: _Optional[_Iterable[str]] = ..., registered_player_tokens: _Optional[_Iterable[str]] = ..., client_seed_commitment: _Optional[str] = ...) -> None: ...

class RegisterEntrantResponse(_message.Message):
    __slots__ = ("entrant", "player_tokens")
    ENTRANT_FIELD_NUMBER: _ClassVar[int]
    PLAYER_TOKENS_FIELD_NUMBER: _ClassVar[int]
    entrant: int
    player_tokens: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, entrant: _Optional[int] = ..., player_tokens: _Optional[_Iterable[str]] = ...) -> None: ...

class WithdrawEntrantRequest(_message.Message):
    __slots__ = ("tournament_id", "entrant", "note")
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRANT_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    tournament_id: str
    entrant: int
    note: str
    def __init__(self, tournament_id: _Optional[str] = ..., entrant: _Optional[int] = ..., note: _Optional[str] = ...) -> None: ...

class WithdrawEntrantResponse(_message.Message):
    __slots__ = ("after_round",)
    AFTER_ROUND_FIELD_NUMBER: _ClassVar[int]
    after_round: int
    def __init__(self, after_round: _Optional[int] = ...) -> None: ...

class StartTournamentRequest(_message.Message):
    __slots__ = ("tournament_id",)
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    tournament_id: str
    def __init__(self, tournament_id: _Optional[str] = ...) -> None: ...

class StartTournamentResponse(_message.Message):
    __slots__ = ("seeding", "reveal_deadline_ms")
    SEEDING_FIELD_NUMBER: _ClassVar[int]
    REVEAL_DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    seeding: _containers.RepeatedScalarFieldContainer[int]
    reveal_deadline_ms: int
    def __init__(self, seeding: _Optional[_Iterable[int]] = ..., reveal_deadline_ms: _Optional[int] = ...) -> None: ...

class StartNextRoundRequest(_message.Message):
    __slots__ = ("tournament_id",)
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    tournament_id: str
    def __init__(self, tournament_id: _Optional[str] = ...) -> None: ...

class StartNextRoundResponse(_message.Message):
    __slots__ = ("round",)
    ROUND_FIELD_NUMBER: _ClassVar[int]
    round: int
    def __init__(self, round: _Optional[int] = ...) -> None: ...

class GetTournamentRequest(_message.Message):
    __slots__ = ("tournament_id",)
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    tournament_id: str
    def __init__(self, tournament_id: _Optional[str] = ...) -> None: ...

class TournamentEntrant(_message.Message):
    __slots__ = ("entrant", "players", "client_seed", "withdrawn_after_round", "withdrawn_by", "player_ids", "bots", "client_seed_commitment", "revealed")
    ENTRANT_FIELD_NUMBER: _ClassVar[int]
    PLAYERS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SEED_FIELD_NUMBER: _ClassVar[int]
    WITHDRAWN_AFTER_ROUND_FIELD_NUMBER: _ClassVar[int]
    WITHDRAWN_BY_FIELD_NUMBER: _ClassVar[int]
    PLAYER_IDS_FIELD_NUMBER: _ClassVar[int]
    BOTS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SEED_COMMITMENT_FIELD_NUMBER: _ClassVar[int]
    REVEALED_FIELD_NUMBER: _ClassVar[int]
    entrant: int
    players: _containers.RepeatedScalarFieldContainer[str]
    client_seed: str
    withdrawn_after_round: int
    withdrawn_by: Actor
    player_ids: _containers.RepeatedScalarFieldContainer[str]
    bots: _containers.RepeatedScalarFieldContainer[bool]
    client_seed_commitment: str
    revealed: bool
    def __init__(self, entrant: _Optional[int] = ..., players: _Optional[_Iterable[str]] = ..., client_seed: _Optional[str] = ..., withdrawn_after_round: _Optional[int] = ..., withdrawn_by: _Optional[_Union[Actor, str]] = ..., player_ids: _Optional[_Iterable[str]] = ..., bots: _Optional[_Iterable[bool]] = ..., client_seed_commitment: _Optional[str] = ..., revealed: _Optional[bool] = ...) -> None: ...

class TableResult(_message.Message):
    __slots__ = ("reason", "scores", "places", "match_points", "margins", "forfeited_side")
    REASON_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    PLACES_FIELD_NUMBER: _ClassVar[int]
    MATCH_POINTS_FIELD_NUMBER: _ClassVar[int]
    MARGINS_FIELD_NUMBER: _ClassVar[int]
    FORFEITED_SIDE_FIELD_NUMBER: _ClassVar[int]
    reason: MatchEndReason
    scores: _containers.RepeatedScalarFieldContainer[int]
    places: _containers.RepeatedScalarFieldContainer[int]
    match_points: _containers.RepeatedScalarFieldContainer[str]
    margins: _containers.RepeatedScalarFieldContainer[int]
    forfeited_side: int
    def __init__(self, reason: _Optional[_Union[MatchEndReason, str]] = ..., scores: _Optional[_Iterable[int]] = ..., places: _Optional[_Iterable[int]] = ..., match_points: _Optional[_Iterable[str]] = ..., margins: _Optional[_Iterable[int]] = ..., forfeited_side: _Optional[int] = ...) -> None: ...

class TournamentTable(_message.Message):
    __slots__ = ("table", "match_id", "sides", "result", "live_scores")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    MATCH_ID_FIELD_NUMBER: _ClassVar[int]
    SIDES_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    LIVE_SCORES_FIELD_NUMBER: _ClassVar[int]
    table: int
    match_id: str
    sides: _containers.RepeatedScalarFieldContainer[int]
    result: TableResult
    live_scores: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, table: _Optional[int] = ..., match_id: _Optional[str] = ..., sides: _Optional[_Iterable[int]] = ..., result: _Optional[_Union[TableResult, _Mapping]] = ..., live_scores: _Optional[_Iterable[int]] = ...) -> None: ...

class TournamentRound(_message.Message):
    __slots__ = ("round", "byes", "tables")
    ROUND_FIELD_NUMBER: _ClassVar[int]
    BYES_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    round: int
    byes: _containers.RepeatedScalarFieldContainer[int]
    tables: _containers.RepeatedCompositeFieldContainer[TournamentTable]
    def __init__(self, round: _Optional[int] = ..., byes: _Optional[_Iterable[int]] = ..., tables: _Optional[_Iterable[_Union[TournamentTable, _Mapping]]] = ...) -> None: ...

class TournamentStanding(_message.Message):
    __slots__ = ("rank", "entrant", "match_points", "margin", "buchholz", "wins")
    RANK_FIELD_NUMBER: _ClassVar[int]
    ENTRANT_FIELD_NUMBER: _ClassVar[int]
    MATCH_POINTS_FIELD_NUMBER: _ClassVar[int]
    MARGIN_FIELD_NUMBER: _ClassVar[int]
    BUCHHOLZ_FIELD_NUMBER: _ClassVar[int]
    WINS_FIELD_NUMBER: _ClassVar[int]
    rank: int
    entrant: int
    match_points: str
    margin: int
    buchholz: str
    wins: int
    def __init__(self, rank: _Optional[int] = ..., entrant: _Optional[int] = ..., match_points: _Optional[str] = ..., margin: _Optional[int] = ..., buchholz: _Optional[str] = ..., wins: _Optional[int] = ...) -> None: ...

class TournamentAssignment(_message.Message):
    __slots__ = ("entrant", "player", "match_id", "seat", "round", "table")
    ENTRANT_FIELD_NUMBER: _ClassVar[int]
    PLAYER_FIELD_NUMBER: _ClassVar[int]
    MATCH_ID_FIELD_NUMBER: _ClassVar[int]
    SEAT_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    entrant: int
    player: int
    match_id: str
    seat: int
    round: int
    table: int
    def __init__(self, entrant: _Optional[int] = ..., player: _Optional[int] = ..., match_id: _Optional[str] = ..., seat: _Optional[int] = ..., round: _Optional[int] = ..., table: _Optional[int] = ...) -> None: ...

class TournamentView(_message.Message):
    __slots__ = ("tournament_id", "name", "settings", "commitment", "phase", "round", "total_rounds", "entrants", "seeding", "rounds", "standings", "tournament_seed", "version", "interventions", "cancelled", "reveal_deadline_ms")
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    COMMITMENT_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    TOTAL_ROUNDS_FIELD_NUMBER: _ClassVar[int]
    ENTRANTS_FIELD_NUMBER: _ClassVar[int]
    SEEDING_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    STANDINGS_FIELD_NUMBER: _ClassVar[int]
    TOURNAMENT_SEED_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    INTERVENTIONS_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    REVEAL_DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    tournament_id: str
    name: str
    settings: TournamentSettings
    commitment: str
    phase: TournamentPhase
    round: int
    total_rounds: int
    entrants: _containers.RepeatedCompositeFieldContainer[TournamentEntrant]
    seeding: _containers.RepeatedScalarFieldContainer[int]
    rounds: _containers.RepeatedCompositeFieldContainer[TournamentRound]
    standings: _containers.RepeatedCompositeFieldContainer[TournamentStanding]
    tournament_seed: str
    version: int
    interventions: _containers.RepeatedCompositeFieldContainer[TournamentIntervention]
    cancelled: bool
    reveal_deadline_ms: int
    def __init__(self, tournament_id: _Optional[str] = ..., name: _Optional[str] = ..., settings: _Optional[_Union[TournamentSettings, _Mapping]] = ..., commitment: _Optional[str] = ..., phase: _Optional[_Union[TournamentPhase, str]] = ..., round: _Optional[int] = ..., total_rounds: _Optional[int] = ..., entrants: _Optional[_Iterable[_Union[TournamentEntrant, _Mapping]]] = ..., seeding: _Optional[_Iterable[int]] = ..., rounds: _Optional[_Iterable[_Union[TournamentRound, _Mapping]]] = ..., standings: _Optional[_Iterable[_Union[TournamentStanding, _Mapping]]] = ..., tournament_seed: _Optional[str] = ..., version: _Optional[int] = ..., interventions: _Optional[_Iterable[_Union[TournamentIntervention, _Mapping]]] = ..., cancelled: _Optional[bool] = ..., reveal_deadline_ms: _Optional[int] = ...) -> None: ...

class GetTournamentResponse(_message.Message):
    __slots__ = ("tournament", "assignment")
    TOURNAMENT_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    tournament: TournamentView
    assignment: TournamentAssignment
    def __init__(self, tournament: _Optional[_Union[TournamentView, _Mapping]] = ..., assignment: _Optional[_Union[TournamentAssignment, _Mapping]] = ...) -> None: ...

class ListTournamentsRequest(_message.Message):
    __slots__ = ("phase", "page_size", "page_token")
    PHASE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    phase: TournamentPhase
    page_size: int
    page_token: str
    def __init__(self, phase: _Optional[_Union[TournamentPhase, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class TournamentSummary(_message.Message):
    __slots__ = ("tournament_id", "name", "phase", "format", "entrants", "round", "total_rounds")
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    ENTRANTS_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    TOTAL_ROUNDS_FIELD_NUMBER: _ClassVar[int]
    tournament_id: str
    name: str
    phase: TournamentPhase
    format: TournamentFormat
    entrants: int
    round: int
    total_rounds: int
    def __init__(self, tournament_id: _Optional[str] = ..., name: _Optional[str] = ..., phase: _Optional[_Union[TournamentPhase, str]] = ..., format: _Optional[_Union[TournamentFormat, str]] = ..., entrants: _Optional[int] = ..., round: _Optional[int] = ..., total_rounds: _Optional[int] = ...) -> None: ...

class ListTournamentsResponse(_message.Message):
    __slots__ = ("tournaments", "next_page_token")
    TOURNAMENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tournaments: _containers.RepeatedCompositeFieldContainer[TournamentSummary]
    next_page_token: str
    def __init__(self, tournaments: _Optional[_Iterable[_Union[TournamentSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetTournamentRecordRequest(_message.Message):
    __slots__ = ("tournament_id",)
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    tournament_id: str
    def __init__(self, tournament_id: _Optional[str] = ...) -> None: ...

class GetTournamentRecordResponse(_message.Message):
    __slots__ = ("record_json",)
    RECORD_JSON_FIELD_NUMBER: _ClassVar[int]
    record_json: str
    def __init__(self, record_json: _Optional[str] = ...) -> None: ...

class WatchTournamentRequest(_message.Message):
    __slots__ = ("tournament_id",)
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    tournament_id: str
    def __init__(self, tournament_id: _Optional[str] = ...) -> None: ...

class TournamentIntervention(_message.Message):
    __slots__ = ("round", "table", "action", "by", "entrant", "note")
    ROUND_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    ENTRANT_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    round: int
    table: int
    action: InterventionAction
    by: Actor
    entrant: int
    note: str
    def __init__(self, round: _Optional[int] = ..., table: _Optional[int] = ..., action: _Optional[_Union[InterventionAction, str]] = ..., by: _Optional[_Union[Actor, str]] = ..., entrant: _Optional[int] = ..., note: _Optional[str] = ...) -> None: ...

class SettleTableRequest(_message.Message):
    __slots__ = ("tournament_id", "round", "table", "action", "forfeited_side", "note")
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    FORFEITED_SIDE_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    tournament_id: str
    round: int
    table: int
    action: SettleAction
    forfeited_side: int
    note: str
    def __init__(self, tournament_id: _Optional[str] = ..., round: _Optional[int] = ..., table: _Optional[int] = ..., action: _Optional[_Union[SettleAction, str]] = ..., forfeited_side: _Optional[int] = ..., note: _Optional[str] = ...) -> None: ...

class SettleTableResponse(_message.Message):
    __slots__ = ("result",)
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: TableResult
    def __init__(self, result: _Optional[_Union[TableResult, _Mapping]] = ...) -> None: ...

class CancelTournamentRequest(_message.Message):
    __slots__ = ("tournament_id", "note")
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    tournament_id: str
    note: str
    def __init__(self, tournament_id: _Optional[str] = ..., note: _Optional[str] = ...) -> None: ...

class CancelTournamentResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetAuditManifestRequest(_message.Message):
    __slots__ = ("tournament_id",)
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    tournament_id: str
    def __init__(self, tournament_id: _Optional[str] = ...) -> None: ...

class GetAuditManifestResponse(_message.Message):
    __slots__ = ("manifest_json",)
    MANIFEST_JSON_FIELD_NUMBER: _ClassVar[int]
    manifest_json: str
    def __init__(self, manifest_json: _Optional[str] = ...) -> None: ...

class WatchTournamentResponse(_message.Message):
    __slots__ = ("tournament", "assignment")
    TOURNAMENT_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    tournament: TournamentView
    assignment: TournamentAssignment
    def __init__(self, tournament: _Optional[_Union[TournamentView, _Mapping]] = ..., assignment: _Optional[_Union[TournamentAssignment, _Mapping]] = ...) -> None: ...

class OfferHandOffRequest(_message.Message):
    __slots__ = ("match_id", "tournament_id", "parcel")
    MATCH_ID_FIELD_NUMBER: _ClassVar[int]
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    PARCEL_FIELD_NUMBER: _ClassVar[int]
    match_id: str
    tournament_id: str
    parcel: bytes
    def __init__(self, match_id: _Optional[str] = ..., tournament_id: _Optional[str] = ..., parcel: _Optional[bytes] = ...) -> None: ...

class OfferHandOffResponse(_message.Message):
    __slots__ = ("code", "expires_at")
    CODE_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    code: str
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, code: _Optional[str] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ClaimHandOffRequest(_message.Message):
    __slots__ = ("code",)
    CODE_FIELD_NUMBER: _ClassVar[int]
    code: str
    def __init__(self, code: _Optional[str] = ...) -> None: ...

class HandOffSeat(_message.Message):
    __slots__ = ("match_id", "seat")
    MATCH_ID_FIELD_NUMBER: _ClassVar[int]
    SEAT_FIELD_NUMBER: _ClassVar[int]
    match_id: str
    seat: int
    def __init__(self, match_id: _Optional[str] = ..., seat: _Optional[int] = ...) -> None: ...

class HandOffEntrant(_message.Message):
    __slots__ = ("tournament_id", "entrant", "player")
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRANT_FIELD_NUMBER: _ClassVar[int]
    PLAYER_FIELD_NUMBER: _ClassVar[int]
    tournament_id: str
    entrant: int
    player: int
    def __init__(self, tournament_id: _Optional[str] = ..., entrant: _Optional[int] = ..., player: _Optional[int] = ...) -> None: ...

class ClaimHandOffResponse(_message.Message):
    __slots__ = ("parcel", "seat", "entrant")
    PARCEL_FIELD_NUMBER: _ClassVar[int]
    SEAT_FIELD_NUMBER: _ClassVar[int]
    ENTRANT_FIELD_NUMBER: _ClassVar[int]
    parcel: bytes
    seat: HandOffSeat
    entrant: HandOffEntrant
    def __init__(self, parcel: _Optional[bytes] = ..., seat: _Optional[_Union[HandOffSeat, _Mapping]] = ..., entrant: _Optional[_Union[HandOffEntrant, _Mapping]] = ...) -> None: ...

class RegisterPlayerRequest(_message.Message):
    __slots__ = ("name", "bot")
    NAME_FIELD_NUMBER: _ClassVar[int]
    BOT_FIELD_NUMBER: _ClassVar[int]
    name: str
    bot: bool
    def __init__(self, name: _Optional[str] = ..., bot: _Optional[bool] = ...) -> None: ...

class RegisterPlayerResponse(_message.Message):
    __slots__ = ("player_id", "name", "player_token")
    PLAYER_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PLAYER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    player_id: str
    name: str
    player_token: str
    def __init__(self, player_id: _Optional[str] = ..., name: _Optional[str] = ..., player_token: _Optional[str] = ...) -> None: ...

class Player(_message.Message):
    __slots__ = ("player_id", "name", "bot")
    PLAYER_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    BOT_FIELD_NUMBER: _ClassVar[int]
    player_id: str
    name: str
    bot: bool
    def __init__(self, player_id: _Optional[str] = ..., name: _Optional[str] = ..., bot: _Optional[bool] = ...) -> None: ...

class PoolRating(_message.Message):
    __slots__ = ("pool", "rating", "mu", "sigma", "provisional", "rated_matches")
    POOL_FIELD_NUMBER: _ClassVar[int]
    RATING_FIELD_NUMBER: _ClassVar[int]
    MU_FIELD_NUMBER: _ClassVar[int]
    SIGMA_FIELD_NUMBER: _ClassVar[int]
    PROVISIONAL_FIELD_NUMBER: _ClassVar[int]
    RATED_MATCHES_FIELD_NUMBER: _ClassVar[int]
    pool: RatingPool
    rating: int
    mu: float
    sigma: float
    provisional: bool
    rated_matches: int
    def __init__(self, pool: _Optional[_Union[RatingPool, str]] = ..., rating: _Optional[int] = ..., mu: _Optional[float] = ..., sigma: _Optional[float] = ..., provisional: _Optional[bool] = ..., rated_matches: _Optional[int] = ...) -> None: ...

class GetPlayerRequest(_message.Message):
    __slots__ = ("player_id", "name", "player_token")
    PLAYER_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PLAYER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    player_id: str
    name: str
    player_token: str
    def __init__(self, player_id: _Optional[str] = ..., name: _Optional[str] = ..., player_token: _Optional[str] = ...) -> None: ...

class GetPlayerResponse(_message.Message):
    __slots__ = ("player", "ratings")
    PLAYER_FIELD_NUMBER: _ClassVar[int]
    RATINGS_FIELD_NUMBER: _ClassVar[int]
    player: Player
    ratings: _containers.RepeatedCompositeFieldContainer[PoolRating]
    def __init__(self, player: _Optional[_Union[Player, _Mapping]] = ..., ratings: _Optional[_Iterable[_Union[PoolRating, _Mapping]]] = ...) -> None: ...

class ListLeaderboardRequest(_message.Message):
    __slots__ = ("pool", "page_size", "page_token")
    POOL_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    pool: RatingPool
    page_size: int
    page_token: str
    def __init__(self, pool: _Optional[_Union[RatingPool, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class LeaderboardEntry(_message.Message):
    __slots__ = ("rank", "player", "rating")
    RANK_FIELD_NUMBER: _ClassVar[int]
    PLAYER_FIELD_NUMBER: _ClassVar[int]
    RATING_FIELD_NUMBER: _ClassVar[int]
    rank: int
    player: Player
    rating: PoolRating
    def __init__(self, rank: _Optional[int] = ..., player: _Optional[_Union[Player, _Mapping]] = ..., rating: _Optional[_Union[PoolRating, _Mapping]] = ...) -> None: ...

class ListLeaderboardResponse(_message.Message):
    __slots__ = ("entries", "next_page_token")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[LeaderboardEntry]
    next_page_token: str
    def __init__(self, entries: _Optional[_Iterable[_Union[LeaderboardEntry, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListPlayerMatchesRequest(_message.Message):
    __slots__ = ("player_id", "name", "pool", "page_size", "page_token")
    PLAYER_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    player_id: str
    name: str
    pool: RatingPool
    page_size: int
    page_token: str
    def __init__(self, player_id: _Optional[str] = ..., name: _Optional[str] = ..., pool: _Optional[_Union[RatingPool, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class PlayerMatch(_message.Message):
    __slots__ = ("match_id", "pool", "order", "seat", "place", "before", "after", "ended_at")
    MATCH_ID_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    SEAT_FIELD_NUMBER: _ClassVar[int]
    PLACE_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_FIELD_NUMBER: _ClassVar[int]
    match_id: str
    pool: RatingPool
    order: int
    seat: int
    place: int
    before: PoolRating
    after: PoolRating
    ended_at: _timestamp_pb2.Timestamp
    def __init__(self, match_id: _Optional[str] = ..., pool: _Optional[_Union[RatingPool, str]] = ..., order: _Optional[int] = ..., seat: _Optional[int] = ..., place: _Optional[int] = ..., before: _Optional[_Union[PoolRating, _Mapping]] = ..., after: _Optional[_Union[PoolRating, _Mapping]] = ..., ended_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListPlayerMatchesResponse(_message.Message):
    __slots__ = ("player", "matches", "next_page_token")
    PLAYER_FIELD_NUMBER: _ClassVar[int]
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    player: Player
    matches: _containers.RepeatedCompositeFieldContainer[PlayerMatch]
    next_page_token: str
    def __init__(self, player: _Optional[_Union[Player, _Mapping]] = ..., matches: _Optional[_Iterable[_Union[PlayerMatch, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RevealEntrantSeedRequest(_message.Message):
    __slots__ = ("tournament_id", "entrant", "client_seed")
    TOURNAMENT_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRANT_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SEED_FIELD_NUMBER: _ClassVar[int]
    tournament_id: str
    entrant: int
    client_seed: str
    def __init__(self, tournament_id: _Optional[str] = ..., entrant: _Optional[int] = ..., client_seed: _Optional[str] = ...) -> None: ...

class RevealEntrantSeedResponse(_message.Message):
    __slots__ = ("unrevealed", "reveal_deadline_ms")
    UNREVEALED_FIELD_NUMBER: _ClassVar[int]
    REVEAL_DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    unrevealed: int
    reveal_deadline_ms: int
    def __init__(self, unrevealed: _Optional[int] = ..., reveal_deadline_ms: _Optional[int] = ...) -> None: ...

class GetCheckpointRequest(_message.Message):
    __slots__ = ("consistency_from",)
    CONSISTENCY_FROM_FIELD_NUMBER: _ClassVar[int]
    consistency_from: int
    def __init__(self, consistency_from: _Optional[int] = ...) -> None: ...

class GetCheckpointResponse(_message.Message):
    __slots__ = ("checkpoint", "tree_size", "consistency_proof")
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    TREE_SIZE_FIELD_NUMBER: _ClassVar[int]
    CONSISTENCY_PROOF_FIELD_NUMBER: _ClassVar[int]
    checkpoint: str
    tree_size: int
    consistency_proof: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, checkpoint: _Optional[str] = ..., tree_size: _Optional[int] = ..., consistency_proof: _Optional[_Iterable[bytes]] = ...) -> None: ...

class GetConsistencyProofRequest(_message.Message):
    __slots__ = ("old_size", "new_size")
    OLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    NEW_SIZE_FIELD_NUMBER: _ClassVar[int]
    old_size: int
    new_size: int
    def __init__(self, old_size: _Optional[int] = ..., new_size: _Optional[int] = ...) -> None: ...

class GetConsistencyProofResponse(_message.Message):
    __slots__ = ("proof", "checkpoint")
    PROOF_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    proof: _containers.RepeatedScalarFieldContainer[bytes]
    checkpoint: str
    def __init__(self, proof: _Optional[_Iterable[bytes]] = ..., checkpoint: _Optional[str] = ...) -> None: ...

class GetInclusionProofRequest(_message.Message):
    __slots__ = ("position",)
    POSITION_FIELD_NUMBER: _ClassVar[int]
    position: int
    def __init__(self, position: _Optional[int] = ...) -> None: ...

class GetInclusionProofResponse(_message.Message):
    __slots__ = ("leaf_index", "leaf_hash", "tree_size", "proof", "checkpoint")
    LEAF_INDEX_FIELD_NUMBER: _ClassVar[int]
    LEAF_HASH_FIELD_NUMBER: _ClassVar[int]
    TREE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PROOF_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    leaf_index: int
    leaf_hash: bytes
    tree_size: int
    proof: _containers.RepeatedScalarFieldContainer[bytes]
    checkpoint: str
    def __init__(self, leaf_index: _Optional[int] = ..., leaf_hash: _Optional[bytes] = ..., tree_size: _Optional[int] = ..., proof: _Optional[_Iterable[bytes]] = ..., checkpoint: _Optional[str] = ...) -> None: ...
