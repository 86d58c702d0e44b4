"""The server's database role cannot choose where an event lies in the log: rows it inserts
naming their own `position` (OVERRIDING SYSTEM VALUE) and `tx_id` get the sequence's next
position and their transaction's id instead, so a few thousand rows put at the next
positions no longer stop every later CreateMatch and Play."""

from __future__ import annotations

import random
import uuid

import psycopg
import pytest
from e2e.client import Client, play_random_move, seat_everyone
from e2e.servers import ServerFarm

from .conftest import Database

pytestmark = [pytest.mark.timeout(120), pytest.mark.postgres]

ROWS = 5_000


def test_rows_naming_the_next_positions_do_not_stop_the_server(
    farm: ServerFarm, deployed_pg: Database
) -> None:
    server = farm.start(deployed_pg.server_url)
    with Client(server.target) as client:
        client.create(2)
        with psycopg.connect(deployed_pg.server_url, autocommit=True) as conn:
            head = conn.execute("SELECT max(position) FROM events").fetchone()[0]
            junk = f"junk-{uuid.uuid4()}"
            # As the server's role: thousands of rows at the next positions, in one statement.
            conn.execute(
                "INSERT INTO events (stream_id, seq, position, tx_id, type, schema_version,"
                " payload, metadata, prev_hash, hash, salt, key_id, mac)"
                " OVERRIDING SYSTEM VALUE"
                " SELECT %s, g, %s + g, 1, 'Junk', 1, '{}', '{}', '\\x00', '\\x00', '\\x00',"
                " 'k1', '\\x00' FROM generate_series(1, %s) AS g",
                (junk, head, ROWS),
            )
            # And one far off, with a made-up transaction id.
            conn.execute(
                "INSERT INTO events (stream_id, seq, position, tx_id, type, schema_version,"
                " payload, metadata, prev_hash, hash, salt, key_id, mac)"
                " OVERRIDING SYSTEM VALUE"
                " VALUES (%s, %s, 1000000000000, 1, 'Junk', 1, '{}', '{}', '\\x00', '\\x00',"
                " '\\x00', 'k1', '\\x00')",
                (junk, ROWS + 1),
            )
        with psycopg.connect(deployed_pg.owner_url, autocommit=True) as owner:
            taken = owner.execute(
                "SELECT max(position), count(*) FILTER (WHERE tx_id = 1),"
                " (SELECT last_value FROM events_position_seq) FROM events WHERE stream_id = %s",
                (junk,),
            ).fetchone()
        assert taken is not None
        assert taken[0] < 1_000_000_000_000, "a row kept the position it named"
        assert taken[0] <= taken[2], "a row's position is not the sequence's"
        assert taken[1] == 0, "a row kept the transaction id it named"
        # Appends go on: a match is created, seated and played.
        table = seat_everyone(client, 2)
        play_random_move([client], random.Random(3), table)
        assert client.view(table.match_id).version > table.version
