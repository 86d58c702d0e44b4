"""The event store: append-only streams of events on PostgreSQL or on an embedded SQLite file.

    store = open_store()                      # BERGEN_DATABASE_URL, else sqlite:///./bergen.db
    result = store.append(Append("match-1", 0, [NewEvent("MatchCreated", 1, {...})]))
    events = store.read_stream("match-1")

`upgrade_to_head(url)` applies the migrations; `schema_is_behind(url)` says whether it is needed.
"""

from __future__ import annotations

from bergen.api.stored import ChainFault, ChainReport, EventMetadata, EventRow, StoredEvent

from ..keys import LogKeys
from .listing import MatchList, MatchSummary
from .model import Append, AppendResult, EventStore, NewEvent, StreamInfo
from .ratings import RatingsTables
from .records import SqlRecords
from .routed import lagging, lagging_reads
from .tlog import Leaf, SqlTlog, TlogFold
from .url import DATABASE_URL_ENV, DEFAULT_DATABASE_URL, backend_of, database_url

__all__ = [
    "DATABASE_URL_ENV",
    "DEFAULT_DATABASE_URL",
    "Append",
    "AppendResult",
    "ChainFault",
    "ChainReport",
    "EventMetadata",
    "EventRow",
    "EventStore",
    "Leaf",
    "MatchList",
    "MatchSummary",
    "NewEvent",
    "RatingsTables",
    "SqlRecords",
    "SqlTlog",
    "StoredEvent",
    "StreamInfo",
    "TlogFold",
    "backend_of",
    "database_url",
    "lagging",
    "lagging_reads",
    "open_store",
    "schema_is_behind",
    "upgrade_to_head",
]


def upgrade_to_head(url: str | None = None) -> None:
    """Apply every migration not yet applied to `url` (default: the setting).

    Raises the driver's error if the database cannot be reached.
    """
    from .migrate import upgrade_to_head as upgrade

    upgrade(url)


def schema_is_behind(url: str | None = None) -> bool:
    """True when the database at `url` lacks a migration this version ships."""
    from .migrate import schema_is_behind as behind

    return behind(url)


def open_store(
    url: str | None = None,
    *,
    upgrade: bool = False,
    log_keys: LogKeys | None = None,
    read_url: str | None = None,
) -> EventStore:
    """The store for `url` (default: BERGEN_DATABASE_URL, else ./bergen.db), chosen by scheme.

    With `upgrade`, applies the migrations first. With `log_keys` (what the server always
    gives), every row written is authenticated and every row read for folding is checked
    (`read_rows` raises LogTampered). Raises ValueError for an unsupported URL,
    StorageUnavailable if the database cannot be reached (the driver's error while migrating).

    With `read_url` (a hot standby of the PostgreSQL database at `url`), the store is a
    `RoutedStore`: reads made in `lagging_reads()` are served by the standby, never older
    than what this process has seen (bergen.server.store.routed). Raises ValueError when
    either URL is not PostgreSQL.
    """
    url = url or database_url()
    backend = backend_of(url)
    if upgrade:
        upgrade_to_head(url)
    if read_url is not None:
        if backend != "postgresql" or backend_of(read_url) != "postgresql":
            raise ValueError("a read database needs PostgreSQL for both URLs")
        from .postgres import PostgresEventStore
        from .routed import RoutedStore, StoreWal

        primary = PostgresEventStore(url, log_keys=log_keys, flushed_folds=True)
        try:
            standby = PostgresEventStore(read_url, log_keys=log_keys)
        except BaseException:
            primary.close()
            raise
        return RoutedStore(primary, standby, StoreWal(primary, standby))
    if backend == "postgresql":
        from .postgres import PostgresEventStore

        return PostgresEventStore(url, log_keys=log_keys)
    from .sqlite import SQLiteEventStore

    return SQLiteEventStore(url, log_keys=log_keys)
