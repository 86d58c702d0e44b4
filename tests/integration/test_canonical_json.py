"""The store's canonical JSON is RFC 8785 (JCS), byte for byte, as the `rfc8785` package has it."""

from __future__ import annotations

import hmac
import os
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from bergen.api.chain import (
    canonical_json,
    content_bytes,
    metadata_json,
    new_salt,
    row_mac,
    row_mac_message,
)
from bergen.api.stored import EventMetadata

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=6), children, max_size=5)
    ),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_canonical_json_equals_rfc8785_for_any_json_value(value: Any) -> None:
    try:
        expected = rfc8785.dumps(value)
    except rfc8785.CanonicalizationError:  # lone surrogates
        with pytest.raises(ValueError, match="not JSON-able"):
            canonical_json(value, "value")
        return
    assert canonical_json(value, "value") == expected


large_objects = st.dictionaries(
    st.text(max_size=6),
    json_values
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.tuples(st.integers(), st.text()),
    min_size=5,
    max_size=12,
)


@settings(max_examples=400, deadline=None)
@given(large_objects)
def test_large_objects_through_the_c_encoder_equal_rfc8785(value: dict[str, Any]) -> None:
    try:
        expected = rfc8785.dumps(value)
    except rfc8785.CanonicalizationError:  # lone surrogates, integers beyond 2**53
        with pytest.raises(ValueError, match="not JSON-able"):
            canonical_json(value, "value")
        return
    assert canonical_json(value, "value") == expected


@pytest.mark.parametrize(
    "value",
    [
        {"a": 1.0, "b": 2, "c": 3, "d": 4, "e": 5},  # a float JCS writes as 1
        {"a": 1e21, "b": 2, "c": 3, "d": 4, "e": 5},
        {"\U0001f600": 1, "\ufb01": 2, "a": 3, "b": 4, "c": 5},
        {"a": "9007199254740993 in a string", "b": 9007199254740991, "c": 3, "d": 4, "e": 5},
    ],
)
def test_large_objects_the_c_encoder_would_get_wrong_are_written_by_jcs(
    value: dict[str, Any],
) -> None:
    assert canonical_json(value, "v") == rfc8785.dumps(value)


@pytest.mark.parametrize(
    "value",
    [
        {1: "a", "b": 2, "c": 3, "d": 4, "e": 5},  # the C encoder would write "1"
        {"a": 2**53, "b": 2, "c": 3, "d": 4, "e": 5},
        {"a": "\ud800", "b": 2, "c": 3, "d": 4, "e": 5},
    ],
)
def test_large_objects_that_are_not_jcs_are_refused(value: dict[Any, Any]) -> None:
    with pytest.raises(ValueError, match="not JSON-able"):
        canonical_json(value, "v")


def test_keys_beyond_the_basic_plane_sort_by_utf16_code_units() -> None:
    value = {"\U0001f600": 1, "\ufb01": 2, "a": 3}
    assert canonical_json(value, "v") == rfc8785.dumps(value)
    assert canonical_json(value, "v").index("\U0001f600".encode()) < canonical_json(
        value, "v"
    ).index("\ufb01".encode())


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1), st.integers(1, 10**6), st.text(min_size=1), json_values)
def test_event_content_is_the_rfc8785_encoding_of_the_whole_event(
    stream_id: str, seq: int, type_: str, payload: Any
) -> None:
    meta: dict[str, Any] = {"actor": None, "command_id": "c", "extra": {}, "rules_version": "r"}
    whole = {
        "stream_id": stream_id,
        "seq": seq,
        "type": type_,
        "schema_version": 1,
        "payload": payload,
        "metadata": meta,
    }
    try:
        expected = rfc8785.dumps(whole)
    except rfc8785.CanonicalizationError:
        return
    got = content_bytes(
        stream_id, seq, type_, 1, canonical_json(payload, "p"), canonical_json(meta, "m")
    )
    assert got == expected


@pytest.mark.parametrize("bad", [{1: "int key"}, {"s": {1, 2}}, {"n": 2**53}, object()])
def test_values_outside_json_are_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match="not JSON-able"):
        canonical_json(bad, "value")


@settings(max_examples=400, deadline=None)
@given(
    st.none() | st.text(),
    st.none() | st.text(),
    st.text(),
    st.dictionaries(st.text(max_size=8), st.text(), max_size=4),
)
def test_metadata_is_the_rfc8785_encoding_of_its_fields(
    actor: str | None, command_id: str | None, rules_version: str, extra: dict[str, str]
) -> None:
    meta = EventMetadata(actor, command_id, rules_version, extra)
    whole = {
        "actor": actor,
        "command_id": command_id,
        "extra": extra,
        "rules_version": rules_version,
    }
    try:
        expected = rfc8785.dumps(whole)
    except rfc8785.CanonicalizationError:  # lone surrogates
        with pytest.raises(ValueError, match="not JSON-able"):
            metadata_json(meta)
        return
    assert metadata_json(meta) == expected


@pytest.mark.parametrize(
    "extra", [{"n": 1}, {"nested": {"a": "b"}}, {"\U0001f600": "x", "\ufb01": "y"}, {2: "int key"}]
)
def test_metadata_beyond_plain_strings_is_encoded_as_jcs_or_refused(extra: Any) -> None:
    meta = EventMetadata("a", "c", "r", extra)
    whole = {"actor": "a", "command_id": "c", "extra": extra, "rules_version": "r"}
    try:
        expected = rfc8785.dumps(whole)
    except (rfc8785.CanonicalizationError, TypeError):
        expected = None
    if expected is None or any(not isinstance(k, str) for k in extra):
        with pytest.raises(ValueError, match="not JSON-able"):
            metadata_json(meta)
    else:
        assert metadata_json(meta) == expected


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=200), st.text(), st.text(), st.binary(max_size=64))
def test_row_authenticator_is_hmac_sha256_of_its_message(
    key: bytes, payload: str, metadata: str, salt: bytes
) -> None:
    fields = ("k1", "match-1", 7, "Played", 2, payload, metadata, 1_700_000, b"p" * 32, salt)
    digest = b"h" * 32
    message = row_mac_message(*fields, digest)
    # Twice: the second time with the key's pads already set up.
    for _ in range(2):
        assert row_mac(key, *fields, digest) == hmac.digest(key, message, "sha256")


def test_salts_are_never_handed_out_twice_nor_shared_with_a_forked_child() -> None:
    mine = {new_salt() for _ in range(1000)}
    assert len(mine) == 1000 and all(len(s) == 16 for s in mine)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next salts, to the parent
        os.close(read)
        os.write(write, b"".join(new_salt() for _ in range(100)))
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    children = {data[i : i + 16] for i in range(0, len(data), 16)}
    ours = {new_salt() for _ in range(100)}
    assert len(children) == 100 and not children & ours and not children & mine
