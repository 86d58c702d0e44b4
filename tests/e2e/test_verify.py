"""`bergen verify` against real servers on both backends, and against changed record files.

Matches are played through a server with random legal plays (some resigned, one abandoned by
the organiser); every honest match verifies by id and its signed record verifies as a file.
Any single field changed in a signed record, and corrupt or random files, are rejected with
one clear line and a non-zero exit status, never a traceback.
"""

from __future__ import annotations

import copy
import json
import random
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bergen.api.exit_status import ExitStatus
from bergen.api.signing import RecordSigner
from bergen.cli_client.main import main
from bergen.cli_client.verify import check_match, verify_record
from bergen.v1 import bergen_pb2 as pb

from .client import Client, play_random_move, play_to_end, seat_everyone
from .conftest import ORGANISER_TOKEN
from .servers import ServerFarm, ServerProcess, bergen_command

# (seats, partnerships, preset, how it ends)
MIXED = (
    (2, False, "standard", "played"),
    (3, False, "eastern", "played"),
    (4, True, "american", "played"),
    (4, False, "pips", "resigned"),
    (2, False, "eastern", "abandoned"),
    (3, False, "standard", "abandoned while seating"),
)


def play_matches(
    client: Client, rng: random.Random, specs: tuple[tuple[int, bool, str, str], ...] = MIXED
) -> list[str]:
    """Play one match per spec to its end (a resignation or the organiser's abandonment
    after a few moves where the spec says so); returns their ids."""
    ids = []
    for seats, partnerships, preset, ending in specs:
        if ending == "abandoned while seating":
            created = client.create(seats, partnerships=partnerships, preset=preset)
            client.join(created.match_id, "early bird", client_seed="dawn")
            client.abandon(created.match_id, ORGANISER_TOKEN, "nobody else came")
            ids.append(created.match_id)
            continue
        table = seat_everyone(client, seats, partnerships=partnerships, preset=preset)
        if ending == "played":
            play_to_end([client], rng, table)
        else:
            for _ in range(rng.randrange(1, 6)):
                play_random_move([client], rng, table)
            if ending == "resigned":
                client.resign(table.match_id, table.tokens[rng.randrange(seats)])
            else:
                client.abandon(table.match_id, ORGANISER_TOKEN, "tournament over")
        ids.append(table.match_id)
    return ids


def run_verify(*args: str) -> tuple[int, str, str]:
    """`bergen verify ARGS` as a process: (exit status, stdout, stderr). Asserts that it
    printed no traceback."""
    done = subprocess.run(
        [*bergen_command(), "verify", *args], capture_output=True, text=True, timeout=60
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout, done.stderr


def verdict_line(out: str) -> str:
    lines = out.splitlines()
    assert len(lines) == 1, f"expected one verdict line, got {out!r}"
    return lines[0]


@dataclass
class World:
    server: ServerProcess
    client: Client
    match_ids: list[str]
    public_key: str
    key_file: Path
    records: dict[str, dict[str, Any]]


def _world(farm: ServerFarm, database: str, workdir: Path, seed: int) -> Iterator[World]:
    server = farm.start(database, organiser_token=ORGANISER_TOKEN)
    client = Client(server.target)
    ids = play_matches(client, random.Random(seed))
    info = client.stub.GetServerInfo(pb.GetServerInfoRequest())
    key_file = workdir / "server-key.hex"
    key_file.write_text(info.public_key + "\n")
    records = {i: client.record(i) for i in ids}
    yield World(server, client, ids, info.public_key, key_file, records)
    client.close()


@pytest.fixture(scope="module")
def sqlite_world(
    module_farm: ServerFarm, module_sqlite_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    yield from _world(module_farm, module_sqlite_url, tmp_path_factory.mktemp("keys"), 11)


@pytest.fixture(scope="module")
def pg_world(
    module_farm: ServerFarm, module_pg_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    yield from _world(module_farm, module_pg_database, tmp_path_factory.mktemp("keys"), 12)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def world(request: pytest.FixtureRequest) -> World:
    fixture = "sqlite_world" if request.param == "sqlite" else "pg_world"
    result: World = request.getfixturevalue(fixture)
    return result


# ----- honest matches ---------------------------------------------------------------------


def verify_here(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`bergen verify ARGS` in this process (much faster than a new one)."""
    capsys.readouterr()
    code = main(["verify", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_every_honest_match_verifies_by_id_and_as_a_signed_file(
    world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for match_id in world.match_ids:
        code, out, err = verify_here(capsys, match_id, "--server", world.server.target)
        line = verdict_line(out)
        assert code == ExitStatus.SUCCESS, (line, err)
        assert line.startswith(f"OK: match {match_id}, ")
        assert f"signed by {world.public_key}" in line and "chain intact" in line
        assert "events, logged in a checkpoint of " in line  # its proof checked

        path = tmp_path / f"{match_id}.json"
        path.write_text(json.dumps(world.records[match_id], indent=2))
        code, out, _ = verify_here(capsys, str(path), "--public-key", str(world.key_file))
        assert code == ExitStatus.SUCCESS, out
        assert verdict_line(out).startswith(f"OK: match {match_id}, ")


def test_the_command_as_a_process_verifies_a_match_and_a_file(world: World, tmp_path: Path) -> None:
    match_id = world.match_ids[0]
    code, out, err = run_verify(match_id, "--server", world.server.target)
    assert (code, err) == (ExitStatus.SUCCESS, ""), out
    assert verdict_line(out).startswith(f"OK: match {match_id}, ")
    path = tmp_path / "record.json"
    path.write_text(json.dumps(world.records[match_id]))
    code, out, err = run_verify(str(path), "--public-key", str(world.key_file))
    assert (code, err) == (ExitStatus.SUCCESS, ""), out
    assert verdict_line(out).startswith(f"OK: match {match_id}, ")


def test_a_verified_match_reports_its_facts_as_json(sqlite_world: World) -> None:
    match_id = sqlite_world.match_ids[0]
    code, out, _ = run_verify(match_id, "--server", sqlite_world.server.target, "--json")
    assert code == 0
    facts = json.loads(out)
    record = sqlite_world.records[match_id]
    assert facts["ok"] is True and facts["status"] == "success"
    assert facts["match_id"] == match_id
    assert facts["events"] == record["log"]["events"]
    assert facts["head"] == record["log"]["head"]
    assert facts["public_key"] == sqlite_world.public_key and facts["key_checked"] is True
    assert facts["chain"] == "intact"


def test_without_a_trusted_key_a_file_checks_but_is_untrusted(
    sqlite_world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "record.json"
    path.write_text(json.dumps(sqlite_world.records[sqlite_world.match_ids[1]]))
    assert main(["verify", str(path)]) == ExitStatus.UNTRUSTED
    line = verdict_line(capsys.readouterr().out)
    assert line.startswith(f"UNTRUSTED: match {sqlite_world.match_ids[1]}, ")
    assert f"signed by {sqlite_world.public_key}" in line and "no trusted key" in line
    unsigned = dict(sqlite_world.records[sqlite_world.match_ids[1]])
    del unsigned["signature"]
    path.write_text(json.dumps(unsigned))
    code, out, _ = verify_here(capsys, str(path), "--json")
    assert code == ExitStatus.UNTRUSTED
    assert json.loads(out)["status"] == "untrusted" and json.loads(out)["ok"] is False


def test_a_servers_key_is_trusted_on_first_use_and_then_vouches_for_files(
    sqlite_world: World, tmp_path: Path, own_config_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target, key = sqlite_world.server.target, sqlite_world.public_key
    known = own_config_dir / "known_keys"
    assert not known.exists()
    code, out, _ = verify_here(capsys, sqlite_world.match_ids[0], "--server", target)
    assert code == ExitStatus.SUCCESS, out
    assert f"trusted on first use (written to {known})" in verdict_line(out)
    assert known.read_text() == f"{target} {key}\n"
    assert known.stat().st_mode & 0o777 == 0o600
    # Offline, a record signed by the known key is trusted, and says by which server.
    path = tmp_path / "record.json"
    path.write_text(json.dumps(sqlite_world.records[sqlite_world.match_ids[1]]))
    code, out, _ = verify_here(capsys, str(path))
    assert code == ExitStatus.SUCCESS, out
    assert verdict_line(out).endswith(f"signed by {key}, the key known for {target}")
    # The second time through the server, the key is checked, not learned again.
    code, out, _ = verify_here(capsys, sqlite_world.match_ids[1], "--server", target, "--json")
    assert code == ExitStatus.SUCCESS and json.loads(out)["key_from"] == "known_keys"
    assert known.read_text().count("\n") == 1


def test_a_server_whose_key_changed_is_rejected(
    sqlite_world: World, own_config_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = sqlite_world.server.target
    own_config_dir.mkdir(parents=True)
    (own_config_dir / "known_keys").write_text(f"# by hand\n{target} {'cd' * 32}\n")
    code, out, _ = verify_here(capsys, sqlite_world.match_ids[0], "--server", target)
    assert code == ExitStatus.INVALID
    line = verdict_line(out)
    assert line.startswith("REJECTED: signature: ") and "the server's key has changed" in line
    assert f"{'cd' * 32}, the key known for {target}" in line


def test_a_known_keys_file_that_is_not_address_and_key_is_bad_input(
    sqlite_world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "keys"
    bad.write_text("127.0.0.1:1 not-a-key\n")
    code, _, err = verify_here(capsys, sqlite_world.match_ids[0], "--known-keys", str(bad))
    assert code == ExitStatus.USAGE
    assert f"{bad}, line 1: expected ADDRESS KEY" in err


def test_a_record_signed_by_another_key_is_rejected(
    sqlite_world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "record.json"
    path.write_text(json.dumps(sqlite_world.records[sqlite_world.match_ids[0]]))
    other = "ab" * 32
    assert main(["verify", str(path), "--public-key", other]) == ExitStatus.INVALID
    line = verdict_line(capsys.readouterr().out)
    assert line == "REJECTED: signature: signed by another key than the one given"
    # Through the server too: --public-key overrides the key the server publishes.
    code, out, _ = verify_here(
        capsys,
        sqlite_world.match_ids[0],
        "--server",
        sqlite_world.server.target,
        "--public-key",
        other,
    )
    assert code == ExitStatus.INVALID
    assert verdict_line(out).startswith("REJECTED: signature: signed by another key")


def test_a_match_not_ended_unknown_or_unreachable_has_its_own_exit_status(
    sqlite_world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    live = seat_everyone(sqlite_world.client, 2)
    target = sqlite_world.server.target
    code, out, err = verify_here(capsys, live.match_id, "--server", target)
    assert (code, out) == (ExitStatus.REFUSED, "")
    assert "has not ended" in err
    code, _, err = verify_here(capsys, "00000000-0000-4000-8000-000000000000", "--server", target)
    assert code == ExitStatus.NOT_FOUND, err
    code, _, err = verify_here(capsys, "not a match id", "--server", target)
    assert code == ExitStatus.USAGE, err
    code, _, err = run_verify(live.match_id, "--server", "127.0.0.1:9")
    assert code == ExitStatus.UNREACHABLE, err
    assert "cannot reach 127.0.0.1:9" in err


# ----- changed records --------------------------------------------------------------------


def _first(record: dict[str, Any], act: str) -> tuple[int, int, dict[str, Any]]:
    for h, hand in enumerate(record["hands"]):
        for a, action in enumerate(hand["actions"]):
            if action["act"] == act and (act != "play" or action["end"] is not None):
                return h, a, action
    raise AssertionError(f"no {act} in the record")


def _other_tile(tile: str) -> str:
    return "0-0" if tile != "0-0" else "6-6"


def _deal_tile(r: dict[str, Any]) -> str:
    deal = r["hands"][0]["deals"][0]
    deal["hands"][0][0], deal["boneyard"][0] = deal["boneyard"][0], deal["hands"][0][0]
    return "hand 1, deal 1"


def _action_tile(r: dict[str, Any]) -> str:
    h, a, action = _first(r, "play")
    action["tile"] = _other_tile(action["tile"])
    return f"hand {h + 1}, action {a + 1}"


def _drawn_tile(r: dict[str, Any]) -> str:
    h, a, action = _first(r, "draw")
    action["tile"] = _other_tile(action["tile"])
    return f"hand {h + 1}, action {a + 1}"


def _end(r: dict[str, Any]) -> str:
    h, _, action = _first(r, "play")
    action["end"] = "left" if action["end"] == "right" else "right"
    # The tile may fit the other end too (both ends show the same number): then the first
    # play that no longer fits is the first wrong place.
    return f"hand {h + 1}, action "


def _points(r: dict[str, Any]) -> str:
    h, a, action = _first(r, "play")
    action["points"] += 5
    return f"hand {h + 1}, action {a + 1}"


def _hand_end_points(r: dict[str, Any]) -> str:
    assert r["hands"][0]["end"] is not None
    r["hands"][0]["end"]["points"] += 1
    return "hand 1: end"


def _server_seed(r: dict[str, Any]) -> str:
    seed = r["server_seed"]
    r["server_seed"] = ("1" if seed[0] != "1" else "2") + seed[1:]
    return "commitment"


def _commitment(r: dict[str, Any]) -> str:
    c = r["commitment"]
    r["commitment"] = ("1" if c[0] != "1" else "2") + c[1:]
    return "commitment"


def _client_seed(r: dict[str, Any]) -> str:
    r["seats"][1]["client_seed"] += "x"
    return "hand 1, deal 1"


def _hand_score(r: dict[str, Any]) -> str:
    r["hands"][0]["scores"][0] += 1
    return "hand 1: scores"


def _result_score(r: dict[str, Any]) -> str:
    r["result"]["scores"][-1] += 1
    return "result"


def _winner(r: dict[str, Any]) -> str:
    assert r["result"]["winner_side"] is not None
    r["result"]["winner_side"] = 1 - r["result"]["winner_side"]
    return "result"


def _seat_name(r: dict[str, Any]) -> str:
    r["seats"][0]["name"] = "mallory"
    return "signature"


def _log_head(r: dict[str, Any]) -> str:
    r["log"]["head"] = "0" * 64
    return "signature"


def _signature_value(r: dict[str, Any]) -> str:
    v = r["signature"]["value"]
    r["signature"]["value"] = ("1" if v[0] != "1" else "2") + v[1:]
    return "signature"


def _public_key(r: dict[str, Any]) -> str:
    r["signature"]["public_key"] = "ab" * 32
    return "signature"


def _unsigned(r: dict[str, Any]) -> str:
    del r["signature"]
    return "signature"


def _extra_field(r: dict[str, Any]) -> str:
    r["comment"] = "trust me"
    return "record"


CHANGES: dict[str, Callable[[dict[str, Any]], str]] = {
    "a tile in a deal": _deal_tile,
    "the tile of a play": _action_tile,
    "the tile of a draw": _drawn_tile,
    "an end": _end,
    "a points value": _points,
    "a hand's end points": _hand_end_points,
    "the server seed": _server_seed,
    "the commitment": _commitment,
    "a client seed": _client_seed,
    "a hand's score": _hand_score,
    "the result's score": _result_score,
    "the winner": _winner,
    "a seat's name": _seat_name,
    "the log head": _log_head,
    "the signature value": _signature_value,
    "the public key": _public_key,
    "the signature itself": _unsigned,
    "an unknown field": _extra_field,
}


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
def test_a_signed_record_with_any_single_field_changed_is_rejected(
    sqlite_world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str], change: str
) -> None:
    # A played match with draws (the eastern one draws one then passes).
    for match_id in sqlite_world.match_ids:
        record = copy.deepcopy(sqlite_world.records[match_id])
        try:
            where = CHANGES[change](record)
        except AssertionError:  # this match has no such action
            continue
        break
    else:
        pytest.fail(f"no match allows changing {change}")
    path = tmp_path / "changed.json"
    path.write_text(json.dumps(record))
    assert main(["verify", str(path), "--public-key", str(sqlite_world.key_file)]) == 6
    line = verdict_line(capsys.readouterr().out)
    assert line.startswith(f"REJECTED: {where}"), line


def test_a_changed_record_is_rejected_by_the_command_as_a_process(
    sqlite_world: World, tmp_path: Path
) -> None:
    record = copy.deepcopy(sqlite_world.records[sqlite_world.match_ids[0]])
    where = _action_tile(record)
    path = tmp_path / "changed.json"
    path.write_text(json.dumps(record))
    code, out, err = run_verify(str(path), "--public-key", str(sqlite_world.key_file))
    assert code == ExitStatus.INVALID and err == ""
    assert verdict_line(out).startswith(f"REJECTED: {where}: ")


# ----- corrupt files ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "is not JSON"),
        (b"{", "is not JSON"),
        (b"\xff\xfe\x00garbage", "is not UTF-8"),
        (b"[1, 2, 3]", "REJECTED: record: expected an object, got a list"),
        (b'{"format": 1}', "REJECTED: record: missing field(s)"),
        (b'{"a": 1, "a": 2}', "appears twice"),
        (b"NaN", "is not JSON"),
        (b"[" * 100_000, "is not JSON"),
        (b"1" * 5000, "is not JSON"),
    ],
)
def test_a_corrupt_file_is_rejected_with_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, expected: str
) -> None:
    path = tmp_path / "record.json"
    path.write_bytes(content)
    assert main(["verify", str(path)]) == ExitStatus.INVALID
    line = verdict_line(capsys.readouterr().out)
    assert line.startswith("REJECTED: ") and expected in line, line


def test_a_missing_file_or_unreadable_key_is_a_usage_error(
    sqlite_world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(tmp_path / "nope.json")]) == ExitStatus.USAGE
    assert "no such file" in capsys.readouterr().err
    path = tmp_path / "record.json"
    path.write_text(json.dumps(sqlite_world.records[sqlite_world.match_ids[0]]))
    bad_key = tmp_path / "key.pem"
    bad_key.write_text("not a key")
    assert main(["verify", str(path), "--public-key", str(bad_key)]) == ExitStatus.USAGE
    assert "not an Ed25519 public key" in capsys.readouterr().err
    assert main(["verify", str(path), "--public-key", str(tmp_path / "x")]) == ExitStatus.USAGE


# ----- random and mutated records ---------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@st.composite
def mutated(draw: st.DrawFn, record: dict[str, Any]) -> Any:
    """`record` with a few random changes: a key dropped, a value replaced by another of any
    type, a number nudged, a list shortened."""
    r = copy.deepcopy(record)
    for _ in range(draw(st.integers(1, 3))):
        path: list[Any] = []
        node: Any = r
        while isinstance(node, dict | list) and node and draw(st.booleans()):
            key = draw(
                st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node)))
            )
            path.append(key)
            node = node[key]
        if not path:
            continue
        parent = r
        for key in path[:-1]:
            parent = parent[key]
        last = path[-1]
        how = draw(st.sampled_from(["drop", "replace", "nudge", "shorten"]))
        if how == "drop":
            del parent[last]
        elif how == "nudge" and type(parent[last]) is int:
            parent[last] += draw(st.sampled_from([-1, 1, 7, 2**70]))
        elif how == "shorten" and isinstance(parent[last], list):
            parent[last] = parent[last][:-1]
        else:
            parent[last] = draw(JSON)
    return r


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_and_mutated_records_are_rejected_clearly_never_with_a_crash(
    sqlite_world: World, data: st.DataObject
) -> None:
    original = sqlite_world.records[data.draw(st.sampled_from(sqlite_world.match_ids))]
    record = data.draw(st.one_of(JSON, mutated(original)))
    outcome = verify_record(record, sqlite_world.public_key)
    if record == original:
        assert outcome.ok
        return
    assert outcome.status == ExitStatus.INVALID, outcome
    assert outcome.line.startswith("REJECTED: ") and "\n" not in outcome.line


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_the_command_rejects_random_files_with_one_line(
    sqlite_world: World, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    original = sqlite_world.records[sqlite_world.match_ids[0]]
    content = data.draw(
        st.one_of(
            st.binary(max_size=200),
            JSON.map(lambda v: json.dumps(v).encode()),
            mutated(original).map(lambda v: json.dumps(v).encode()),
        )
    )
    path = tmp_path_factory.mktemp("random") / "record.json"
    path.write_bytes(content)
    code = main(["verify", str(path), "--public-key", sqlite_world.public_key])
    if content == json.dumps(original).encode():
        assert code == ExitStatus.SUCCESS
    else:
        assert code == ExitStatus.INVALID


# ----- a server whose signed record is not its log ----------------------------------------


class LyingServer:
    """Serves a real match's log, but a record it changed and signed with its own key."""

    def __init__(self, real: Any, change: Callable[[dict[str, Any]], None]) -> None:
        self.real = real
        self.change = change
        self.signer = RecordSigner(Ed25519PrivateKey.generate())

    def GetAuditLog(self, request: Any, timeout: float | None = None) -> Any:
        return self.real.GetAuditLog(request, timeout=timeout)

    def GetServerInfo(self, request: Any, timeout: float | None = None) -> Any:
        return pb.GetServerInfoResponse(
            signature_algorithm="ed25519", public_key=self.signer.public_key
        )

    def GetRecord(self, request: Any, timeout: float | None = None) -> Any:
        record = json.loads(self.real.GetRecord(request, timeout=timeout).record_json)
        # Its own key signs no checkpoint of the real log: the record goes without one.
        record.pop("transparency", None)
        self.change(record)
        return pb.GetRecordResponse(record_json=json.dumps(self.signer.sign(record)))


def test_a_signed_record_that_differs_from_the_log_is_named_by_the_seq_where_it_differs(
    sqlite_world: World,
) -> None:
    match_id = sqlite_world.match_ids[0]
    stub = sqlite_world.client.stub
    log = stub.GetAuditLog(pb.GetAuditLogRequest(match_id=match_id))
    seat0 = next(
        e.seq
        for e in log.events
        if e.type == "SeatTaken" and json.loads(e.payload_json)["seat"] == 0
    )

    def rename(r: dict[str, Any]) -> None:
        r["seats"][0]["name"] = "mallory"

    outcome = check_match(LyingServer(stub, rename), "liar", match_id, None)
    assert outcome.status == ExitStatus.INVALID
    assert outcome.line.startswith(f"REJECTED: seq {seat0}: the signed record differs from the log")
    assert "'mallory'" in outcome.line

    def shorten(r: dict[str, Any]) -> None:
        r["log"]["events"] -= 1

    n = len(log.events)
    outcome = check_match(LyingServer(stub, shorten), "liar", match_id, None)
    assert outcome.line.startswith(f"REJECTED: seq {n}: after the head the record was signed at")

    # The liar's own key does not pass where the real key is trusted.
    outcome = check_match(
        LyingServer(stub, lambda r: None), "liar", match_id, sqlite_world.public_key
    )
    assert outcome.line == "REJECTED: signature: signed by another key than the one given"
    assert check_match(LyingServer(stub, lambda r: None), "liar", match_id, None).ok
