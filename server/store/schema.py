"""The tables as SQLAlchemy metadata: what the migrations must produce, on both backends.

The hot paths speak SQL through psycopg and sqlite3 directly; this metadata exists so that
Alembic's comparison (`alembic check`) can prove the migrated schema is the declared one.
"""

from __future__ import annotations

import sqlalchemy as sa

from bergen.api.stored import HASH_SIZE, SALT_SIZE

from .limits import (
    COMMAND_ID_MAX,
    EVENT_TYPE_MAX,
    KEY_ID_MAX,
    PROJECTION_NAME_MAX,
    STREAM_ID_MAX,
)

__all__ = ["COMMAND_ID_MAX", "EVENT_TYPE_MAX", "STREAM_ID_MAX", "metadata"]

OPENED = "seq = 1 AND type = 'MatchCreated'"
"""The rows `ix_events_match_opened` holds: each match's first (a query that names these
terms as they are written here may use it)."""
ENDED = "type = 'MatchEnded'"
"""The rows `ix_events_match_ended` holds: each match's end."""

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "pk": "pk_%(table_name)s",
    }
)

events = sa.Table(
    "events",
    metadata,
    # Bytewise order on both backends ("C" on PostgreSQL), so listing pages the same way.
    sa.Column(
        "stream_id",
        sa.String(STREAM_ID_MAX).with_variant(
            sa.String(STREAM_ID_MAX, collation="C"), "postgresql"
        ),
        nullable=False,
    ),
    # Gap-free from 1 within a stream; the store writes seq = expected_version + i.
    sa.Column("seq", sa.BigInteger(), nullable=False),
    # Global order for readers following every stream. PostgreSQL: an identity column;
    # SQLite: max + 1 under the database's single write lock.
    sa.Column("position", sa.BigInteger(), sa.Identity(always=True), nullable=False),
    sa.Column("type", sa.String(EVENT_TYPE_MAX), nullable=False),
    sa.Column("schema_version", sa.Integer(), nullable=False),
    # The RFC 8785 text of the payload / of {actor, command_id, rules_version}. PostgreSQL's
    # `json` keeps the text as written (`jsonb` would reject \u0000 and reorder keys).
    sa.Column("payload", sa.JSON(), nullable=False),
    sa.Column("metadata", sa.JSON(), nullable=False),
    # Set on the first event of a batch appended with a command id: the idempotency key.
    sa.Column("command_id", sa.String(COMMAND_ID_MAX), nullable=True),
    sa.Column("prev_hash", sa.LargeBinary(HASH_SIZE), nullable=False),
    sa.Column("hash", sa.LargeBinary(HASH_SIZE), nullable=False),
    sa.Column("salt", sa.LargeBinary(SALT_SIZE), nullable=False),
    # The authenticator of the whole row: HMAC-SHA256 under the servers' log key of this id
    # (bergen.api.chain.row_mac). NULL only in rows written before migration 0003, which a
    # server refuses to fold.
    sa.Column("key_id", sa.String(KEY_ID_MAX), nullable=True),
    sa.Column("mac", sa.LargeBinary(HASH_SIZE), nullable=True),
    # PostgreSQL: the writing transaction's id (defaulted by the migration), so that readers
    # of the global order expose only rows no in-flight transaction can precede. NULL on SQLite,
    # whose single writer commits in position order.
    sa.Column("tx_id", sa.BigInteger(), nullable=True),
    sa.Column(
        "recorded_at",
        sa.DateTime(timezone=True),
        nullable=False,
        server_default=sa.func.current_timestamp(),
    ),
    sa.PrimaryKeyConstraint("stream_id", "seq"),
    sa.UniqueConstraint("position"),
    sa.CheckConstraint("seq >= 1", name="seq_positive"),
    sa.Index("ix_events_stream_id_command_id", "stream_id", "command_id", unique=True),
    sa.Index("ix_events_tx_id_position", "tx_id", "position"),
    # The two kinds of row read apart from the rest of the log, a match's opening (the
    # listing's audit looks for those not listed) and a match's end (the ratings fold only
    # those): each partial index holds one row a match, so neither read passes over the
    # hundred or so other rows of every match. Migration 0013 builds them CONCURRENTLY.
    sa.Index(
        "ix_events_match_opened",
        "stream_id",
        "tx_id",
        "position",
        postgresql_where=sa.text(OPENED),
        sqlite_where=sa.text(OPENED),
    ),
    sa.Index(
        "ix_events_match_ended",
        "tx_id",
        "position",
        postgresql_where=sa.text(ENDED),
        sqlite_where=sa.text(ENDED),
    ),
)

# --- read models: rows folded from the events, never the truth -----------------------------

projection_positions = sa.Table(
    "projection_positions",
    metadata,
    sa.Column("name", sa.String(PROJECTION_NAME_MAX), nullable=False),
    # The global position of the last event the projection has folded (0: none yet). Written
    # in the same transaction as the projection's rows; its row lock lets one replica fold a
    # batch at a time.
    sa.Column("position", sa.BigInteger(), nullable=False),
    # The authenticator of the row (bergen.server.store.sealed): the key id and the HMAC of
    # the projection's name and position. NULL: written by no server holding the log keys.
    sa.Column("key_id", sa.String(KEY_ID_MAX), nullable=True),
    sa.Column("mac", sa.LargeBinary(HASH_SIZE), nullable=True),
    sa.PrimaryKeyConstraint("name"),
)

match_list = sa.Table(
    "match_list",
    metadata,
    sa.Column(
        "match_id",
        sa.String(STREAM_ID_MAX).with_variant(
            sa.String(STREAM_ID_MAX, collation="C"), "postgresql"
        ),
        nullable=False,
    ),
    # The global position of the match's MatchCreated: the listing is newest first by it, and
    # a page token names the last one given.
    sa.Column("listed", sa.BigInteger(), nullable=False),
    sa.Column("name", sa.Text(), nullable=False),
    sa.Column("phase", sa.String(20), nullable=False),
    sa.Column("seats", sa.Integer(), nullable=False),
    sa.Column("partnerships", sa.Boolean(), nullable=False),
    sa.Column("preset", sa.Text(), nullable=False),
    # JSON arrays: the name in each seat ("" for an empty one) and each side's score.
    sa.Column("players", sa.Text(), nullable=False),
    sa.Column("scores", sa.Text(), nullable=False),
    sa.Column("version", sa.BigInteger(), nullable=False),
    # When the match's MatchCreated and its first Dealt were recorded (their rows'
    # recorded_at; started_at NULL: still seating; created_at NULL: listed by a server
    # before these columns, during a rolling restart), and the hand in play or the last one
    # played.
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("hand", sa.Integer(), nullable=False, server_default="0"),
    # For a rematch, the match it follows (its MatchCreated's metadata): its free seats are
    # kept for that match's players. NULL for any other match.
    sa.Column("rematch_of", sa.Text(), nullable=True),
    # JSON arrays: each seat's registered player ("" for none) and whether it is a program
    # (NULL: listed before these columns); and whether the match is rated.
    sa.Column("player_ids", sa.Text(), nullable=True),
    sa.Column("bots", sa.Text(), nullable=True),
    sa.Column("rated", sa.Boolean(), nullable=False, server_default=sa.false()),
    # The authenticator of the row (bergen.server.store.sealed): the key id and the HMAC of
    # every column above, the match id and its last seq folded among them; a row whose
    # authenticator does not verify is rebuilt from the events before it is served. A
    # player's row below is checked against its match's.
    sa.Column("key_id", sa.String(KEY_ID_MAX), nullable=True),
    sa.Column("mac", sa.LargeBinary(HASH_SIZE), nullable=True),
    sa.PrimaryKeyConstraint("match_id"),
    sa.UniqueConstraint("listed"),
    sa.Index("ix_match_list_phase_listed", "phase", "listed"),
)

match_list_players = sa.Table(
    "match_list_players",
    metadata,
    # One row per distinct player name in a match, with the match's phase and listing order
    # copied, so a player's matches (of a phase) page by index alone.
    sa.Column(
        "match_id",
        sa.String(STREAM_ID_MAX).with_variant(
            sa.String(STREAM_ID_MAX, collation="C"), "postgresql"
        ),
        nullable=False,
    ),
    sa.Column("name", sa.Text(), nullable=False),
    sa.Column("phase", sa.String(20), nullable=False),
    sa.Column("listed", sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint("match_id", "name"),
    sa.Index("ix_match_list_players_name_listed", "name", "listed"),
    sa.Index("ix_match_list_players_name_phase_listed", "name", "phase", "listed"),
)


# --- the ratings (RATINGS.md): folded from rated matches' ends, in global order ------------
# A rating and a rated match end with their authenticator (key_id, mac:
# bergen.server.store.sealed) over their columns as written; a history row is checked against
# its match's. A row read that does not verify has the ratings folded again.


def _id() -> sa.types.TypeEngine[str]:
    """A player's or a match's id, compared bytewise on both backends."""
    return sa.String(STREAM_ID_MAX).with_variant(
        sa.String(STREAM_ID_MAX, collation="C"), "postgresql"
    )


player_ratings = sa.Table(
    "player_ratings",
    metadata,
    # A player's rating in one pool, with its name and bot flag as its seats gave them, so
    # that a leaderboard's page is one indexed read.
    sa.Column("player_id", _id(), nullable=False),
    sa.Column("pool", sa.String(8), nullable=False),
    sa.Column("name", sa.Text(), nullable=False),
    sa.Column("bot", sa.Boolean(), nullable=False),
    sa.Column("mu", sa.Double(), nullable=False),
    sa.Column("sigma", sa.Double(), nullable=False),
    # The rated matches the rating was made of.
    sa.Column("matches", sa.Integer(), nullable=False),
    # The leaderboard's keys (RATINGS.md section 4), each ascending: the rating shown and
    # mu - 3 sigma negated, then matches and player_id; `shown` is false while provisional.
    # A page after a given key is one range of the index.
    sa.Column("shown", sa.Boolean(), nullable=False),
    sa.Column("rank_rating", sa.Integer(), nullable=False),
    sa.Column("rank_conservative", sa.Double(), nullable=False),
    sa.Column("key_id", sa.String(KEY_ID_MAX), nullable=True),
    sa.Column("mac", sa.LargeBinary(HASH_SIZE), nullable=True),
    sa.PrimaryKeyConstraint("player_id", "pool"),
    sa.Index(
        "ix_player_ratings_board",
        "pool",
        "shown",
        "rank_rating",
        "rank_conservative",
        "matches",
        "player_id",
    ),
)

rating_history = sa.Table(
    "rating_history",
    metadata,
    # The rated matches a player played in a pool, by the global position of each match's
    # end (the record's rated.order): what the player's history shows (the rating before and
    # after, the seat, the place) is read from the match's sealed row in rated_matches, so
    # these rows hold no more than their key and carry no authenticator.
    sa.Column("player_id", _id(), nullable=False),
    sa.Column("pool", sa.String(8), nullable=False),
    sa.Column("rated_order", sa.BigInteger(), nullable=False),
    # A player's history in a pool, newest first, is a range of this key read backwards (and
    # for every pool, the pools' ranges merged); a match's rows are found by its players. One
    # index only: a rebuild writes a row for every seat of every rated match.
    sa.PrimaryKeyConstraint("player_id", "pool", "rated_order"),
)

rated_matches = sa.Table(
    "rated_matches",
    metadata,
    # Every rated match applied, in its pool's order: what a player's history shows, and
    # what a late arrival is applied again with (an end that commits after a later one was
    # folded, PostgreSQL's global order).
    sa.Column("match_id", _id(), nullable=False),
    sa.Column("pool", sa.String(8), nullable=False),
    sa.Column("rated_order", sa.BigInteger(), nullable=False),
    # JSON: each seat's holder ({player, name, bot}), each side's seats, each side's place.
    sa.Column("seats", sa.Text(), nullable=False),
    sa.Column("sides", sa.Text(), nullable=False),
    sa.Column("places", sa.Text(), nullable=False),
    # Each seat's rating before the match and after it, in seat order, packed
    # (bergen.server.store.ratings: mu, sigma before; mu, sigma after; the rated matches after).
    sa.Column("ratings", sa.LargeBinary(), nullable=False),
    sa.Column("ended_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("key_id", sa.String(KEY_ID_MAX), nullable=True),
    sa.Column("mac", sa.LargeBinary(HASH_SIZE), nullable=True),
    sa.PrimaryKeyConstraint("match_id"),
    sa.Index("ix_rated_matches_pool_rated_order", "pool", "rated_order"),
)

# --- the transparency log: a Merkle tree over the global order (bergen.server.tlog) -------

tlog_leaves = sa.Table(
    "tlog_leaves",
    metadata,
    # Leaf `idx` of the tree: the event at global `position` (its stream and seq: a seq is
    # a leaf once only, so a log rolled back and written again cannot enter the tree twice),
    # and the leaf's hash (bergen.api.checkpoints.event_leaf).
    sa.Column("idx", sa.BigInteger(), nullable=False),
    sa.Column("position", sa.BigInteger(), nullable=False),
    sa.Column("stream_id", _id(), nullable=False),
    sa.Column("seq", sa.BigInteger(), nullable=False),
    sa.Column("hash", sa.LargeBinary(HASH_SIZE), nullable=False),
    sa.PrimaryKeyConstraint("idx"),
    sa.UniqueConstraint("position"),
    sa.UniqueConstraint("stream_id", "seq"),
)

tlog_nodes = sa.Table(
    "tlog_nodes",
    metadata,
    # The hash of the complete subtree of `level` (1 and up) and index `idx`: the leaves
    # idx * 2**level up to (idx + 1) * 2**level, not included.
    sa.Column("level", sa.SmallInteger(), nullable=False),
    sa.Column("idx", sa.BigInteger(), nullable=False),
    sa.Column("hash", sa.LargeBinary(HASH_SIZE), nullable=False),
    sa.PrimaryKeyConstraint("level", "idx"),
)

match_records = sa.Table(
    "match_records",
    metadata,
    # The signed record of an ended match as the server served it (bergen.server.store.records):
    # a cache of what its events make, checked by its authenticator before it is served.
    sa.Column(
        "match_id",
        sa.String(200).with_variant(sa.String(200, collation="C"), "postgresql"),
        nullable=False,
    ),
    # The public key that signed it (hex): a record signed by another key is made again.
    sa.Column("public_key", sa.Text(), nullable=False),
    sa.Column("events", sa.BigInteger(), nullable=False),
    sa.Column("head", sa.LargeBinary(32), nullable=False),
    sa.Column("record", sa.Text(), nullable=False),
    sa.Column("log_keys", sa.Text(), nullable=False),
    sa.Column("key_id", sa.Text(), nullable=True),
    sa.Column("mac", sa.LargeBinary(), nullable=True),
    sa.PrimaryKeyConstraint("match_id"),
)

archived_matches = sa.Table(
    "archived_matches",
    metadata,
    # The matches `bergen archive` exported and removed (migration 0016): their rows before
    # `end_seq` (their MatchEnded) may be deleted, and are; `events` and `head` are the log
    # the archived record pins. Append-only; the server's role only reads it.
    sa.Column(
        "match_id",
        sa.String(200).with_variant(sa.String(200, collation="C"), "postgresql"),
        nullable=False,
    ),
    sa.Column("end_seq", sa.BigInteger(), nullable=False),
    sa.Column("events", sa.BigInteger(), nullable=False),
    sa.Column("head", sa.LargeBinary(32), nullable=False),
    sa.Column("record_sha256", sa.Text(), nullable=False),
    sa.Column(
        "archived_at",
        sa.DateTime(timezone=True),
        nullable=False,
        server_default=sa.func.current_timestamp(),
    ),
    sa.PrimaryKeyConstraint("match_id"),
)
