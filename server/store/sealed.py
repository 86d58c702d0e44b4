"""Authenticators of the read models' rows: what the server's database role cannot make.

The read models (the listing, the projections' positions, the ratings) are folded from the
events and written by the server's role, which may also UPDATE and DELETE them: a row it
edits, moves to another match or puts back from an older copy must not be served as is. Each
row therefore carries an authenticator, like the events' (`bergen.api.chain.row_mac`): an
HMAC-SHA256, under a key derived from the log key of the id it names for this purpose alone
(`READ_MODEL_PURPOSE`), of the row's table and its columns, among them what binds it to the
log (its match and the last seq folded into it, or the position a projection reached). A
reader checks it (`Seals.fault`) and rebuilds a row that fails from the events.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from datetime import datetime
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

from bergen.api.chain import micros
from bergen.domain.dealing import hmac_on, hmac_pads

from ..keys import READ_MODEL_PURPOSE, LogKeys


def _refuse(value: Any) -> Any:
    raise ValueError(f"a {type(value).__name__} cannot be sealed")


# json's C encoder, made once: `json.JSONEncoder.encode` makes one for every call, a third of
# the time it takes to encode a row (ensure_ascii=False, compact, no NaN, no cycle check).
_encoder = c_make_encoder(None, _refuse, encode_basestring, None, ":", ",", False, False, False)


def compact_json(value: Any) -> str:
    """`value` (str, int, float, bool, None, and lists and tuples of them) as compact JSON
    text, as a seal encodes it. Raises ValueError for anything else, or a NaN."""
    return "".join(_encoder(value, 0))


def canonical_row(table: str, values: Sequence[Any]) -> bytes:
    """The bytes a row's authenticator covers: its table and its values, as a JSON array
    (str, int, float, bool, None and lists of them; a datetime as whole microseconds since
    1970 UTC), the same whatever the backend read them as. Raises ValueError for a value of
    another kind."""
    out: list[Any] = [table, *values]
    for i, v in enumerate(values, 1):
        if type(v) in _PLAIN:
            continue  # the common case, without the checks below (a rebuild seals millions)
        if isinstance(v, datetime):
            out[i] = micros(v)
        elif not isinstance(v, (str, int, float, list, tuple)):
            raise ValueError(f"{table}: a {type(v).__name__} cannot be sealed")
    return compact_json(out).encode()


_PLAIN = frozenset({str, int, float, bool, type(None), list, tuple})


class Seals:
    """The authenticators of read-model rows under the keys derived from a LogKeys."""

    def __init__(self, keys: LogKeys) -> None:
        derived = keys.derive(READ_MODEL_PURPOSE)
        self.writing = derived.writing
        self._pads = {i: hmac_pads(k) for i in derived.ids if (k := derived.key(i)) is not None}

    def knows(self, key_id: str) -> bool:
        """Whether the log key `key_id` is one of these keys."""
        return key_id in self._pads

    def seal(self, table: str, values: Sequence[Any]) -> tuple[str, bytes]:
        """The writing key's id and the authenticator of the row of `table` holding
        `values`."""
        return self.writing, hmac_on(self._pads[self.writing], canonical_row(table, values))

    def seal_message(self, message: bytes) -> tuple[str, bytes]:
        """The writing key's id and the authenticator of a row whose bytes are `message`, for
        a table that makes its rows' bytes itself (`bergen.server.store.ratings`)."""
        return self.writing, hmac_on(self._pads[self.writing], message)

    def fault(
        self, table: str, values: Sequence[Any], key_id: str | None, mac: bytes | None
    ) -> str | None:
        """Why the row of `table` holding `values`, read with `key_id` and `mac`, must not be
        served as is; None when its authenticator verifies."""
        try:
            message = canonical_row(table, values)
        except ValueError as e:
            return self._unsealed(key_id, mac) or str(e)
        return self.message_fault(message, key_id, mac)

    def _unsealed(self, key_id: str | None, mac: bytes | None) -> str | None:
        """Why a row read with `key_id` and `mac` cannot be checked at all; None if it can."""
        if key_id is None or mac is None:
            return "it has no authenticator"
        if key_id not in self._pads:
            return f"it names an unknown log key {key_id!r}"
        return None

    def message_fault(self, message: bytes, key_id: str | None, mac: bytes | None) -> str | None:
        """Why a row whose bytes are `message`, read with `key_id` and `mac`, must not be
        served as is; None when its authenticator verifies."""
        unsealed = self._unsealed(key_id, mac)
        if unsealed is not None:
            return unsealed
        assert key_id is not None and mac is not None
        if not hmac.compare_digest(hmac_on(self._pads[key_id], message), bytes(mac)):
            return f"its authenticator under key {key_id!r} does not verify"
        return None


def seals_of(keys: LogKeys | None) -> Seals | None:
    """The Seals of `keys`; None without keys (rows neither sealed nor checked)."""
    return None if keys is None else Seals(keys)


class ReadModelTampered(Exception):
    """A read-model row that must not be used as is: `table`, the row's `key`, and `why`."""

    def __init__(self, table: str, key: str, why: str) -> None:
        super().__init__(f"table {table} row {key}: {why}")
        self.table = table
        self.key = key
        self.why = why


def check_row(
    seals: Seals | None,
    table: str,
    key: str,
    values: Sequence[Any],
    key_id: str | None,
    mac: bytes | None,
) -> None:
    """Raises ReadModelTampered when the row of `table` named `key` holding `values` does not
    verify under `seals` (nothing is checked without them)."""
    if seals is None:
        return
    why = seals.fault(table, values, key_id, mac)
    if why is not None:
        raise ReadModelTampered(table, key, why)


def sealing(seals: Seals | None, table: str, values: Sequence[Any]) -> tuple[Any, Any]:
    """(key_id, mac) to write with the row of `table` holding `values` (NULLs without
    `seals`)."""
    return (None, None) if seals is None else seals.seal(table, values)
