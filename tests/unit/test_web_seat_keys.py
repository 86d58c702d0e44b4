"""The seat tokens a web gateway derives from its seal key: the same for every process holding
the key file, different for another key, a match, a seat or a previous token, each one a
token the game server takes from a client, and a rotated key still recognising the computer's
old tokens."""

from __future__ import annotations

from cryptography.fernet import Fernet

from bergen.cli_client.web.tokens import SeatKeys
from bergen.server.commands import check_client_token

MATCH = "6f1c2a9e-3b7d-4e2a-9c51-0d8e7f6a5b43"
OTHER = "00000000-0000-4000-8000-000000000000"


def test_two_processes_with_one_key_file_derive_the_same_tokens() -> None:
    key = Fernet.generate_key()
    one, two = SeatKeys([key]), SeatKeys([key])
    assert one.computer(MATCH, 1) == two.computer(MATCH, 1)
    assert one.rematch(MATCH, 2, "bgs_old") == two.rematch(MATCH, 2, "bgs_old")


def test_each_key_match_seat_and_previous_token_gives_another_token() -> None:
    keys = SeatKeys([Fernet.generate_key()])
    tokens = {
        keys.computer(MATCH, 0),
        keys.computer(MATCH, 1),
        keys.computer(OTHER, 0),
        SeatKeys([Fernet.generate_key()]).computer(MATCH, 0),
        keys.rematch(MATCH, 0, "bgs_a"),
        keys.rematch(MATCH, 0, "bgs_b"),
        keys.rematch(MATCH, 1, "bgs_a"),
        keys.rematch(OTHER, 0, "bgs_a"),
    }
    assert len(tokens) == 8


def test_every_derived_token_is_one_the_game_server_takes() -> None:
    keys = SeatKeys([Fernet.generate_key()])
    for seat in range(4):
        for token in (keys.computer(MATCH, seat), keys.rematch(MATCH, seat, "bgs_x")):
            check_client_token(token)  # raises for a token a client may not send
            assert token.startswith(("bgc_", "bgr_"))


def test_a_rotated_key_file_still_recognises_the_old_keys_computer_tokens() -> None:
    old, new = Fernet.generate_key(), Fernet.generate_key()
    before = SeatKeys([old])
    after = SeatKeys([new, old])
    assert after.computer(MATCH, 1) != before.computer(MATCH, 1)
    assert after.computer_candidates(MATCH, 1) == [
        after.computer(MATCH, 1),
        before.computer(MATCH, 1),
    ]


def test_no_token_shows_the_key_it_was_derived_from() -> None:
    key = Fernet.generate_key()
    keys = SeatKeys([key])
    raw = key.decode().rstrip("=")
    for token in (keys.computer(MATCH, 0), keys.rematch(MATCH, 0, "bgs_a")):
        assert raw[:16] not in token
