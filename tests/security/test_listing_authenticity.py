"""The match listing and the watch streams take only authentic rows, like a match's fold.

An attacker holding the INSERT role of deploy/grants.sql (on SQLite: the file) appends rows
correctly chained to a match's head, but cannot make their authenticator: ListMatches must
answer for those matches as before, list no match the attacker made up, and keep listing the
changes of every other match, also after a restart; a watcher of the match is not sent the
forged event.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import grpc
import psycopg
from e2e.client import Client, Watcher, seat_everyone
from e2e.refusals import refusal
from e2e.servers import ServerFarm, ServerProcess

from bergen.api.chain import canonical_json, content_bytes, event_hash, new_salt
from bergen.api.stored import GENESIS_HASH
from bergen.v1 import bergen_pb2 as pb

from .conftest import Database
from .test_log_authenticity import Access, seat_metadata

Listed = tuple[str, int, tuple[str, ...], tuple[int, ...], int]


def listed(server: ServerProcess) -> dict[str, Listed]:
    """Every listed match: (name, phase, players, scores, version) by id."""
    out: dict[str, Listed] = {}
    token = ""
    with Client(server.target) as client:
        while True:
            page = client.stub.ListMatches(
                pb.ListMatchesRequest(page_size=100, page_token=token), timeout=10
            )
            for m in page.matches:
                out[m.match_id] = (
                    m.name, m.phase, tuple(m.players), tuple(m.scores), m.version
                )  # fmt: skip
            token = page.next_page_token
            if not token:
                return out


@contextmanager
def connected(url: str) -> Iterator[Any]:
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        try:
            yield conn
        finally:
            conn.close()
    else:
        with psycopg.connect(url, autocommit=True) as conn:
            yield conn


def forge_match(url: str, match_id: str, payload: dict[str, Any], metadata: str) -> None:
    """Insert a MatchCreated opening a new stream, chained from the genesis hash, with an
    authenticator made up (all the INSERT role allows)."""
    sqlite = url.startswith("sqlite")
    text = canonical_json(payload, "payload").decode()
    salt = new_salt()
    content = content_bytes(match_id, 1, "MatchCreated", 1, text.encode(), metadata.encode())
    digest = event_hash(GENESIS_HASH, salt, content)
    at = datetime.now(UTC)
    sql = (
        "INSERT INTO events (stream_id, seq, type, schema_version, payload, metadata, prev_hash,"
        " hash, salt, recorded_at, key_id, mac"
        + (", position) VALUES (?, 1, 'MatchCreated', 1, ?, ?, ?, ?, ?, ?, 'k1', ?,"
           " (SELECT max(position) + 1 FROM events))" if sqlite else
           ") VALUES (%s, 1, 'MatchCreated', 1, %s::json, %s::json, %s, %s, %s, %s, 'k1', %s)")
    )  # fmt: skip
    with connected(url) as conn:
        conn.execute(
            sql,
            (match_id, text, metadata, GENESIS_HASH, digest, salt,
             at.isoformat(sep=" ") if sqlite else at, secrets.token_bytes(32)),
        )  # fmt: skip


def test_forged_rows_change_nothing_listed_and_other_matches_keep_being_listed(
    farm: ServerFarm, database: Database
) -> None:
    server = farm.start(database.server_url)
    access = Access(database.server_url)
    with Client(server.target) as client:
        playing = seat_everyone(client, 2, name="playing")
        ending = seat_everyone(client, 2, name="ending")
        seating = client.create(2, name="seating").match_id
        client.join(seating, "ada")
        later = client.create(2, name="joined later").match_id
    before = listed(server)
    assert before[seating][2] == ("ada", "")

    rows = access.rows(playing.match_id)
    hand = max(r.payload.get("hand", 0) for r in rows)
    forged = {
        playing.match_id: access.append(
            playing.match_id,
            "PointsScored",
            {"hand": hand, "side": 1, "points": 14, "reason": "domino", "base": 14, "seat": 1},
            rows[-1].metadata,
        ),
        ending.match_id: access.append(
            ending.match_id,
            "MatchEnded",
            {
                "reason": "target",
                "winner_side": 0,
                "scores": [61, 0],
                "resigned_seat": None,
                "note": "",
            },
            access.rows(ending.match_id)[-1].metadata,
        ),
        seating: access.append(
            seating,
            "SeatTaken",
            {"seat": 1, "name": "mallory", "client_seed": ""},
            seat_metadata("bgs_" + secrets.token_urlsafe(32)),
        ),
    }
    created = access.rows(playing.match_id)[0]
    forge_match(
        database.server_url,
        "forged-match",
        {**created.payload, "match_id": "forged-match", "name": "made up"},
        created.metadata,
    )
    # Written after the forged rows: once they are listed, the listing has passed them.
    with Client(server.target) as client:
        client.join(later, "bo")
        fresh = client.create(2, name="created after").match_id

    after = listed(server)
    assert after[later][2] == ("bo", "") and after[later][4] == before[later][4] + 1
    assert after[fresh][0] == "created after"
    assert "forged-match" not in after
    for match_id in (playing.match_id, ending.match_id, seating):
        assert after[match_id] == before[match_id], match_id
    log = server.log()
    for match_id, seq in forged.items():
        assert f"LOG TAMPERED: match {match_id} seq {seq} is not listed" in log, match_id
    assert "LOG TAMPERED: match forged-match seq 1 is not listed" in log

    assert server.terminate() == 0
    server = farm.start(database.server_url)
    with Client(server.target) as client:
        client.join(fresh, "cy")
    again = listed(server)
    assert again[fresh][2] == ("cy", "")
    assert "forged-match" not in again
    for match_id in (playing.match_id, ending.match_id, seating):
        assert again[match_id] == before[match_id], match_id


def test_a_watcher_is_not_sent_a_forged_event_that_the_rules_would_allow(
    farm: ServerFarm, database: Database
) -> None:
    server = farm.start(database.server_url)
    replica = farm.start(database.server_url, name="replica")
    with Client(server.target) as client, Client(replica.target) as other:
        # A seat taken in a match of three seats is what the rules give: only the
        # authenticator tells it from a real one.
        target = client.create(3, name="watched").match_id
        client.join(target, "ada")
        witness = client.create(2, name="witness").match_id
        watchers = [Watcher(client, m).started() for m in (target, witness)]
        forged = Access(database.server_url).append(
            target,
            "SeatTaken",
            {"seat": 1, "name": "mallory", "client_seed": ""},
            seat_metadata("bgs_" + secrets.token_urlsafe(32)),
        )
        # Written by the other replica after the forged row: this server's follower reads
        # them in that order, so once the witness's watcher has it, the forged row is past.
        seq = other.join(witness, "bo").view.version
        watchers[1].wait_for_seq(seq)
        # The watcher of the tampered match is told so, as every call on it is.
        assert watchers[0].finished.wait(10), "the watch of a tampered match did not end"
        for w in watchers:
            w.cancel()
    sent = [e for e in watchers[0].events() if e.seq >= forged]
    assert sent == [], sent
    assert watchers[0].error is not None
    told = refusal(watchers[0].error)
    assert (told.code, told.reason) == (grpc.StatusCode.DATA_LOSS, "LOG_TAMPERED"), told
    assert f"LOG TAMPERED: match {target} seq {forged} is not delivered" in server.log()


def test_a_row_that_does_not_decode_holds_up_neither_the_listing_nor_the_watchers(
    farm: ServerFarm, database: Database
) -> None:
    server = farm.start(database.server_url)
    replica = farm.start(database.server_url, name="replica")
    with Client(server.target) as client, Client(replica.target) as other:
        target = client.create(2, name="target").match_id
        witness = client.create(2, name="witness").match_id
        watcher = Watcher(client, witness).started()
        head = Access(database.server_url).rows(target)[-1]
        sqlite = database.backend == "sqlite"
        with connected(database.server_url) as conn:
            # Metadata without its rules version: the row cannot be read as an event.
            conn.execute(
                "INSERT INTO events (stream_id, seq, type, schema_version, payload, metadata,"
                " prev_hash, hash, salt"
                + (", position) VALUES (?, ?, 'SeatTaken', 1, '{}', '{}', ?, ?, ?,"
                   " (SELECT max(position) + 1 FROM events))" if sqlite else
                   ") VALUES (%s, %s, 'SeatTaken', 1, '{}', '{}', %s, %s, %s)"),
                (target, head.seq + 1, head.hash, secrets.token_bytes(32), new_salt()),
            )  # fmt: skip
        # Written by the other replica after that row, so read by this server after it.
        fresh = other.create(2, name="created after").match_id
        seq = other.join(witness, "bo").view.version
        watcher.wait_for_seq(seq)
        watcher.cancel()
    listing = listed(server)
    assert listing[witness][2] == ("bo", "")
    assert listing[fresh][0] == "created after"
    assert f"stream {target} seq {head.seq + 1}: undecodable event row" in server.log()
