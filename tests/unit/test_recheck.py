"""The rules re-check of a stored log (`bergen.server.matches.recheck`) against the plain
path it replaced: every command decided again by `execute`, one State per command.

The re-check plays an unclocked match's plays on one `fastplay.Board`; whatever the log,
it must accept exactly what the plain path accepts, give the same state, and refuse the
rest naming the same seq with the same reason."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

import pytest

from bergen.domain import make_rules, random_policy
from bergen.domain.dealing import SEED_BYTES
from bergen.domain.engine import command_of, execute
from bergen.domain.errors import BergenError, LogTampered
from bergen.domain.events import Event, PointsScored, TileDrawn, TilePlayed
from bergen.domain.rules import PRESETS
from bergen.domain.simulation import Timing, play_match
from bergen.domain.state import State, fold
from bergen.domain.tiles import ALL_TILES, End
from bergen.server.matches import recheck


def plain_recheck(
    match_id: str, version: int, events: Sequence[Event], state: State | None
) -> State:
    """The re-check as it was: `execute` for every command."""
    i = 0
    while i < len(events):
        seq = version + 1 + i
        command = command_of(events[i])
        if command is None:
            raise LogTampered("no command", match_id=match_id, seq=seq)
        try:
            decided, after = execute(state, command)
        except BergenError as e:
            raise LogTampered(f"refused: {e.message}", match_id=match_id, seq=seq) from e
        stored = tuple(events[i : i + len(decided)])
        if stored != decided:
            at = next(
                (j for j, (a, b) in enumerate(zip(stored, decided, strict=False)) if a != b),
                len(stored),
            )
            raise LogTampered("differs", match_id=match_id, seq=seq + at)
        state = after
        i += len(decided)
    assert state is not None
    return state


def outcome(check: object, events: Sequence[Event], version: int = 0) -> object:
    """The state `check` gives, or the seq and kind of its refusal."""
    state = fold(list(events[:version])) if version else None
    try:
        return check("m", version, events[version:], state)  # type: ignore[operator]
    except LogTampered as e:
        refused = "refused" if "refuse" in e.message else "differs"
        return ("tampered", e.metadata.get("seq"), refused)


CASES = [
    (preset, seats, partnerships)
    for preset in PRESETS
    for seats, partnerships in ((2, False), (3, False), (4, False), (4, True))
]


def recorded(preset: str, seats: int, partnerships: bool, seed: int, clocked: bool) -> list[Event]:
    options: dict[str, object] = {"target": 60}
    if clocked:
        options.update(clock="fischer", clock_initial=5, clock_increment=0)
    rules = make_rules(seats, partnerships, preset, options=options)
    rng = random.Random(seed)
    events, _ = play_match(
        f"m{seed}", rules, seats, partnerships, rng.randbytes(SEED_BYTES),
        [random_policy] * seats, rng, timing=Timing(think_ms=(100, 3000)) if clocked else None,
    )  # fmt: skip
    return events


def command_starts(events: Sequence[Event]) -> list[int]:
    """Where each command's events begin, up to the first that is not what the rules give
    (a forced lead is a TilePlayed inside another command's events, not the start of one)."""
    starts = []
    state: State | None = None
    i = 0
    while i < len(events):
        command = command_of(events[i])
        if command is None:
            break
        try:
            decided, state = execute(state, command)
        except BergenError:
            break
        if tuple(events[i : i + len(decided)]) != decided:
            break
        starts.append(i)
        i += len(decided)
    return starts


@pytest.mark.parametrize(("preset", "seats", "partnerships"), CASES)
@pytest.mark.parametrize("clocked", [False, True], ids=["unclocked", "clocked"])
def test_a_whole_log_and_any_tail_give_the_plain_paths_state(
    preset: str, seats: int, partnerships: bool, clocked: bool
) -> None:
    events = recorded(preset, seats, partnerships, 7 + seats, clocked)
    whole = recheck("m", 0, events, None)
    assert whole == fold(events) == plain_recheck("m", 0, events, None)
    rng = random.Random(seats)
    for start in rng.sample(command_starts(events), 8):
        assert outcome(recheck, events, start) == whole


def tampered_logs(events: list[Event], rng: random.Random) -> list[list[Event]]:
    """Logs that differ from `events` in one place: an event dropped, two swapped, a play's
    tile, end or seat changed, a point changed, a draw changed, an event repeated."""
    logs = []
    plays = [i for i, e in enumerate(events) if isinstance(e, TilePlayed)]
    for i in rng.sample(plays, 6):
        e = events[i]
        assert isinstance(e, TilePlayed)
        other = rng.choice([t for t in ALL_TILES if t != e.tile])
        logs.append([*events[:i], replace(e, tile=other), *events[i + 1 :]])
        flipped = End.RIGHT if e.end is End.LEFT else End.LEFT
        logs.append([*events[:i], replace(e, end=flipped), *events[i + 1 :]])
        logs.append([*events[:i], replace(e, seat=(e.seat + 1) % 2), *events[i + 1 :]])
        logs.append([*events[:i], *events[i + 1 :]])
        logs.append([*events[: i + 1], events[i], *events[i + 1 :]])
        if i + 1 < len(events):
            logs.append([*events[:i], events[i + 1], events[i], *events[i + 2 :]])
    for i, e in enumerate(events):
        if isinstance(e, PointsScored) and len(logs) < 50:
            logs.append([*events[:i], replace(e, points=e.points + 5), *events[i + 1 :]])
        if isinstance(e, TileDrawn) and e.tile is not None and len(logs) < 60:
            other = rng.choice([t for t in ALL_TILES if t != e.tile])
            logs.append([*events[:i], replace(e, tile=other), *events[i + 1 :]])
    logs.append(events[:-1])
    return logs


@pytest.mark.parametrize(("preset", "seats", "partnerships"), CASES)
def test_a_tampered_log_is_refused_at_the_same_seq_as_the_plain_path_refuses_it(
    preset: str, seats: int, partnerships: bool
) -> None:
    events = recorded(preset, seats, partnerships, 100 + seats, clocked=False)
    rng = random.Random(f"{preset}-{seats}-{partnerships}")
    logs = tampered_logs(events, rng)
    assert len(logs) > 30
    refused = 0
    for log in logs:
        for start in (0, rng.choice(command_starts(log[: len(log) // 2]))):
            got = outcome(recheck, log, start)
            assert got == outcome(plain_recheck, log, start)
            refused += isinstance(got, tuple)
    # Nearly every change is refused (a few, such as a log cut after its last command, or a
    # play moved to the other end where the tile fits both the same way, are legal logs).
    assert refused >= len(logs)
