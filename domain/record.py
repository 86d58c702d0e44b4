"""The portable match record of RECORD.md, built by folding a finished match's events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .errors import CorruptRecord, InvalidArgument, MatchNotInProgress
from .events import (
    Dealt,
    DealVoided,
    Event,
    HandEnded,
    MatchEnded,
    Passed,
    PointsScored,
    SeedRevealed,
    TileDrawn,
    TilePlayed,
)
from .ratings import pool_of
from .state import ENDED, State, evolve
from .vocabulary import HEADER_REASONS, MatchEndReason, StepKind

RECORD_FORMAT = "bergen-match-record/1"


def _tile(t: object) -> str:
    return str(t)


_RATED_ENDS = (MatchEndReason.TARGET, MatchEndReason.FORFEIT)


def rated_pool(state: State) -> str | None:
    """The pool a match's end counts in (RATINGS.md section 2): created rated, and ended by
    its target or a forfeit (not abandoned); None for a match whose end counts nowhere."""
    if not state.info.rated or state.result is None or state.result.reason not in _RATED_ENDS:
        return None
    return pool_of(state.seats, state.partnerships)


def build_record(
    events: Sequence[Event],
    *,
    log: dict[str, Any] | None = None,
    rated_order: int | None = None,
) -> dict[str, Any]:
    """The RECORD.md object of a finished match (without `signature`).

    `log` ({"events": n, "head": hash}) ties the record to a stored stream. `rated_order`
    is the global position of the event that ended a rated match (`rated.order`), which the
    events alone do not hold. Raises MatchNotInProgress when the match has not ended: a live
    record would reveal every hand; InvalidArgument for a rated match's end without its
    order.
    """
    record, state = record_so_far(events)
    if state.phase != ENDED or record["result"] is None or record["server_seed"] is None:
        raise MatchNotInProgress(
            "a record is published only once its match has ended", reason="MATCH_NOT_ENDED"
        )
    pool = rated_pool(state)
    if pool is not None:
        if isinstance(rated_order, bool) or not isinstance(rated_order, int) or rated_order < 1:
            raise InvalidArgument(
                f"match {state.match_id} is rated: its record names the global position of its "
                "end (rated.order)",
                reason="RATED_ORDER_REQUIRED",
            )
        record["rated"] = {"pool": pool, "order": rated_order}
    if log is not None:
        record["log"] = log
    return record


NO_ONE_SEATED: dict[str, Any] = {"name": "", "client_seed": ""}
"""A seat of the record that no one took (a match abandoned while seating)."""


def seat_json(player: Any) -> dict[str, Any]:
    """A seat of the record: its name and client seed, and its registered player if one."""
    if player is None:
        return dict(NO_ONE_SEATED)
    seat = {"name": player.name, "client_seed": player.client_seed}
    if player.player_id:
        seat["player"] = player.player_id
    return seat


def record_so_far(events: Sequence[Event]) -> tuple[dict[str, Any], State]:
    """The record of `events` as far as they go (`result` and `server_seed` None until the
    end), and the state they fold to. For auditing; publish only `build_record`.

    Raises CorruptRecord for an empty or unfoldable stream.
    """
    state: State | None = None
    hands: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    server_seed: str | None = None
    for e in events:
        state = evolve(state, e)
        if isinstance(e, Dealt):
            if current is None or current["number"] != e.hand:
                current = {
                    "number": e.hand,
                    "deals": [],
                    "actions": [],
                    "end": None,
                    "scores": list(state.scores),
                }
                hands.append(current)
            current["deals"].append(
                {
                    "attempt": e.attempt,
                    "hands": [[_tile(t) for t in h] for h in e.hands],
                    "boneyard": [_tile(t) for t in e.boneyard],
                    "void": False,
                }
            )
        elif isinstance(e, DealVoided):
            assert current is not None
            current["deals"][-1]["void"] = True
        elif isinstance(e, TilePlayed):
            assert current is not None
            action: dict[str, Any] = {
                "seat": e.seat,
                "act": StepKind.PLAY.value,
                "tile": _tile(e.tile),
                "end": None if e.end is None else e.end.value,
                "points": 0,
            }
            if e.at_ms is not None:
                action["at_ms"] = e.at_ms
                action["clock_ms"] = e.clock_ms
                if e.auto:
                    action["auto"] = True
            current["actions"].append(action)
        elif isinstance(e, TileDrawn):
            assert current is not None
            action = {"seat": e.seat, "act": StepKind.DRAW.value, "tile": _tile(e.tile)}
            if e.at_ms is not None:
                action["at_ms"] = e.at_ms
            current["actions"].append(action)
        elif isinstance(e, Passed):
            assert current is not None
            action = {"seat": e.seat, "act": StepKind.PASS.value}
            if e.at_ms is not None:
                action["at_ms"] = e.at_ms
            current["actions"].append(action)
        elif isinstance(e, PointsScored):
            assert current is not None
            if e.reason in HEADER_REASONS:
                current["actions"][-1]["points"] = e.points
            current["scores"] = list(state.scores)
        elif isinstance(e, HandEnded):
            assert current is not None
            current["end"] = {"reason": str(e.reason), "side": e.side, "points": e.points}
            current["scores"] = list(e.scores)
        elif isinstance(e, MatchEnded):
            result = {
                "reason": str(e.reason),
                "winner_side": e.winner_side,
                "scores": list(e.scores),
            }
            if e.forfeited_side is not None:
                result["forfeited_side"] = e.forfeited_side
                result["cause"] = None if e.cause is None else str(e.cause)
                if e.at_ms is not None:
                    result["at_ms"] = e.at_ms
        elif isinstance(e, SeedRevealed):
            server_seed = e.server_seed
    if state is None:
        raise CorruptRecord("an empty stream holds no match")
    record: dict[str, Any] = {
        "format": RECORD_FORMAT,
        "match_id": state.match_id,
        "rules": state.rules.as_dict(),
        "seats": [seat_json(p) for p in state.players],
        "sides": [list(s) for s in state.sides],
        "commitment": state.commitment,
        "server_seed": server_seed,
        "hands": hands,
        "result": result,
    }
    return record, state
