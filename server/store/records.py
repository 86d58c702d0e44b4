"""The signed records of ended matches, kept once made.

A finished match's record is the same every time it is asked (its checkpoint is the one of
the tree that ends with its last event, and Ed25519 signatures are deterministic), so the
server keeps the text it served in `match_records` and serves it again instead of loading,
folding, proving and signing the match anew: what makes `ExportRecords` a read of stored
rows. The table is a cache, never the truth. Each row carries an authenticator like every
read model's (`bergen.server.store.sealed`) over its match, the key that signed it, the head
of the log it was made from (its number of events and last hash), the ids of the log keys
that authenticate that log, and its text. A row the database role edited or moved to
another match, one whose head is no longer its stream's, and one naming a log key this
server lacks are not served (a WARNING, counted in `repairs`): the record is made again from
the events, which refuse a log that was tampered with or cannot be checked, and the row is
written over. A row signed by another key than the server's now is made again too.

The SQL is written once for both backends, on the `Db` of the ratings' statements.
"""

from __future__ import annotations

import logging
import struct
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bergen.domain.errors import MatchArchived

from .ratings import Db
from .sealed import Seals

log = logging.getLogger(__name__)

RECORDS_TABLE = "match_records"
_NO_PRIVILEGE = "42501"
"""PostgreSQL's SQLSTATE for a privilege the role lacks."""
_CHUNK = 200
"""Parameters per statement: below every SQLite build's limit on bound parameters."""


_PACK = struct.Struct("<IIIIIq")
_TAG = b"match_records\0"


def record_message(values: Sequence[Any]) -> bytes:
    """The bytes a row's authenticator covers: the table's name, then its columns (match,
    public key, events, head in hex, text, log keys) packed in a fixed layout, as the ratings'
    rows are (bergen.server.store.ratings): each text's length and the number of events, then
    the texts in UTF-8. Before this layout, rows were sealed over their columns as a JSON
    array (`Seals.fault`), which escaped the whole record's text: most of the time a page of
    kept records took to serve. Raises struct.error or TypeError for a value that does not
    fit its column."""
    match_id, key, events, head, text, log_keys = values
    texts: str = match_id + key + head + text + log_keys
    return (
        _TAG
        + _PACK.pack(len(match_id), len(key), len(head), len(text), len(log_keys), events)
        + texts.encode()
    )


@dataclass(frozen=True, slots=True)
class Kept:
    """A record to keep: its match, the head of the log it was made from (its number of
    events and the last one's hash), its JSON text."""

    match_id: str
    events: int
    head: bytes
    text: str
    log_keys: str = ""
    """The ids of the log keys that authenticate the stream's rows, comma-separated: a server
    that no longer holds one of them cannot check the log, and does not serve the record."""


@dataclass(frozen=True, slots=True)
class Archived:
    """A match `bergen archive` exported and removed: its rows before `end_seq` (its
    MatchEnded) are gone, `events` and `head` are the log its archived record pins."""

    match_id: str
    end_seq: int
    events: int
    head: bytes
    archived_at: datetime


def archived_error(found: Archived) -> MatchArchived:
    """What a call on an archived match is answered: when it was archived, and where its
    record is."""
    at = found.archived_at.isoformat(timespec="seconds")
    return MatchArchived(
        f"match {found.match_id} was archived at {at}: its events are no longer served here;"
        " its signed record is in the operator's archive (bergen verify and bergen-replay"
        " --file read it)",
        match_id=found.match_id,
        archived_at=at,
    )


class SqlRecords:
    """The kept records on a backend that gives a `Db` (`reading`; autocommit)."""

    def __init__(
        self, reading: Callable[[], AbstractContextManager[Db]], seals: Seals | None
    ) -> None:
        self._reading = reading
        self._seals = seals
        self._warned = False
        self.repairs: Counter[str] = Counter({RECORDS_TABLE: 0})
        """Rows read that were not served as they were (made again): the read models'
        repairs metric counts them."""

    def load(self, match_ids: Collection[str], public_key: str) -> dict[str, str]:
        """The kept record text of each of `match_ids` that has one signed by `public_key`
        and whose authenticator verifies. Raises StorageUnavailable."""
        wanted = list(dict.fromkeys(match_ids))
        found: dict[str, str] = {}
        with self._reading() as db:
            p = db.dialect.param
            for k in range(0, len(wanted), _CHUNK):
                part = wanted[k : k + _CHUNK]
                rows = db.rows(
                    "SELECT r.match_id, r.public_key, r.events, r.head, r.record, r.log_keys,"
                    " r.key_id,"
                    " r.mac, (SELECT e.seq FROM events e WHERE e.stream_id = r.match_id"
                    " ORDER BY e.seq DESC LIMIT 1), (SELECT e.hash FROM events e"
                    " WHERE e.stream_id = r.match_id ORDER BY e.seq DESC LIMIT 1)"
                    " FROM match_records r"
                    f" WHERE r.public_key = {p} AND r.match_id IN ({', '.join([p] * len(part))})",
                    [public_key, *part],
                )
                for match_id, key, events, head, text, logs, key_id, mac, seq, last in rows:
                    why = self._fault(match_id, key, events, head, text, logs, key_id, mac)
                    if why is None and (seq, _bytes(last)) != (events, _bytes(head)):
                        why = (
                            f"it was made from {events} events, the stream has {seq} and"
                            " another head"
                        )
                    if why is None:
                        found[match_id] = text
                        continue
                    self.repairs[RECORDS_TABLE] += 1
                    log.warning(
                        "READ MODEL TAMPERED: table %s row %s is not served as is (%s): made"
                        " again from the events", RECORDS_TABLE, match_id, why,
                    )  # fmt: skip
        return found

    def archived(self, match_id: str) -> Archived | None:
        """`match_id` as `bergen archive` listed it in `archived_matches` (only the owner
        writes there), or None when it was not archived. Raises StorageUnavailable."""
        with self._reading() as db:
            p = db.dialect.param
            try:
                rows = db.rows(
                    "SELECT end_seq, events, head, archived_at FROM archived_matches"
                    f" WHERE match_id = {p}",
                    [match_id],
                )
            except Exception as e:
                if getattr(e, "sqlstate", None) != _NO_PRIVILEGE:
                    raise
                # A role granted before migration 0016: no match can have been archived
                # under it that it could tell, so the calls go on as before.
                if not self._warned:
                    self._warned = True
                    log.warning(
                        "the server's role cannot read archived_matches: GRANT SELECT ON"
                        " archived_matches (deploy/grants.sql), or archived matches are"
                        " answered as tampered with"
                    )
                return None
            if not rows:
                return None
            end_seq, events, head, at = rows[0]
            return Archived(match_id, int(end_seq), int(events), _bytes(head), db.time_of(at))

    def unkept(self, public_key: str) -> list[str]:
        """The ended matches of the listing with no record kept signed by `public_key`.
        Raises StorageUnavailable."""
        with self._reading() as db:
            p = db.dialect.param
            rows = db.rows(
                "SELECT l.match_id FROM match_list l WHERE l.phase = 'ended' AND NOT EXISTS"
                " (SELECT 1 FROM match_records r WHERE r.match_id = l.match_id"
                f" AND r.public_key = {p}) ORDER BY l.listed",
                [public_key],
            )
        return [str(r[0]) for r in rows]

    def keep(self, records: Sequence[Kept], public_key: str) -> None:
        """Keep `records` signed by `public_key`, over any row of theirs. Raises
        StorageUnavailable."""
        if not records:
            return
        rows = []
        for r in records:
            values = (r.match_id, public_key, r.events, r.head.hex(), r.text, r.log_keys)
            sealed = (
                (None, None) if self._seals is None
                else self._seals.seal_message(record_message(values))
            )  # fmt: skip
            rows.append((r.match_id, public_key, r.events, r.head, r.text, r.log_keys, *sealed))
        with self._reading() as db:
            db.insert(
                RECORDS_TABLE,
                ("match_id", "public_key", "events", "head", "record", "log_keys", "key_id", "mac"),
                rows,
                "ON CONFLICT (match_id) DO UPDATE SET public_key = excluded.public_key,"
                " events = excluded.events, head = excluded.head, record = excluded.record,"
                " log_keys = excluded.log_keys,"
                " key_id = excluded.key_id, mac = excluded.mac",
            )

    def _fault(
        self,
        match_id: str,
        key: str,
        events: int,
        head: Any,
        text: str,
        log_keys: str,
        key_id: str | None,
        mac: bytes | None,
    ) -> str | None:
        if self._seals is None:
            return None
        values = (match_id, key, events, _bytes(head).hex(), text, log_keys)
        try:
            why = self._seals.message_fault(record_message(values), key_id, mac)
        except (struct.error, TypeError) as e:
            why = f"its columns cannot be sealed: {e}"
        if why is not None and self._seals.fault(RECORDS_TABLE, values, key_id, mac) is None:
            why = None  # a row kept by an earlier version, sealed over its columns as JSON
        if why is None:
            unknown = [k for k in log_keys.split(",") if k and not self._seals.knows(k)]
            if unknown:
                why = f"its log's rows are authenticated by keys this server lacks: {unknown}"
        return why


def _bytes(value: Any) -> bytes:
    return b"" if value is None else bytes(value)
