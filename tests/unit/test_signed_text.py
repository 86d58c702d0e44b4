"""A signed record as the server serves it: the JCS text its signature covers with the
`signature` member last, checked on the text itself by a reader holding the server's key, and
any other text of a record left to the long check (strict parse, canonical form)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bergen.api.signing import (
    RecordSigner,
    SignatureError,
    read_signed_text,
    record_text,
    verify_signature,
)
from bergen.cli_client.export import check_served

SIGNER = RecordSigner(Ed25519PrivateKey.from_private_bytes(bytes(range(32))))
OTHER = RecordSigner(Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33))))


def a_record(name: str = "Ada") -> dict[str, Any]:
    return {
        "format": "bergen-match-record/1",
        "commitment": "cd" * 32,
        "match_id": "019b76da-a800-7206-93eb-3be859e5d131",
        "seats": [{"name": name, "client_seed": "s1"}, {"name": "Bo", "client_seed": "s2"}],
        "hands": [{"actions": [{"act": "play", "tile": "6-6", "end": None, "points": 2}]}],
        "result": {"reason": "target", "winner_side": 0, "scores": [15, 4]},
        "log": {"events": 12, "head": "ab" * 32},
    }


def test_the_served_text_is_the_signed_jcs_with_the_signature_last() -> None:
    signed = SIGNER.sign(a_record())
    text = record_text(signed)
    assert text.startswith('{"commitment":')  # JCS orders the keys
    assert text.endswith("}}") and text.index(',"signature":') > text.index('"result":')
    assert json.loads(text) == signed
    assert verify_signature(json.loads(text), SIGNER.public_key) == SIGNER.public_key
    assert read_signed_text(text, SIGNER.public_key) == signed
    assert read_signed_text(text + "\n", SIGNER.public_key) == signed  # as a file holds it


def test_signing_for_serving_gives_what_signing_then_writing_gives() -> None:
    record = a_record()
    before = json.dumps(record, sort_keys=True)
    signed, text = SIGNER.sign_served(record)
    assert signed == SIGNER.sign(a_record())
    assert text == record_text(signed)
    assert read_signed_text(text, SIGNER.public_key) == signed
    assert json.dumps(record, sort_keys=True) == before  # the record given is not changed
    resigned, again = OTHER.sign_served(signed)  # a signed record signed again: one signature
    assert list(resigned).count("signature") == 1 and again == record_text(resigned)
    assert verify_signature(json.loads(again), OTHER.public_key) == OTHER.public_key


def test_an_unsigned_record_is_its_jcs_text() -> None:
    record = a_record()
    assert json.loads(record_text(record)) == record
    assert read_signed_text(record_text(record), SIGNER.public_key) is None


@pytest.mark.parametrize(
    "change",
    [
        lambda t: t.replace('"scores":[15,4]', '"scores":[4,15]'),  # a result changed
        lambda t: t.replace('"result":', '"result":{"reason":"forfeit"},"result":', 1),  # twice
        lambda t: t.replace(',"signature":', ', "signature":'),  # not the server's layout
        lambda t: t.replace('{"commitment"', '{ "commitment"'),
        lambda t: t[:-1] + ',"x":1}',  # a member after the signature
    ],
)
def test_a_text_changed_in_any_way_is_left_to_the_long_check(change: Any) -> None:
    text = record_text(SIGNER.sign(a_record()))
    changed = change(text)
    assert changed != text
    assert read_signed_text(changed, SIGNER.public_key) is None


def test_a_text_signed_by_another_key_is_not_taken() -> None:
    text = record_text(OTHER.sign(a_record()))
    assert read_signed_text(text, SIGNER.public_key) is None
    assert read_signed_text(text, OTHER.public_key) is not None


def test_a_signature_member_inside_a_name_is_not_the_signature() -> None:
    text = record_text(SIGNER.sign(a_record(name='x,"signature":{"algorithm":"ed25519"}')))
    assert read_signed_text(text, SIGNER.public_key) == json.loads(text)


def test_the_export_check_gives_the_same_verdicts_either_way() -> None:
    signed = SIGNER.sign(a_record())
    served = record_text(signed)
    laid_out = json.dumps(signed, indent=1)  # the same record, another layout: the long way
    for text in (served, laid_out):
        checked = check_served(text, None, SIGNER.public_key, False)
        assert checked.problem is None, checked.problem
        assert checked.result == signed["result"]
    for text in (served, laid_out):
        bad = text.replace("15", "16", 1)
        checked = check_served(bad, None, SIGNER.public_key, False)
        assert checked.problem is not None and "signature" in checked.problem
    other = record_text(OTHER.sign(a_record()))
    assert "another key" in str(check_served(other, None, SIGNER.public_key, False).problem)
    with pytest.raises(SignatureError):
        verify_signature(json.loads(served.replace("15", "16", 1)), SIGNER.public_key)
