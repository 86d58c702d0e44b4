"""`bergen-replay` against a real server: finished and live matches played through the gRPC
stubs, every option, offline from a record file, and every exit status."""

from __future__ import annotations

import copy
import json
import random
import secrets
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bergen.api.exit_status import ExitStatus
from bergen.domain.events import (
    Dealt,
    DealVoided,
    Event,
    HandEnded,
    PointsScored,
    TileDrawn,
    TilePlayed,
)
from bergen.domain.state import State, evolve
from bergen.domain.tiles import Tile
from bergen.v1 import bergen_pb2 as pb

from .client import Client, Table, event_in, play_random_move, play_to_end, seat_everyone
from .replay_support import (
    REASON_WORDS,
    clean_env,
    comparable,
    find_match,
    parse_listing,
    replay_command,
    run_replay,
    tiles_shown,
)
from .servers import ServerFarm, ServerProcess

try:
    import pexpect
except ImportError:  # only the tests on a pseudo-terminal need it
    pexpect = None

needs_pexpect = pytest.mark.skipif(
    pexpect is None, reason="pexpect is not installed (pip install -e '.[dev]')"
)

pytestmark = [pytest.mark.timeout(120)]


@dataclass
class Finished:
    server: ServerProcess
    table: Table
    record: dict[str, Any]
    events: list[Event]

    @property
    def names(self) -> list[str]:
        return [s["name"] for s in self.record["seats"]]


@pytest.fixture(scope="module")
def server(module_farm: ServerFarm, module_sqlite_url: str) -> ServerProcess:
    return module_farm.start(module_sqlite_url)


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[Client]:
    with Client(server.target) as c:
        yield c


def _finish(server: ServerProcess, client: Client, seats: int, partnerships: bool) -> Finished:
    table = seat_everyone(client, seats, partnerships=partnerships)
    play_to_end([client], random.Random(seats), table)
    events = [event_in(e) for e in client.replay(table.match_id).events]
    return Finished(server, table, client.record(table.match_id), events)


@pytest.fixture(scope="module")
def finished(server: ServerProcess, client: Client) -> Finished:
    """A two-seat match played to its end."""
    return _finish(server, client, 2, False)


@pytest.fixture(scope="module")
def finished_partnership(server: ServerProcess, client: Client) -> Finished:
    return _finish(server, client, 4, True)


@pytest.fixture(scope="module")
def live(server: ServerProcess, client: Client) -> Table:
    """A three-seat match in its first hand, some plays in."""
    table = seat_everyone(client, 3)
    rng = random.Random(7)
    for _ in range(6):
        play_random_move([client], rng, table)
    assert client.view(table.match_id).phase == pb.PHASE_PLAYING
    return table


def replay(server: ServerProcess, *args: str) -> Any:
    return run_replay(*args, "--server", server.target)


def assert_ok(result: Any) -> str:
    assert result.returncode == ExitStatus.SUCCESS, result.stderr
    assert "Traceback" not in result.stderr
    return str(result.stdout)


def assert_fails(result: Any, status: ExitStatus, *words: str) -> None:
    assert result.returncode == status, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith("bergen-replay: ") or "usage:" in result.stderr
    for word in words:
        assert word in result.stderr, (word, result.stderr)


def assert_listing_matches_record(
    text: str, record: dict[str, Any], hands: list[int] | None = None
) -> None:
    """Every hand of `record` (or those in `hands`): the deals, each action in order with
    its points, the hand's end and scores; then the result."""
    names = [s["name"] for s in record["seats"]]
    _, listed = parse_listing(text, names)
    wanted = [h for h in record["hands"] if hands is None or h["number"] in hands]
    assert sorted(listed) == [h["number"] for h in wanted]
    for hand in wanted:
        got = listed[hand["number"]]
        assert len(got.deals) == len(hand["deals"])
        for deal, shown in zip(hand["deals"], got.deals, strict=True):
            assert shown["void"] == deal["void"]
            for seat, tiles in enumerate(deal["hands"]):
                assert shown["rows"][names[seat]] == " ".join(tiles)
            drawable, reserve = deal["boneyard"][:-2], deal["boneyard"][-2:]
            assert shown["rows"]["boneyard"] == (
                f"{' '.join(drawable)}  reserve {' '.join(reserve)}"
            )
        assert [comparable(a) for a in got.actions] == hand["actions"]
        assert [a["number"] for a in got.actions] == list(range(1, len(hand["actions"]) + 1))
        end = "\n".join(got.end)
        assert f"scores after hand {hand['number']}: " in end
        side_scores = end.split(f"scores after hand {hand['number']}: ")[1].splitlines()[0]
        assert [int(part.rsplit(" ", 1)[1]) for part in side_scores.split(" · ")] == hand["scores"]
        if hand["end"]["reason"] == "domino":
            assert "went out" in end and "going out" in end
        elif hand["end"]["reason"] == "blocked":
            assert "blocked" in end
        else:
            assert "the target is reached" in end


def assert_points_say_why(text: str, events: list[Event]) -> None:
    """Each PointsScored event is shown with its reason, and its cut when reduced."""
    rows = [line.strip() for line in text.splitlines() if line.strip().startswith("+")]
    scored = [e for e in events if isinstance(e, PointsScored)]
    assert len(rows) == len(scored)
    for row, e in zip(rows, scored, strict=True):
        assert row.startswith(f"+{e.points} {REASON_WORDS[e.reason]}"), (row, e)
        cut = f"({e.base} cut to {e.points} near the target)"
        assert (cut in row) == (e.base > e.points), (row, e)


# ----- a finished match --------------------------------------------------------------------


@pytest.mark.parametrize("which", ["finished", "finished_partnership"])
def test_a_finished_match_shows_every_hand_action_point_score_and_the_result(
    which: str, request: pytest.FixtureRequest
) -> None:
    match: Finished = request.getfixturevalue(which)
    text = assert_ok(replay(match.server, match.table.match_id))
    assert_listing_matches_record(text, match.record)
    assert_points_say_why(text, match.events)
    header = text.split("\nhand 1\n")[0]
    assert match.table.match_id in header
    for name in match.names:
        assert name in header
    result = match.record["result"]
    last = text.rstrip().splitlines()[-1]
    assert last.startswith("result: ") and "wins" in last
    assert [int(p.rsplit(" ", 1)[1]) for p in last.split(": ", 2)[2].split(" · ")] == result[
        "scores"
    ]
    # Plain, since the output is not a terminal.
    assert "\x1b[" not in text
    assert "[" in text and "|" in text
    assert not any(0x1F030 <= ord(c) <= 0x1F093 for c in text)


def test_the_line_after_each_play_is_the_folded_line(finished: Finished) -> None:
    text = assert_ok(replay(finished.server, finished.table.match_id, "--hand", "1"))
    _, hands = parse_listing(text, finished.names)
    state: State | None = None
    lines: list[str] = []
    for e in finished.events:
        state = evolve(state, e)
        if isinstance(e, TilePlayed) and e.hand == 1:
            lines.append("".join(f"[{a}|{b}]" for a, b in state.line))
    shown = [a["line"].rsplit(" ", 1)[1] for a in hands[1].actions if a["act"] == "play"]
    assert shown == lines


# ----- a live match: nothing hidden shown ----------------------------------------------------


def _allowed(client: Client, table: Table, seat: int | None) -> dict[int, set[Tile]]:
    """For each hand, the tiles `seat` (None: a spectator) may see during play: those
    played, and its own (dealt or drawn). Read from the seat's own replay."""
    allowed: dict[int, set[Tile]] = {}
    token = None if seat is None else table.tokens[seat]
    for msg in client.replay(table.match_id, token).events:
        e = event_in(msg)
        if isinstance(e, Dealt):
            allowed[e.hand] = set()
            if seat is not None:
                allowed[e.hand] |= {t for t in e.hands[seat] if t is not None}
        elif isinstance(e, TilePlayed):
            allowed[e.hand].add(e.tile)
        elif isinstance(e, TileDrawn) and e.tile is not None:
            assert e.seat == seat, "a draw of another seat shown during play"
            allowed[e.hand].add(e.tile)
    return allowed


def assert_nothing_hidden_shown(text: str, names: list[str], allowed: dict[int, set[Tile]]) -> None:
    header, hands = parse_listing(text, names)
    assert tiles_shown("\n".join(header)) == set()
    assert sorted(hands) == sorted(allowed)
    for number, hand in hands.items():
        assert tiles_shown("\n".join(hand.lines)) <= allowed[number], number


def test_a_live_match_shows_a_spectator_no_tile_in_any_hand(
    server: ServerProcess, client: Client, live: Table
) -> None:
    text = assert_ok(replay(server, live.match_id))
    names = [f"player {i}" for i in range(live.seats)]
    header, hands = parse_listing(text, names)
    assert any("live" in line and "spectator" in line for line in header)
    current = hands[max(hands)]
    deal = "\n".join(current.deal_lines)
    assert tiles_shown(deal) == set()
    assert deal.count("(6 tiles hidden)") == 3 * len(current.deals)
    assert "(10 tiles hidden)" in deal
    assert any("to play" in line for line in current.end)
    assert_nothing_hidden_shown(text, names, _allowed(client, live, None))


@pytest.mark.parametrize("seat", [0, 2])
def test_a_live_match_shows_a_seat_its_own_tiles_and_no_other(
    server: ServerProcess, client: Client, live: Table, seat: int
) -> None:
    text = assert_ok(replay(server, live.match_id, "--token", live.tokens[seat]))
    names = [f"player {i}" for i in range(live.seats)]
    header, hands = parse_listing(text, names)
    assert any(f"shown as seat {seat + 1}" in line for line in header)
    allowed = _allowed(client, live, seat)
    current = max(hands)
    rows = hands[current].deals[-1]["rows"]
    dealt = {Tile.parse(t) for t in rows[names[seat]].split()}
    assert len(dealt) == 6 and dealt <= allowed[current]
    for other in set(range(live.seats)) - {seat}:
        assert rows[names[other]] == "(6 tiles hidden)"
    assert rows["boneyard"] == "(10 tiles hidden)"
    assert tiles_shown("\n".join(hands[current].deal_lines)) <= dealt
    assert_nothing_hidden_shown(text, names, allowed)


def test_a_live_match_has_no_record_yet(server: ServerProcess, live: Table) -> None:
    # Refused, as bergen verify is for the same match: one meaning per exit status.
    assert_fails(replay(server, live.match_id, "--record"), ExitStatus.REFUSED, "has not ended")


def test_a_live_match_is_not_analysed(server: ServerProcess, live: Table) -> None:
    # Its analysis would judge seats on tiles the caller may not see yet.
    assert_fails(replay(server, live.match_id, "--analyse"), ExitStatus.REFUSED, "has not ended")


# ----- the options ----------------------------------------------------------------------------


def test_hand_shows_only_that_hand(finished: Finished) -> None:
    last = len(finished.record["hands"])
    for number in sorted({1, last}):
        text = assert_ok(replay(finished.server, finished.table.match_id, "--hand", str(number)))
        assert_listing_matches_record(text, finished.record, hands=[number])
        assert "\nresult: " not in text.split(f"\nhand {number}\n")[1]
    assert_fails(
        replay(finished.server, finished.table.match_id, "--hand", str(last + 1)),
        ExitStatus.USAGE,
        f"no hand {last + 1}",
        f"hands 1 to {last}",
    )
    assert_fails(replay(finished.server, finished.table.match_id, "--hand", "0"), ExitStatus.USAGE)


@pytest.mark.parametrize("seat", [0, 1])
def test_seat_shows_only_what_that_seat_knew_at_each_step(finished: Finished, seat: int) -> None:
    # People count seats from 1: seat index 0 is --seat 1.
    text = assert_ok(replay(finished.server, finished.table.match_id, "--seat", str(seat + 1)))
    names = finished.names
    header, hands = parse_listing(text, names)
    assert any(f"as seat {seat + 1}" in line for line in header)
    other = 1 - seat
    for hand in finished.record["hands"]:
        got = hands[hand["number"]]
        for deal, shown in zip(hand["deals"], got.deals, strict=True):
            assert shown["rows"][names[seat]] == " ".join(deal["hands"][seat])
            assert shown["rows"][names[other]] == "(6 tiles hidden)"
            assert shown["rows"]["boneyard"] == "(16 tiles hidden)"
        # The same actions, but the other seat's draws are not shown.
        for want, action in zip(hand["actions"], got.actions, strict=True):
            if want["act"] == "draw" and want["seat"] == other:
                assert action["tile"] is None and "draws a tile" in action["line"]
            else:
                assert comparable(action) == want
        # Only the seat's own tiles and tiles already played: none of the other seat's
        # tiles left at the end of the hand, for example.
        played = {Tile.parse(a["tile"]) for a in hand["actions"] if a["act"] == "play"}
        own = {Tile.parse(t) for d in hand["deals"] for t in d["hands"][seat]}
        own |= {
            Tile.parse(a["tile"])
            for a in hand["actions"]
            if a["act"] == "draw" and a["seat"] == seat
        }
        assert tiles_shown("\n".join(got.lines)) <= played | own
    assert_fails(
        replay(finished.server, finished.table.match_id, "--seat", "3"),
        ExitStatus.USAGE,
        "no seat 3",
    )


def test_record_prints_the_record_json(finished: Finished) -> None:
    text = assert_ok(replay(finished.server, finished.table.match_id, "--record"))
    assert json.loads(text) == finished.record
    assert finished.record["format"] == "bergen-match-record/1"


def test_file_replays_a_saved_record_without_a_server(finished: Finished, tmp_path: Path) -> None:
    saved = tmp_path / "match.json"
    saved.write_text(assert_ok(replay(finished.server, finished.table.match_id, "--record")))
    online = assert_ok(replay(finished.server, finished.table.match_id))
    # No server at all: nothing listens on the default address in this environment.
    offline = assert_ok(run_replay("--file", str(saved), env=clean_env(BERGEN_SERVER="x:1")))
    assert_listing_matches_record(offline, finished.record)
    # The same listing, but for the match's name (not part of a record).
    assert offline.splitlines()[1:] == online.splitlines()[1:]
    seat_online = assert_ok(replay(finished.server, finished.table.match_id, "--seat", "1"))
    seat_offline = assert_ok(run_replay("--file", str(saved), "--seat", "1"))
    assert seat_offline.splitlines()[1:] == seat_online.splitlines()[1:]
    from_stdin = assert_ok(run_replay("--file", "-", stdin=saved.read_text()))
    assert from_stdin == offline


@needs_pexpect
def test_plain_forces_plain_text_on_a_terminal(finished: Finished) -> None:
    fancy = _on_a_terminal(finished, [])
    assert "\x1b[" in fancy
    lead = finished.record["hands"][0]["actions"][0]["tile"]
    a, b = (int(x) for x in lead.split("-"))
    assert chr(0x1F031 + 7 * a + b) in fancy
    plain = _on_a_terminal(finished, ["--plain"])
    assert "\x1b[" not in plain
    assert f"[{a}|{b}]" in plain
    assert not any(0x1F030 <= ord(c) <= 0x1F093 for c in plain)


def _on_a_terminal(finished: Finished, extra: list[str]) -> str:
    child = _spawn(finished, "--hand", "1", *extra)
    out = child.read()
    # Wait for the exit before closing: close() would hang up on a child still exiting.
    child.wait()
    child.close()
    assert child.exitstatus == 0, out
    return str(out)


def _spawn(finished: Finished, *args: str) -> Any:
    command = replay_command()
    env = clean_env(TERM="xterm-256color", LANG="C.UTF-8", LC_ALL="C.UTF-8", COLUMNS="200")
    env.pop("NO_COLOR", None)
    return pexpect.spawn(
        command[0],
        [*command[1:], finished.table.match_id, "--server", finished.server.target, *args],
        env=env,
        encoding="utf-8",
        timeout=30,
        dimensions=(50, 200),
    )


@needs_pexpect
def test_step_moves_forward_and_back_with_the_keyboard(finished: Finished) -> None:
    hand = finished.record["hands"][0]
    # The deals, the actions, the hand's end (and the match's, when it has one hand only).
    steps = len(hand["deals"]) + len(hand["actions"]) + 1 + (len(finished.record["hands"]) == 1)
    child = _spawn(finished, "--step", "--hand", "1", "--plain")
    try:
        child.expect(rf"step 1 of {steps}\r?\n")
        child.expect("deal 1 dealt")
        child.send("n")
        child.expect(rf"step 2 of {steps}")
        child.expect(r"leads")
        child.send("\x1b[C")  # right arrow
        child.expect(rf"step 3 of {steps}")
        child.send(" ")
        child.expect(rf"step 4 of {steps}")
        child.send("\x1b[D")  # left arrow
        child.expect(rf"step 3 of {steps}")
        child.send("p")
        child.expect(rf"step 2 of {steps}")
        child.send("G")
        child.expect(rf"step {steps} of {steps}")
        child.expect("end of hand 1")
        child.send("n")  # past the end: stays
        child.expect(rf"step {steps} of {steps}")
        child.send("q")
        child.expect(pexpect.EOF)
        child.wait()
    finally:
        child.close()
    assert child.exitstatus == 0


def test_step_needs_a_terminal(finished: Finished) -> None:
    assert_fails(
        replay(finished.server, finished.table.match_id, "--step"), ExitStatus.USAGE, "terminal"
    )


# ----- offline: what every kind of point and deal looks like -------------------------------


def _has(kind: type, **fields: Any) -> Any:
    def wanted(events: list[Event]) -> bool:
        return any(
            isinstance(e, kind) and all(getattr(e, k) == v for k, v in fields.items())
            for e in events
        )

    return wanted


@pytest.mark.parametrize(
    ("what", "wanted", "preset", "words"),
    [
        ("a void deal", _has(DealVoided), "standard", ["void, no seat holds a double"]),
        ("a triple header", _has(PointsScored, reason="triple_header"), "standard", []),
        ("a blocked hand", _has(HandEnded, reason="blocked"), "standard", ["blocked"]),
        (
            "the target reached mid-hand",
            _has(HandEnded, reason="match_over"),
            "standard",
            ["the target is reached"],
        ),
        ("a double bonus", _has(PointsScored, reason="double_bonus"), "eastern", []),
        (
            "a reduction",
            lambda evs: any(isinstance(e, PointsScored) and e.base > e.points for e in evs),
            "standard",
            ["near the target"],
        ),
    ],
)
def test_a_record_file_shows(
    what: str, wanted: Any, preset: str, words: list[str], tmp_path: Path
) -> None:
    events, record = find_match(wanted, preset=preset)
    saved = tmp_path / "record.json"
    saved.write_text(json.dumps(record))
    text = assert_ok(run_replay("--file", str(saved)))
    assert_listing_matches_record(text, record)
    assert_points_say_why(text, events)
    for word in words:
        assert word in text, (what, word)


def test_a_tampered_record_is_invalid_and_says_where(finished: Finished, tmp_path: Path) -> None:
    cases = []
    points = copy.deepcopy(finished.record)
    points["hands"][0]["actions"][0]["points"] += 1
    cases.append((points, "hand 1, action 1"))
    scores = copy.deepcopy(finished.record)
    scores["hands"][0]["scores"][0] += 5
    cases.append((scores, "hand 1: scores"))
    swapped = copy.deepcopy(finished.record)
    deal = swapped["hands"][0]["deals"][0]
    deal["hands"][0][0], deal["boneyard"][0] = deal["boneyard"][0], deal["hands"][0][0]
    cases.append((swapped, "hand 1, deal 1"))
    seed = copy.deepcopy(finished.record)
    seed["server_seed"] = "0" * 64
    cases.append((seed, "commitment"))
    for i, (record, where) in enumerate(cases):
        path = tmp_path / f"tampered{i}.json"
        path.write_text(json.dumps(record))
        result = run_replay("--file", str(path))
        assert_fails(result, ExitStatus.INVALID, "does not check", f"at {where}")
        assert result.stdout == ""


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("", ["not JSON"]),
        ('{"format": "bergen-match-record/1",', ["not JSON", "line 1"]),
        ("[1, 2, 3]", ["does not check", "expected an object"]),
        ('{"format": "bergen-match-record/1"}', ["does not check", "missing field"]),
        ('{"format": "something else"}', ["does not check"]),
        ("[" * 100_000 + "]" * 100_000, ["not"]),
    ],
)
def test_a_bad_record_file_is_invalid(content: str, words: list[str], tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    path.write_text(content)
    assert_fails(run_replay("--file", str(path)), ExitStatus.INVALID, *words)


def test_a_record_file_that_is_not_there_is_a_usage_error(tmp_path: Path) -> None:
    missing = tmp_path / "record.json"
    assert_fails(run_replay("--file", str(missing)), ExitStatus.USAGE, "no such file")


def test_a_record_file_that_is_not_text_is_invalid(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    assert_fails(run_replay("--file", str(path)), ExitStatus.INVALID, "not UTF-8 text")


# ----- exit statuses ----------------------------------------------------------------------------


def test_an_unknown_match_is_not_found(server: ServerProcess) -> None:
    unknown = "00000000-0000-4000-8000-000000000000"
    assert_fails(replay(server, unknown), ExitStatus.NOT_FOUND, f"no match {unknown}")
    assert_fails(replay(server, unknown, "--record"), ExitStatus.NOT_FOUND)


def test_a_malformed_match_id_is_a_usage_error(server: ServerProcess) -> None:
    assert_fails(replay(server, "not-a-match"), ExitStatus.USAGE, "match id")


@pytest.mark.parametrize(
    "token",
    ["bgs_" + secrets.token_urlsafe(32), "short"],
    ids=["a token of no seat here", "a malformed token"],
)
def test_a_refused_token_is_refused(server: ServerProcess, live: Table, token: str) -> None:
    assert_fails(
        replay(server, live.match_id, "--token", token), ExitStatus.REFUSED, "refused the token"
    )


def test_a_seat_token_of_another_match_is_refused(
    server: ServerProcess, finished: Finished, live: Table
) -> None:
    assert_fails(
        replay(server, live.match_id, "--token", finished.table.tokens[0]), ExitStatus.REFUSED
    )


def test_an_unreachable_server_is_unreachable_quickly(live: Table) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    result = run_replay(live.match_id, "--server", f"127.0.0.1:{port}")
    assert_fails(result, ExitStatus.UNREACHABLE, f"127.0.0.1:{port}")
    assert time.monotonic() - started < 10
    # The server comes from BERGEN_SERVER when --server is not given.
    result = run_replay(live.match_id, env=clean_env(BERGEN_SERVER=f"127.0.0.1:{port}"))
    assert_fails(result, ExitStatus.UNREACHABLE, f"127.0.0.1:{port}")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ([], ["give a match id"]),
        (["--server", "nohostport"], ["HOST:PORT"]),
        (["--hand", "two"], ["--hand"]),
        (["--seat", "-1"], ["--seat"]),
        (["--file", "x.json"], ["not both"]),
        (["--record", "--hand", "1"], ["--record"]),
        (["--nonsense"], ["unrecognized"]),
    ],
)
def test_bad_arguments_are_usage_errors(args: list[str], words: list[str]) -> None:
    match_id = [] if not args else ["00000000-0000-4000-8000-000000000000"]
    assert_fails(run_replay(*match_id, *args), ExitStatus.USAGE, *words)


def test_the_server_env_variable_and_help(server: ServerProcess, finished: Finished) -> None:
    result = run_replay(finished.table.match_id, env=clean_env(BERGEN_SERVER=server.target))
    assert assert_ok(result) == assert_ok(replay(server, finished.table.match_id))
    helped = run_replay("--help")
    assert helped.returncode == 0 and "--step" in helped.stdout


def test_json_gives_every_step_in_the_listings_words(finished: Finished) -> None:
    shown = json.loads(assert_ok(replay(finished.server, finished.table.match_id, "--json")))
    assert shown["format"] == "bergen-replay/1"
    assert shown["match_id"] == finished.table.match_id and shown["complete"] is True
    record = finished.record
    assert shown["result"]["reason"] == record["result"]["reason"]
    assert shown["result"]["scores"] == record["result"]["scores"]
    actions = [s for s in shown["steps"] if s["kind"] in ("lead", "play", "draw", "pass")]
    assert len(actions) == sum(len(h["actions"]) for h in record["hands"])
    listing = assert_ok(replay(finished.server, finished.table.match_id))
    for step in actions:
        assert step["text"] in listing  # the same words as the listing
    first = shown["steps"][0]
    assert first["kind"] == "deal" and first["hands"] == record["hands"][0]["deals"][0]["hands"]
    only = json.loads(assert_ok(replay(finished.server, finished.table.match_id, "--json",
                                       "--hand", "1")))  # fmt: skip
    assert {s["hand"] for s in only["steps"]} == {1}
