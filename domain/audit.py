"""Checking a match record (RECORD.md) against the rules, with nothing but the record.

The record's seeds and players' choices are played again through the engine: the commitment
must match the revealed server seed, every deal is dealt again (RULES.md section 8), every
play the record shows must be legal when it is made, and every forced action, point, hand
end, score and the result must be exactly what the rules then give. The first place that
differs is reported, as a hand and action where there is one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .commands import Abandon, CreateMatch, Play, Resign, TakeSeat, Timeout
from .dealing import commitment
from .describe import seat_number
from .engine import execute, is_player_id
from .errors import BergenError, CorruptRecord
from .events import Event
from .ratings import POOLS
from .record import RECORD_FORMAT, rated_pool, record_so_far
from .rules import CLOCK_OPTIONS, Rules
from .state import ENDED, PLAYING, SEATING, State
from .tiles import End, Tile
from .vocabulary import ForfeitCause, MatchEndReason, StepKind

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of a check: `where` and `why` say what is wrong when not `ok`."""

    ok: bool
    where: str = ""
    why: str = ""
    events: tuple[Event, ...] = ()
    """The match's events as the rules rebuild them from the record's seeds and plays; when
    not `ok`, those the rules gave before the replay stopped (an auditor holding the stored
    log compares them with it to find the first event that differs)."""

    def line(self) -> str:
        if self.ok:
            return "OK"
        return f"REJECTED at {self.where}: {self.why}" if self.where else f"REJECTED: {self.why}"


class _Reject(Exception):
    def __init__(self, where: str, why: str) -> None:
        super().__init__(f"{where}: {why}")
        self.where = where
        self.why = why


# ----- shape ------------------------------------------------------------------------------


def _obj(
    v: Any, where: str, required: set[str], optional: frozenset[str] = frozenset()
) -> Mapping[str, Any]:
    if not isinstance(v, dict):
        raise _Reject(where, f"expected an object, got {_kind(v)}")
    keys = set(v)
    missing = required - keys
    unknown = keys - required - optional
    if missing:
        raise _Reject(where, f"missing field(s) {', '.join(sorted(missing))}")
    if unknown:
        raise _Reject(where, f"unknown field(s) {', '.join(sorted(map(str, unknown)))}")
    return v


def _kind(v: Any) -> str:
    return {
        dict: "an object",
        list: "a list",
        str: "text",
        bool: "true/false",
        int: "a number",
        float: "a number",
        type(None): "null",
    }.get(type(v), "a value")


def _str(v: Any, where: str) -> str:
    if not isinstance(v, str):
        raise _Reject(where, f"expected text, got {_kind(v)}")
    return v


def _int(v: Any, where: str, nullable: bool = False) -> int | None:
    if v is None and nullable:
        return None
    if type(v) is not int:
        raise _Reject(where, f"expected a whole number, got {_kind(v)}")
    return v


def _list(v: Any, where: str) -> list[Any]:
    if not isinstance(v, list):
        raise _Reject(where, f"expected a list, got {_kind(v)}")
    return v


def _tile(v: Any, where: str) -> Tile:
    try:
        return Tile.parse(v)
    except BergenError as e:
        raise _Reject(where, str(e)) from None


def _hex(v: Any, where: str) -> str:
    text = _str(v, where)
    if not _HEX64.match(text):
        raise _Reject(where, "expected 64 lowercase hex digits")
    return text


def check_shape(record: Any) -> None:
    """Raises CorruptRecord, naming the place, unless `record` has the shape of RECORD.md."""
    try:
        _shape(record)
    except _Reject as e:
        raise CorruptRecord(f"{e.where}: {e.why}") from None


def _shape(record: Any) -> None:
    r = _obj(
        record,
        "record",
        {
            "format",
            "match_id",
            "rules",
            "seats",
            "sides",
            "commitment",
            "server_seed",
            "hands",
            "result",
        },
        frozenset({"log", "signature", "tournament", "rated", "transparency"}),
    )
    if r["format"] != RECORD_FORMAT:
        raise _Reject("format", f"expected {RECORD_FORMAT!r}, got {r['format']!r}")
    _str(r["match_id"], "match_id")
    rules = _obj(
        r["rules"],
        "rules",
        {
            "preset",
            "lead",
            "draw",
            "double_bonus",
            "domino_points",
            "blocked",
            "endgame_reduction",
            "match_end",
            "target",
        },
        frozenset(CLOCK_OPTIONS),
    )
    # RECORD.md: the clock fields are on every action of a clocked match, and on no other.
    clocked = rules.get("clock", "none") != "none"
    timed = frozenset({"at_ms"}) if clocked else frozenset()
    timed_play = frozenset({"clock_ms"}) if clocked else frozenset()
    for i, seat in enumerate(_list(r["seats"], "seats")):
        s = _obj(seat, f"seats[{i}]", {"name", "client_seed"}, frozenset({"player"}))
        _str(s["name"], f"seats[{i}].name")
        _str(s["client_seed"], f"seats[{i}].client_seed")
        if "player" in s and not is_player_id(s["player"]):
            raise _Reject(f"seats[{i}].player", "expected a player id (a lowercase UUID)")
    for i, side in enumerate(_list(r["sides"], "sides")):
        for j, seat in enumerate(_list(side, f"sides[{i}]")):
            _int(seat, f"sides[{i}][{j}]")
    _hex(r["commitment"], "commitment")
    _hex(r["server_seed"], "server_seed")
    for h, hand in enumerate(_list(r["hands"], "hands")):
        where = f"hand {h + 1}"
        hd = _obj(hand, where, {"number", "deals", "actions", "end", "scores"})
        _int(hd["number"], f"{where}: number")
        for d, deal in enumerate(_list(hd["deals"], f"{where}: deals")):
            dw = f"{where}, deal {d + 1}"
            dl = _obj(deal, dw, {"attempt", "hands", "boneyard", "void"})
            _int(dl["attempt"], f"{dw}: attempt")
            for n, tiles in enumerate(_list(dl["hands"], f"{dw}: hands")):
                for t in _list(tiles, f"{dw}: hands[{n}]"):
                    _tile(t, f"{dw}: hands[{n}]")
            for t in _list(dl["boneyard"], f"{dw}: boneyard"):
                _tile(t, f"{dw}: boneyard")
            if not isinstance(dl["void"], bool):
                raise _Reject(f"{dw}: void", f"expected true/false, got {_kind(dl['void'])}")
        for a, action in enumerate(_list(hd["actions"], f"{where}: actions")):
            aw = f"{where}, action {a + 1}"
            if not isinstance(action, dict):
                raise _Reject(aw, f"expected an object, got {_kind(action)}")
            act = action.get("act")
            if act == StepKind.PLAY:
                ac = _obj(
                    action,
                    aw,
                    {"seat", "act", "tile", "end", "points"} | timed | ({"clock_ms"} & timed_play),
                    frozenset({"auto"}) if clocked else frozenset(),
                )
                _tile(ac["tile"], f"{aw}: tile")
                if ac["end"] not in (None, "left", "right"):
                    raise _Reject(f"{aw}: end", "expected 'left', 'right' or null")
                _int(ac["points"], f"{aw}: points")
                if clocked:
                    _int(ac["clock_ms"], f"{aw}: clock_ms")
                    if "auto" in ac and ac["auto"] is not True:
                        raise _Reject(f"{aw}: auto", "expected true (or no auto field)")
            elif act == StepKind.DRAW:
                ac = _obj(action, aw, {"seat", "act", "tile"} | timed)
                _tile(ac["tile"], f"{aw}: tile")
            elif act == StepKind.PASS:
                ac = _obj(action, aw, {"seat", "act"} | timed)
            else:
                raise _Reject(f"{aw}: act", f"expected play, draw or pass, got {act!r}")
            _int(ac["seat"], f"{aw}: seat")
            if clocked:
                _int(ac["at_ms"], f"{aw}: at_ms")
        if hd["end"] is not None:
            e = _obj(hd["end"], f"{where}: end", {"reason", "side", "points"})
            _str(e["reason"], f"{where}: end.reason")
            _int(e["side"], f"{where}: end.side", nullable=True)
            _int(e["points"], f"{where}: end.points")
        for i, sc in enumerate(_list(hd["scores"], f"{where}: scores")):
            _int(sc, f"{where}: scores[{i}]")
    forfeit = isinstance(r["result"], dict) and r["result"].get("reason") == "forfeit"
    res = _obj(
        r["result"],
        "result",
        {"reason", "winner_side", "scores"}
        | ({"forfeited_side", "cause"} | timed if forfeit else set()),
    )
    _str(res["reason"], "result.reason")
    _int(res["winner_side"], "result.winner_side", nullable=True)
    if forfeit:
        _int(res["forfeited_side"], "result.forfeited_side")
        if res["cause"] not in tuple(ForfeitCause):
            raise _Reject("result.cause", f"expected timeout or resigned, got {res['cause']!r}")
        if clocked:
            _int(res["at_ms"], "result.at_ms")
    for i, sc in enumerate(_list(res["scores"], "result.scores")):
        _int(sc, f"result.scores[{i}]")
    if "tournament" in r:
        tm = _obj(r["tournament"], "tournament", {"tournament_id", "round", "table"})
        _str(tm["tournament_id"], "tournament.tournament_id")
        _int(tm["round"], "tournament.round")
        _int(tm["table"], "tournament.table")
    if "rated" in r:
        rt = _obj(r["rated"], "rated", {"pool", "order"})
        if rt["pool"] not in POOLS:
            raise _Reject("rated.pool", f"expected one of {', '.join(POOLS)}, got {rt['pool']!r}")
        order = _int(rt["order"], "rated.order")
        if order is None or order < 1:
            raise _Reject("rated.order", "expected a global position, 1 or more")
    if "log" in r:
        lg = _obj(r["log"], "log", {"events", "head"})
        _int(lg["events"], "log.events")
        _hex(lg["head"], "log.head")
    if "transparency" in r:
        if "log" not in r:
            raise _Reject("transparency", "a transparency proof needs the record's log")
        tr = _obj(
            r["transparency"],
            "transparency",
            {"checkpoint", "leaf_index", "tree_size", "position", "recorded_us", "proof"},
        )
        _str(tr["checkpoint"], "transparency.checkpoint")
        for k in ("leaf_index", "tree_size", "position", "recorded_us"):
            _int(tr[k], f"transparency.{k}")
        if not isinstance(tr["proof"], list):
            raise _Reject("transparency.proof", f"expected a list, got {_kind(tr['proof'])}")
        for i, h in enumerate(tr["proof"]):
            _str(h, f"transparency.proof[{i}]")
    if "signature" in r:
        sg = _obj(r["signature"], "signature", {"algorithm", "public_key", "value"})
        for k in ("algorithm", "public_key", "value"):
            _str(sg[k], f"signature.{k}")


# ----- replay -----------------------------------------------------------------------------


def replay_record(record: Any) -> Verdict:
    """Check a record against the rules (everything but its `log` and `signature`).

    Never raises for bad input: a record of the wrong shape or one that breaks a rule gives
    a Verdict that is not ok, with the first place that is wrong and why.
    """
    events: list[Event] = []
    try:
        _shape(record)
        _replay(record, events)
    except _Reject as e:
        return Verdict(False, e.where, e.why, tuple(events))
    return Verdict(True, events=tuple(events))


def _replay(r: Mapping[str, Any], events: list[Event]) -> None:
    seed = bytes.fromhex(r["server_seed"])
    if commitment(seed) != r["commitment"]:
        raise _Reject("commitment", "it is not SHA-256 of the revealed server seed")
    try:
        rules = Rules.from_dict(r["rules"])
    except BergenError as e:
        raise _Reject("rules", str(e)) from None
    seats = len(r["seats"])
    partnerships = seats == 4 and r["sides"] == [[0, 2], [1, 3]]

    def run(state: State | None, command: Any, where: str) -> State:
        try:
            new, after = execute(state, command)
        except BergenError as e:
            _first_difference(r, events)
            raise _Reject(where, str(e)) from None
        events.extend(new)
        return after

    rated = "rated" in r
    create = CreateMatch(r["match_id"], seats, partnerships, rules, seed, "", rated)
    state = run(None, create, "seats")
    expected_sides = [list(s) for s in state.sides]
    if r["sides"] != expected_sides:
        raise _Reject(
            "sides",
            f"{seats} seats{' in partnerships' if partnerships else ''} "
            f"play as sides {expected_sides}",
        )
    for i, seat in enumerate(r["seats"]):
        if seat["name"] == "" and seat["client_seed"] == "":
            continue  # a seat never taken: the match was abandoned before it filled up
        # Whether a registered player is a program the record does not say: bot is left out.
        take = TakeSeat(seat["name"], seat["client_seed"], i, seat.get("player", ""))
        state = run(state, take, f"seats[{i}]")
    hands = r["hands"]
    while state.phase != ENDED:
        awaiting = state.phase == PLAYING and not state.hand_over and state.turn is not None
        hand_index = state.hand - 1
        done = _actions_in_hand(events, state.hand)
        record_actions = hands[hand_index]["actions"] if 0 <= hand_index < len(hands) else []
        if awaiting and done < len(record_actions):
            action = record_actions[done]
            where = f"hand {state.hand}, action {done + 1}"
            if action["act"] != StepKind.PLAY:
                _first_difference(r, events)
                raise _Reject(
                    where,
                    f"{_turn(state)} has a fitting tile and must play, not {action['act']}",
                )
            if action.get("auto"):
                # The server's timeout: the rules check that the time was out and make the
                # canonical play, which must then be the one recorded.
                state = run(state, Timeout(action["seat"], action["at_ms"]), where)
                continue
            end = None if action["end"] is None else End(action["end"])
            play = Play(action["seat"], Tile.parse(action["tile"]), end, action.get("at_ms"))
            state = run(state, play, where)
            continue
        result = r["result"]
        if result["reason"] == MatchEndReason.ABANDONED and hand_index == len(hands) - 1:
            state = run(state, Abandon(""), "result")
            continue
        if result["reason"] == MatchEndReason.FORFEIT and hand_index == len(hands) - 1:
            state = run(state, _forfeit_command(state, result), "result")
            if state.phase != ENDED:
                _first_difference(r, events)
                raise _Reject("result", "the rules give an automatic play here, not a forfeit")
            continue
        _first_difference(r, events)
        if state.phase == SEATING:
            raise _Reject("seats", "a seat is free, but the match was not abandoned")
        raise _Reject(
            f"hand {state.hand}, action {done + 1}",
            f"the record stops here, but {_turn(state)} is to play",
        )
    _first_difference(r, events, whole=True)
    if rated:
        pool = rated_pool(state)
        if pool is None:
            raise _Reject("rated", "an abandoned match is not rated (RATINGS.md section 2)")
        if r["rated"]["pool"] != pool:
            raise _Reject("rated.pool", f"is {r['rated']['pool']!r}, this table's pool is {pool!r}")


def _forfeit_command(state: State, result: Mapping[str, Any]) -> Timeout | Resign:
    """The command that ends the match as the record's forfeit says: a timeout of the seat
    to play, or a resignation by a seat of the forfeited side (which of the partners resigned
    the record does not say, and the rules treat them alike)."""
    at = result.get("at_ms")
    if result["cause"] == ForfeitCause.TIMEOUT:
        seat = state.turn if state.turn is not None else 0
        return Timeout(seat, at if at is not None else -1)
    side = result["forfeited_side"]
    if not 0 <= side < len(state.sides):
        raise _Reject(
            "result.forfeited_side", f"there is no side {side} (a record counts sides from 0)"
        )
    return Resign(state.sides[side][0], at)


def _actions_in_hand(events: list[Event], hand: int) -> int:
    from .events import Passed, TileDrawn, TilePlayed

    n = 0
    for e in reversed(events):
        if isinstance(e, TilePlayed | TileDrawn | Passed):
            if e.hand != hand:
                break
            n += 1
    return n


def _first_difference(r: Mapping[str, Any], events: list[Event], whole: bool = False) -> None:
    """Raise at the first place where the record differs from what `events` (the rules'
    replay so far) say; with `whole`, the replay is complete and everything must agree."""
    if not events:
        return
    rebuilt, _ = record_so_far(events)
    got_hands, want_hands = r["hands"], rebuilt["hands"]
    for i, want in enumerate(want_hands):
        where = f"hand {i + 1}"
        if i >= len(got_hands):
            raise _Reject(where, "missing: the rules deal this hand")
        got = got_hands[i]
        if got["number"] != want["number"]:
            raise _Reject(f"{where}: number", f"is {got['number']}, should be {want['number']}")
        _compare_list(
            got["deals"],
            want["deals"],
            where,
            "deal",
            _deal_difference,
            complete=whole or i < len(want_hands) - 1,
        )
        last = i == len(want_hands) - 1 and not whole
        for a, want_action in enumerate(want["actions"]):
            aw = f"{where}, action {a + 1}"
            if a >= len(got["actions"]):
                raise _Reject(aw, f"missing: the rules give {_describe(want_action)}")
            if got["actions"][a] != want_action:
                raise _Reject(
                    aw,
                    f"the record has {_describe(got['actions'][a])}, the rules "
                    f"give {_describe(want_action)}",
                )
        if last:
            continue
        if len(got["actions"]) > len(want["actions"]):
            raise _Reject(
                f"{where}, action {len(want['actions']) + 1}",
                f"{_describe(got['actions'][len(want['actions'])])} after the hand has ended",
            )
        if got["end"] != want["end"]:
            raise _Reject(f"{where}: end", f"is {got['end']}, the rules give {want['end']}")
        if got["scores"] != want["scores"]:
            raise _Reject(
                f"{where}: scores", f"are {got['scores']}, the rules give {want['scores']}"
            )
    if whole:
        if len(got_hands) > len(want_hands):
            raise _Reject(f"hand {len(want_hands) + 1}", "the match was over before this hand")
        if r["result"] != rebuilt["result"]:
            raise _Reject("result", f"is {r['result']}, the rules give {rebuilt['result']}")


def _compare_list(
    got: list[Any],
    want: list[Any],
    where: str,
    what: str,
    differ: Callable[[Any, Any], str | None],
    complete: bool,
) -> None:
    for k, w in enumerate(want):
        kw = f"{where}, {what} {k + 1}"
        if k >= len(got):
            raise _Reject(kw, "missing")
        why = differ(got[k], w)
        if why:
            raise _Reject(kw, why)
    if complete and len(got) > len(want):
        raise _Reject(f"{where}, {what} {len(want) + 1}", "the rules make no such deal")


def _deal_difference(got: Mapping[str, Any], want: Mapping[str, Any]) -> str | None:
    if got["attempt"] != want["attempt"]:
        return f"attempt is {got['attempt']}, should be {want['attempt']}"
    for seat, tiles in enumerate(want["hands"]):
        held = got["hands"][seat] if seat < len(got["hands"]) else None
        if held != tiles:
            return (
                f"{seat_number(seat)} holds {' '.join(held or [])}, the seeds deal it "
                f"{' '.join(tiles)}"
            )
    if len(got["hands"]) != len(want["hands"]):
        return f"{len(got['hands'])} hands dealt, the seeds deal {len(want['hands'])}"
    if got["boneyard"] != want["boneyard"]:
        return (
            f"the boneyard is {' '.join(got['boneyard'])}, the seeds deal "
            f"{' '.join(want['boneyard'])}"
        )
    if got["void"] != want["void"]:
        return f"void is {got['void']}, should be {want['void']}"
    return None


def _turn(state: State) -> str:
    """The seat to play, as people read it."""
    return "a seat" if state.turn is None else seat_number(state.turn)


def _describe(action: Mapping[str, Any]) -> str:
    """A record's action as written there (a tile as the record spells it, which an event
    would normalise, so `describe` of an event would hide the difference)."""
    value = action.get("seat")
    seat = seat_number(value) if type(value) is int else f"seat {value!r}"
    when = f" at {action['at_ms']} ms" if "at_ms" in action else ""
    if action.get("act") == StepKind.PLAY:
        end = action.get("end") or "lead"
        auto = " automatically" if action.get("auto") else ""
        clock = f", clock {action['clock_ms']} ms" if "clock_ms" in action else ""
        return (
            f"{seat} plays {action.get('tile')} ({end}){auto} for {action.get('points')}"
            f"{when}{clock}"
        )
    if action.get("act") == StepKind.DRAW:
        return f"{seat} draws {action.get('tile')}{when}"
    return f"{seat} passes{when}"
