"""The log is authentic, not only chained: no forged or altered event is ever folded.

Each attack is run against real server processes, on SQLite and on PostgreSQL where the server
runs as the role of deploy/grants.sql. An attacker holding that role (INSERT and SELECT on the
events) can append a row whose hash chain is correct, but not its authenticator, which takes
the servers' log key. Someone with the whole database can also rewrite rows and recompute the
chain, with the same result. Someone holding the log key too is stopped by the rules, which
folding a stored match checks again. A refused match is read-only: every call on it is
answered DATA_LOSS with the reason LOG_TAMPERED, naming the seq, while the other matches are
served as before.
"""

from __future__ import annotations

import hashlib
import json
import random
import secrets
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

import grpc
import psycopg
import pytest
from e2e.client import Client, play_random_move, play_to_end, seat_everyone
from e2e.refusals import refusal
from e2e.servers import ServerFarm, ServerProcess, bergen_command
from e2e.test_verify import run_verify, verdict_line
from grpc_health.v1 import health_pb2

from bergen.api.chain import (
    canonical_json,
    content_bytes,
    event_hash,
    metadata_json,
    micros,
    new_salt,
    parse_metadata,
    row_mac,
)
from bergen.api.exit_status import ExitStatus
from bergen.api.stored import ChainFault, EventMetadata
from bergen.domain.errors import LogTampered
from bergen.domain.rules import RULES_VERSION
from bergen.server.keys import LogKeys, add_key
from bergen.server.store import Append, NewEvent, open_store

from .conftest import Database

TOKEN_KEY = "seat_token_sha256"


class Stored(NamedTuple):
    seq: int
    type: str
    schema_version: int
    payload: dict[str, Any]
    metadata: str
    recorded_at: Any
    prev_hash: bytes
    hash: bytes
    salt: bytes
    key_id: str | None


class Access:
    """Direct SQL on a server's database: `url` is the deploy role (INSERT and SELECT) or the
    owner; on SQLite the file itself."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.sqlite = url.startswith("sqlite")

    @contextmanager
    def _conn(self) -> Iterator[Any]:
        if self.sqlite:
            conn = sqlite3.connect(self.url.removeprefix("sqlite:///"), isolation_level=None)
            try:
                yield conn
            finally:
                conn.close()
        else:
            with psycopg.connect(self.url, autocommit=True) as conn:
                yield conn

    def _sql(self, statement: str) -> str:
        return statement.replace("::json", "").replace("%s", "?") if self.sqlite else statement

    def rows(self, match_id: str) -> list[Stored]:
        cast = "" if self.sqlite else "::text"
        with self._conn() as conn:
            found = conn.execute(
                self._sql(
                    f"SELECT seq, type, schema_version, payload{cast}, metadata{cast},"
                    " recorded_at, prev_hash, hash, salt, key_id FROM events"
                    " WHERE stream_id = %s ORDER BY seq"
                ),
                (match_id,),
            ).fetchall()
        return [
            Stored(r[0], r[1], r[2], json.loads(r[3]), r[4], r[5], bytes(r[6]), bytes(r[7]),
                   bytes(r[8]), r[9])
            for r in found
        ]  # fmt: skip

    def append(
        self,
        match_id: str,
        type_: str,
        payload: dict[str, Any],
        metadata: str,
        *,
        keys: LogKeys | None = None,
        prev_hash: bytes | None = None,
        skip: int = 0,
    ) -> int:
        """Insert an event after the stream's head (`skip` seqs further on), correctly
        chained to it (or to `prev_hash`), as an INSERT is allowed to; authenticated under
        `keys` when given (a key holder), else with an authenticator made up. Returns its
        seq."""
        head = self.rows(match_id)[-1]
        if prev_hash is not None:
            head = head._replace(hash=prev_hash)
        seq = head.seq + 1 + skip
        salt = new_salt()
        payload_text = canonical_json(payload, "payload").decode()
        content = content_bytes(match_id, seq, type_, 1, payload_text.encode(), metadata.encode())
        digest = event_hash(head.hash, salt, content)
        at = datetime.now(UTC).replace(microsecond=123456)
        if keys is None:
            key_id, mac = "k1", secrets.token_bytes(32)
        else:
            key_id = keys.writing
            mac = row_mac(
                keys.writing_key, key_id, match_id, seq, type_, 1, payload_text, metadata,
                micros(at), head.hash, salt, digest,
            )  # fmt: skip
        position = ", position" if self.sqlite else ""
        position_value = ", (SELECT max(position) + 1 FROM events)" if self.sqlite else ""
        with self._conn() as conn:
            conn.execute(
                self._sql(
                    "INSERT INTO events (stream_id, seq, type, schema_version, payload, metadata,"
                    f" prev_hash, hash, salt, recorded_at, key_id, mac{position}) VALUES"
                    f" (%s, %s, %s, 1, %s::json, %s::json, %s, %s, %s, %s, %s, %s"
                    f"{position_value})"
                ),
                (
                    match_id, seq, type_, payload_text, metadata, head.hash, digest, salt,
                    at.isoformat(sep=" ") if self.sqlite else at, key_id, mac,
                ),
            )  # fmt: skip
        return seq

    def rewrite(self, match_id: str, seq: int, payload: dict[str, Any]) -> None:
        """With full access (the append-only guards off): give event `seq` a new payload and
        a new recorded_at, and recompute the hash chain from it to the head."""
        rows = self.rows(match_id)
        prev = rows[seq - 2].hash if seq > 1 else bytes(32)
        updates = []
        for row in rows[seq - 1 :]:
            body = payload if row.seq == seq else row.payload
            content = content_bytes(
                match_id,
                row.seq,
                row.type,
                row.schema_version,
                canonical_json(body, "payload"),
                metadata_json(parse_metadata(row.metadata)),
            )
            digest = event_hash(prev, row.salt, content)
            updates.append((canonical_json(body, "payload").decode(), prev, digest, row.seq))
            prev = digest
        later = datetime.now(UTC) + timedelta(days=1)
        with self._conn() as conn:
            if self.sqlite:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("DROP TRIGGER events_no_update")
            else:
                conn.execute("BEGIN")
                conn.execute("ALTER TABLE events DISABLE TRIGGER ALL")
            for text, prev_hash, digest, row_seq in updates:
                conn.execute(
                    self._sql(
                        "UPDATE events SET payload = %s::json, prev_hash = %s, hash = %s"
                        " WHERE stream_id = %s AND seq = %s"
                    ),
                    (text, prev_hash, digest, match_id, row_seq),
                )
            conn.execute(
                self._sql("UPDATE events SET recorded_at = %s WHERE stream_id = %s AND seq = %s"),
                (later.isoformat(sep=" ") if self.sqlite else later, match_id, seq),
            )
            if self.sqlite:
                conn.execute(
                    "CREATE TRIGGER events_no_update BEFORE UPDATE ON events BEGIN SELECT "
                    "RAISE(ABORT, 'events are append-only: UPDATE on events'); END"
                )
                conn.execute("COMMIT")
            else:
                conn.execute("ALTER TABLE events ENABLE ALWAYS TRIGGER events_no_update_delete")
                conn.execute("ALTER TABLE events ENABLE ALWAYS TRIGGER events_no_truncate")
                conn.execute("COMMIT")


def seat_metadata(token: str) -> str:
    """The metadata a server writes with a SeatTaken, holding `token`'s hash."""
    return metadata_json(
        EventMetadata(
            "attacker",
            None,
            RULES_VERSION,
            {TOKEN_KEY: hashlib.sha256(token.encode()).hexdigest(), "command": "join"},
        )
    ).decode()


def tampered(error: grpc.RpcError, seq: int, what: str) -> None:
    """Assert that `error` is the refusal of a match whose event `seq` was not folded."""
    got = refusal(error, what)
    assert (got.code, got.reason) == (grpc.StatusCode.DATA_LOSS, "LOG_TAMPERED"), got
    assert got.metadata.get("seq") == str(seq), got
    assert f"seq {seq}" in got.message, got.message


def refused_as_tampered(call: Any, seq: int, what: str) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    tampered(caught.value, seq, what)


def still_serves_others(server: ServerProcess) -> None:
    """Health stays SERVING and a new match can be created, joined and played."""
    assert server.health() == health_pb2.HealthCheckResponse.SERVING
    with Client(server.target) as client:
        table = seat_everyone(client, 2)
        play_random_move([client], random.Random(1), table)


def verify_names(server: ServerProcess, match_id: str, seq: int) -> str:
    code, out, err = run_verify(match_id, "--server", server.target)
    assert code == ExitStatus.INVALID, (code, out, err)
    line = verdict_line(out)
    assert line.startswith(f"REJECTED: seq {seq}:"), line
    return line


def restart(farm: ServerFarm, server: ServerProcess, db: Database) -> ServerProcess:
    assert server.terminate() == 0
    return farm.start(db.server_url)


# ----- an attacker with the INSERT role ---------------------------------------------------


def test_a_chained_seat_taken_with_the_attackers_token_is_not_folded(
    farm: ServerFarm, database: Database
) -> None:
    server = farm.start(database.server_url)
    attacker_token = "bgs_" + secrets.token_urlsafe(32)
    with Client(server.target) as client:
        table = seat_everyone(client, 2)
        real = table.tokens[0]
        mover = client.view(table.match_id).turn
        legal = client.view(table.match_id, table.tokens[mover]).legal_plays[0]
        seq = Access(database.server_url).append(
            table.match_id,
            "SeatTaken",
            {"seat": 0, "name": "mallory", "client_seed": ""},
            seat_metadata(attacker_token),
        )
        # The real player is not shown as someone else's seat, and the attacker gets nothing.
        refused_as_tampered(lambda: client.view(table.match_id, real), seq, "the real player")
        refused_as_tampered(
            lambda: client.view(table.match_id, attacker_token), seq, "the attacker"
        )
        refused_as_tampered(lambda: client.view(table.match_id), seq, "a spectator")
        refused_as_tampered(
            lambda: client.play(table.match_id, legal.tile, legal.end, table.tokens[mover]),
            seq,
            "a play",
        )
        verify_names(server, table.match_id, seq)
    still_serves_others(server)
    assert "LOG TAMPERED" in server.log() and f"seq {seq}" in server.log()
    server = restart(farm, server, database)
    with Client(server.target) as client:
        refused_as_tampered(lambda: client.view(table.match_id, real), seq, "after a restart")
    verify_names(server, table.match_id, seq)


def test_chained_points_are_not_folded_and_the_match_is_not_ended_or_signed(
    farm: ServerFarm, database: Database
) -> None:
    server = farm.start(database.server_url)
    with Client(server.target) as client:
        table = seat_everyone(client, 2)
        access = Access(database.server_url)
        head = access.rows(table.match_id)[-1]
        hand = max(r.payload.get("hand", 0) for r in access.rows(table.match_id))
        seq = access.append(
            table.match_id,
            "PointsScored",
            {"hand": hand, "side": 1, "points": 14, "reason": "domino", "base": 14, "seat": 1},
            head.metadata,
        )
        refused_as_tampered(lambda: client.view(table.match_id), seq, "the view")
        refused_as_tampered(lambda: client.record(table.match_id), seq, "the record")
        refused_as_tampered(lambda: client.replay(table.match_id), seq, "the replay")
    still_serves_others(server)
    verify_names(server, table.match_id, seq)


# ----- full access to the database ----------------------------------------------------------


def test_a_player_renamed_with_the_chain_recomputed_is_found_after_a_restart(
    farm: ServerFarm, database: Database
) -> None:
    server = farm.start(database.server_url, extra_args=["--no-transparency-log"])
    with Client(server.target) as client:
        table = seat_everyone(client, 2)
        play_to_end([client], random.Random(2), table)
        code, out, _ = run_verify(table.match_id, "--server", server.target)
        assert code == ExitStatus.SUCCESS, out
    access = Access(database.owner_url)
    seat = next(r for r in access.rows(table.match_id) if r.type == "SeatTaken")
    access.rewrite(table.match_id, seat.seq, {**seat.payload, "name": "someone else"})
    assert server.terminate() == 0
    server = farm.start(database.server_url, extra_args=["--no-transparency-log"])
    with Client(server.target) as client:
        refused_as_tampered(lambda: client.record(table.match_id), seat.seq, "the record")
    verify_names(server, table.match_id, seat.seq)
    still_serves_others(server)


def test_a_signed_match_rewritten_with_the_chain_recomputed_stops_the_server(
    farm: ServerFarm, database: Database
) -> None:
    # Its record carries a checkpoint of the transparency log that covers its last event:
    # the rewritten log is no extension of it, and the server serves none of it.
    server = farm.start(database.server_url)
    with Client(server.target) as client:
        table = seat_everyone(client, 2)
        play_to_end([client], random.Random(2), table)
        code, out, _ = run_verify(table.match_id, "--server", server.target)
        assert code == ExitStatus.SUCCESS, out
    access = Access(database.owner_url)
    seat = next(r for r in access.rows(table.match_id) if r.type == "SeatTaken")
    access.rewrite(table.match_id, seat.seq, {**seat.payload, "name": "someone else"})
    assert server.terminate() == 0
    server = farm.start(database.server_url, serving=False)  # health: NOT_SERVING
    with Client(server.target) as client, pytest.raises(grpc.RpcError) as caught:
        client.record(table.match_id)
    got = refusal(caught.value, "the record")
    assert (got.code, got.reason) == (grpc.StatusCode.DATA_LOSS, "LOG_ROLLED_BACK"), got


# ----- a holder of the log key ----------------------------------------------------------------


def test_an_illegal_play_with_a_valid_authenticator_is_refused_by_the_rules(
    farm: ServerFarm, database: Database
) -> None:
    server = farm.start(database.server_url)
    keys = LogKeys.load_or_create(farm.workdir / "bergen-log-key")
    with Client(server.target) as client:
        table = seat_everyone(client, 2)
        view = client.view(table.match_id)
        waiting = 1 - view.turn  # the seat that is not to play
        mine = client.view(table.match_id, table.tokens[waiting])
        tile = mine.my_tiles[0]
        access = Access(database.server_url)
        head = access.rows(table.match_id)[-1]
        seq = access.append(
            table.match_id,
            "TilePlayed",
            {
                "hand": 1,
                "seat": waiting,
                "tile": f"{tile.low}-{tile.high}",
                "end": "right",
            },
            head.metadata,
            keys=keys,
        )
        refused_as_tampered(lambda: client.view(table.match_id), seq, "the view")
        line = verify_names(server, table.match_id, seq)
        assert "rules" in line, line
    still_serves_others(server)


# ----- key rotation -----------------------------------------------------------------------


def test_after_a_rotation_old_rows_verify_and_the_new_key_writes(
    farm: ServerFarm, database: Database
) -> None:
    key_file = farm.workdir / "bergen-log-key"
    server = farm.start(database.server_url)
    with Client(server.target) as client:
        table = seat_everyone(client, 2)
        play_random_move([client], random.Random(1), table)
    assert server.terminate() == 0
    add_key(key_file, "k2")
    server = farm.start(database.server_url)
    with Client(server.target) as client:
        play_to_end([client], random.Random(2), table)
    code, out, _ = run_verify(table.match_id, "--server", server.target)
    assert code == ExitStatus.SUCCESS, out
    ids = [r.key_id for r in Access(database.owner_url).rows(table.match_id)]
    assert ids[0] == "k1" and ids[-1] == "k2" and ids == sorted(ids), ids
    assert server.terminate() == 0
    # A server that no longer holds the old key refuses the rows it wrote.
    lines = key_file.read_text().splitlines()
    key_file.write_text("\n".join(line for line in lines if not line.startswith("k1")) + "\n")
    server = farm.start(database.server_url)
    with Client(server.target) as client:
        refused_as_tampered(lambda: client.record(table.match_id), 1, "the record")


def test_the_log_key_file_is_made_once_and_shared(farm: ServerFarm, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    first = farm.start(url)
    key_file = farm.workdir / "bergen-log-key"
    made = key_file.read_text()
    assert key_file.stat().st_mode & 0o777 == 0o600
    second = farm.start(url, name="replica")
    with Client(first.target) as a, Client(second.target) as b:
        table = seat_everyone(a, 2)
        assert b.view(table.match_id).version == table.version
    assert key_file.read_text() == made


def test_export_run_again_finds_a_stored_log_whose_head_changed(
    farm: ServerFarm, database: Database, tmp_path: Path
) -> None:
    server = farm.start(database.server_url)
    with Client(server.target) as client:
        table = seat_everyone(client, 2)
        play_to_end([client], random.Random(3), table)
    out = tmp_path / "records"

    def export() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*bergen_command(), "export", "--out", str(out), "--server", server.target],
            capture_output=True,
            text=True,
            timeout=60,
        )

    first = export()
    assert first.returncode == ExitStatus.SUCCESS, first.stderr
    exported = (out / f"{table.match_id}.json").read_bytes()
    assert export().returncode == ExitStatus.SUCCESS  # nothing changed: nothing to say
    access = Access(database.owner_url)
    seat = next(r for r in access.rows(table.match_id) if r.type == "SeatTaken")
    access.rewrite(table.match_id, seat.seq, {**seat.payload, "name": "someone else"})
    again = export()
    assert again.returncode == ExitStatus.INVALID, again.stderr
    assert f"{table.match_id}: the stored log changed since it was exported" in again.stderr
    assert (out / f"{table.match_id}.json").read_bytes() == exported


def test_verify_chain_names_a_row_whose_authenticator_fails(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = open_store(url, upgrade=True, log_keys=LogKeys.generate())
    try:
        store.append(Append("m", 0, [NewEvent("Noted", 1, {"n": i}) for i in range(3)]))
        assert store.verify_chain("m").ok
        seq = Access(url).append("m", "Noted", {"n": 99}, Access(url).rows("m")[-1].metadata)
        report = store.verify_chain("m")
        assert (report.bad_seq, report.fault) == (seq, ChainFault.UNAUTHENTIC), report
    finally:
        store.close()


def test_rows_read_after_a_head_the_store_knows_are_checked(database: Database) -> None:
    """A store that knows a stream's head (it wrote it) reads only what follows it, and
    checks every such row: one a key holder wrote is read, one with a made-up authenticator
    or one that does not link to the head is refused."""
    keys = LogKeys.generate()
    store = open_store(database.server_url, upgrade=database.backend == "sqlite", log_keys=keys)
    other = open_store(database.server_url, log_keys=keys)  # another replica
    access = Access(database.server_url)
    try:
        store.append(Append("m", 0, [NewEvent("Noted", 1, {"n": i}) for i in range(3)]))
        assert store.read_rows("m", 4) == ()
        other.append(Append("m", 3, [NewEvent("Noted", 1, {"n": 3})]))
        assert [(r.seq, r.payload) for r in store.read_rows("m", 4)] == [(4, {"n": 3})]
        fresh = open_store(database.server_url, log_keys=keys)
        try:  # the same rows as a store that knows no head reads
            assert fresh.read_rows("m", 4) == store.read_rows("m", 4)
        finally:
            fresh.close()
        seq = access.append("m", "Noted", {"n": 99}, access.rows("m")[-1].metadata)
        with pytest.raises(LogTampered, match=f"seq {seq} was not written by this server"):
            store.read_rows("m", 5)

        store.append(Append("chain", 0, [NewEvent("Noted", 1, {"n": 0})]))
        metadata = access.rows("chain")[-1].metadata
        unlinked = access.append(
            "chain", "Noted", {"n": 1}, metadata, keys=keys, prev_hash=b"x" * 32
        )
        with pytest.raises(LogTampered, match=f"seq {unlinked} does not link"):
            store.read_rows("chain", 2)

        store.append(Append("gap", 0, [NewEvent("Noted", 1, {"n": 0})]))
        metadata = access.rows("gap")[-1].metadata
        access.append("gap", "Noted", {"n": 2}, metadata, keys=keys, skip=1)  # seq 3, no 2
        with pytest.raises(LogTampered, match="seq 2 is missing"):
            store.read_rows("gap", 2)
    finally:
        store.close()
        other.close()
