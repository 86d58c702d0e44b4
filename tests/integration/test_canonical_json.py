"""The store's canonical JSON is RFC 8785 (JCS), byte for byte, as the `rfc8785` package has it."""

from __future__ import annotations

from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from bergen.api.chain import canonical_json, content_bytes

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
