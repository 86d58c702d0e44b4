"""The SQL both stores say alike, written once: each dialect fills in its parameter marker,
its casts and its test of a column against a list of values.

What only one of them says stays with it: SQLite's write-locked head read and its positions
assigned in commit order, PostgreSQL's prepared binary INSERT, its commit-safe global order
and its row locks.
"""

from __future__ import annotations

from dataclasses import dataclass

from .listing import SUMMARY_COLUMNS


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one database spells what differs: a parameter, a parameter cast to a 64-bit or
    a 32-bit integer, a JSON column read as text, and a column among a list of values."""

    param: str
    int8: str = ""
    int4: str = ""
    json_text: str = ""
    any_list: bool = False
    """True: a list is one array parameter (`= ANY(%s)`); False: one marker a value."""

    def among(self, column: str, n: int) -> str:
        """`column` is one of `n` values (given as one list, or as `n` parameters)."""
        if self.any_list:
            return f"{column} = ANY({self.param})"
        return f"{column} IN ({', '.join([self.param] * n)})"


NO_LIMIT = 2**63 - 1
"""A page's bound when none is given: after every listed time."""

SQLITE = Dialect("?")
POSTGRES = Dialect("%s", int8="::bigint", int4="::int", json_text="::text", any_list=True)

_SUMMARY_CASTS = (
    "", "bigint", "", "", "int", "", "", "", "", "bigint", "", "", "int", "", "", "", "", "", "",
)  # fmt: skip
"""The cast of each of `SUMMARY_COLUMNS`' parameters (none, or a dialect's bigint or int)."""


class Statements:
    """The statements of the event store and the match listing in one dialect."""

    def __init__(self, d: Dialect) -> None:
        self.dialect = d
        p, big = d.param, d.param + d.int8
        text = d.json_text
        self.event_columns = (
            f"stream_id, seq, position, type, schema_version, payload{text}, metadata{text},"
            " recorded_at, prev_hash, hash, salt, key_id, mac"
        )
        cols = self.event_columns
        self.command_head = f"SELECT seq FROM events WHERE stream_id = {p} AND command_id = {p}"
        """The first seq a command id wrote in a stream."""
        self.stream_from = (
            f"SELECT {cols} FROM events WHERE stream_id = {p} AND seq >= {big} ORDER BY seq"
        )
        """A stream's events from a seq on."""
        self.stream_page = f"{self.stream_from} LIMIT {p}"
        """A stream's events from a seq on, at most so many."""
        self.whole_stream = f"SELECT {cols} FROM events WHERE stream_id = {p} ORDER BY seq"
        self.streams_after = (
            f"SELECT stream_id, max(seq) FROM events WHERE stream_id > {p}"
            f" GROUP BY stream_id ORDER BY stream_id LIMIT {big}"
        )
        """Streams and their versions by id, after an id, at most so many."""

        casts = {"": "", "bigint": d.int8, "int": d.int4}
        values = ", ".join(p + casts[c] for c in _SUMMARY_CASTS)
        self.upsert_summary = (
            f"INSERT INTO match_list ({SUMMARY_COLUMNS}) VALUES ({values})"
            " ON CONFLICT (match_id) DO UPDATE SET "
            + ", ".join(
                f"{c} = excluded.{c}"
                for c in (c.strip() for c in SUMMARY_COLUMNS.split(","))
                if c != "match_id"
            )
        )
        m_columns = ", ".join(f"m.{c.strip()}" for c in SUMMARY_COLUMNS.split(","))
        # Whether the match's next event lies at or before the listing's position in the
        # global order (SQLite: by position; PostgreSQL: by transaction, then position): a
        # row listed at an older version than the listing has folded.
        at = (
            f"(n.tx_id, n.position) <= (SELECT c.tx_id, c.position FROM events c"
            f" WHERE c.position = {big})"
            if d.any_list
            else f"n.position <= {big}"
        )
        stale = (
            "EXISTS (SELECT 1 FROM events n WHERE n.stream_id = m.match_id"
            f" AND n.seq = m.version + 1 AND {at})"
        )
        listed = f"SELECT {m_columns}, {stale}, false FROM match_list m"
        by_player = (
            f"SELECT {m_columns}, {stale}, (p.phase <> m.phase OR p.listed <> m.listed)"
            " FROM match_list_players p JOIN match_list m ON m.match_id = p.match_id"
        )
        page = f" ORDER BY m.listed DESC LIMIT {big}"
        player_page = f" ORDER BY p.listed DESC LIMIT {big}"
        self.pages = {
            (False, False): f"{listed} WHERE m.listed < {big}" + page,
            (True, False): f"{listed} WHERE m.phase = {p} AND m.listed < {big}" + page,
            (False, True): f"{by_player} WHERE p.name = {p} AND p.listed < {big}" + player_page,
            (True, True): f"{by_player} WHERE p.name = {p} AND p.phase = {p}"
            f" AND p.listed < {big}" + player_page,
        }
        """The listing's pages by (a phase given, a player given)."""
        self.insert_player = (
            "INSERT INTO match_list_players (match_id, name, phase, listed)"
            f" VALUES ({p}, {p}, {p}, {big})"
        )
        self.position = f"SELECT position, key_id, mac FROM projection_positions WHERE name = {p}"
        self.set_position = (
            f"UPDATE projection_positions SET position = {big}, key_id = {p}, mac = {p}"
            f" WHERE name = {p}"
        )
        # The matches opened at or before the listing's position (as `at` above) and not
        # listed: rows deleted from the listing.
        opened_at = (
            f"(e.tx_id, e.position) <= (SELECT c.tx_id, c.position FROM events c"
            f" WHERE c.position = {big})"
            if d.any_list
            else f"e.position <= {big}"
        )
        self.missing = (
            "SELECT e.stream_id FROM events e WHERE e.seq = 1 AND e.type = 'MatchCreated'"
            f" AND {opened_at} AND NOT EXISTS"
            " (SELECT 1 FROM match_list m WHERE m.match_id = e.stream_id)"
        )
        self.new_position = (
            f"INSERT INTO projection_positions (name, position) VALUES ({p}, 0)"
            " ON CONFLICT (name) DO NOTHING"
        )

    def summaries(self, n: int) -> str:
        """The listing's rows of `n` matches."""
        return f"SELECT {SUMMARY_COLUMNS} FROM match_list WHERE {self.dialect.among('match_id', n)}"

    def versions(self, n: int) -> str:
        """The listed versions of `n` matches."""
        return f"SELECT match_id, version FROM match_list WHERE {self.dialect.among('match_id', n)}"

    def drop_summaries(self, n: int) -> str:
        """Delete the listing's rows of `n` matches."""
        return f"DELETE FROM match_list WHERE {self.dialect.among('match_id', n)}"

    def drop_players(self, n: int) -> str:
        """Delete the player rows of `n` matches."""
        return f"DELETE FROM match_list_players WHERE {self.dialect.among('match_id', n)}"
