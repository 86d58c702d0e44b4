"""The player aggregate (RATINGS.md section 1): names checked and normalised, one name for
every spelling that differs only in case, width or composition, the id that follows from it,
and every event through its codec."""

from __future__ import annotations

import uuid

import pytest

from bergen.domain.errors import AlreadyExists, CorruptRecord, InvalidArgument
from bergen.domain.players import (
    MAX_NAME_CHARS,
    PLAYER_EVENT_TYPES,
    Player,
    PlayerRegistered,
    RegisterPlayer,
    check_name,
    decide_player,
    decode_player_event,
    encode_player_event,
    fold_player,
    name_key,
    player_id_of,
)


def register(name: str, bot: bool = False, state: Player | None = None) -> Player:
    return fold_player(decide_player(state, RegisterPlayer(name, bot)))


def test_a_player_is_registered_with_its_name_bot_flag_and_an_id_from_its_name() -> None:
    ann = register("Ann-Marie_2")
    assert (ann.name, ann.bot, ann.version) == ("Ann-Marie_2", False, 1)
    assert uuid.UUID(ann.player_id).version == 5
    assert ann.player_id == player_id_of("ann-marie_2")
    assert register("Deep Blue", bot=True).bot is True


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("\uff21nn", "ann"),  # full-width A: NFKC makes it A
        ("\u00c1nn", "A\u0301nn"),  # one code point, or A and a combining acute
        ("ANN", "ann"),
        ("Stra\u00dfe", "STRASSE"),  # casefolding: sharp s is ss
        ("\u2168", "ix"),  # ROMAN NUMERAL NINE is IX under NFKC
    ],
)
def test_names_differing_only_in_case_width_or_composition_are_one_name(
    one: str, other: str
) -> None:
    assert name_key(one) == name_key(other)
    assert player_id_of(one) == player_id_of(other)
    taken = register(one)
    with pytest.raises(AlreadyExists) as refused:
        decide_player(taken, RegisterPlayer(other))
    assert (refused.value.status, refused.value.reason) == ("ALREADY_EXISTS", "NAME_TAKEN")


def test_the_name_shown_is_the_nfkc_form_as_given() -> None:
    assert register("\uff21nn").name == "Ann"
    assert register("A\u0301nn").name == "\u00c1nn"
    assert register("\u00c1nn").name == "\u00c1nn"


@pytest.mark.parametrize(
    "name",
    ["a", "Ann", "Ann Lee", "\u00e9lodie", "\u041c\u0430\u0448\u0430", "\u0930\u093e\u091c",
     "\u674e\u5c0f\u9f99", "x" * MAX_NAME_CHARS, "\uff11\uff12", "a-b_c 9"],
)  # fmt: skip
def test_names_of_letters_digits_spaces_hyphens_and_underscores_pass(name: str) -> None:
    assert check_name(name)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "PLAYER_NAME_LENGTH"),
        ("x" * (MAX_NAME_CHARS + 1), "PLAYER_NAME_LENGTH"),
        ("\ufdfa\ufdfa", "PLAYER_NAME_LENGTH"),  # two code points, 36 characters after NFKC
        ("ann!", "PLAYER_NAME_CHARACTERS"),
        ("ann\u200b", "PLAYER_NAME_CHARACTERS"),  # zero width space
        ("ann\tlee", "PLAYER_NAME_CHARACTERS"),
        ("ann.lee", "PLAYER_NAME_CHARACTERS"),
        ("\u0301ann", "PLAYER_NAME_CHARACTERS"),  # an accent on nothing
        ("-\u0301", "PLAYER_NAME_CHARACTERS"),  # an accent on a hyphen
        ("ann\U0001f600", "PLAYER_NAME_CHARACTERS"),
        (" ann", "PLAYER_NAME_SPACES"),
        ("ann ", "PLAYER_NAME_SPACES"),
        ("ann  lee", "PLAYER_NAME_SPACES"),
        ("\u3000ann", "PLAYER_NAME_SPACES"),  # an ideographic space is a space after NFKC
    ],
)
def test_a_name_breaking_a_rule_is_refused_naming_the_rule(name: str, reason: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        decide_player(None, RegisterPlayer(name))
    assert refused.value.reason == reason
    assert refused.value.status == "INVALID_ARGUMENT"


def test_the_length_is_counted_after_nfkc() -> None:
    # 24 full-width letters are 24 letters; the ligature U+FB03 is three.
    assert check_name("\uff41" * MAX_NAME_CHARS) == "a" * MAX_NAME_CHARS
    with pytest.raises(InvalidArgument):
        check_name("\ufb03" * 9)


def test_a_bot_flag_that_is_not_a_bool_is_refused() -> None:
    with pytest.raises(InvalidArgument):
        decide_player(None, RegisterPlayer("ann", 1))  # type: ignore[arg-type]


def test_every_event_goes_through_its_codec() -> None:
    assert (PlayerRegistered,) == PLAYER_EVENT_TYPES
    (event,) = decide_player(None, RegisterPlayer("\u00c1nn", True))
    assert decode_player_event(*encode_player_event(event)) == event


@pytest.mark.parametrize(
    ("type_name", "version", "payload"),
    [
        ("PlayerRenamed", 1, {"player_id": "p", "name": "a", "bot": False}),
        ("PlayerRegistered", 2, {"player_id": "p", "name": "a", "bot": False}),
        ("PlayerRegistered", 1, {"player_id": "p", "name": "a"}),
        ("PlayerRegistered", 1, {"player_id": "p", "name": "a", "bot": 0}),
        ("PlayerRegistered", 1, ["p"]),
    ],
)
def test_a_payload_that_is_not_a_players_is_refused(
    type_name: str, version: int, payload: object
) -> None:
    with pytest.raises(CorruptRecord):
        decode_player_event(type_name, version, payload)  # type: ignore[arg-type]


def test_a_stream_that_does_not_fold_is_refused() -> None:
    (event,) = decide_player(None, RegisterPlayer("ann"))
    with pytest.raises(CorruptRecord):
        fold_player([])
    with pytest.raises(CorruptRecord):
        fold_player([event, event])
