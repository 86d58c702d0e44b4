"""Registered players in tournaments (RATINGS.md, TOURNAMENT.md sections 1 and 6): a rated
tournament enters registered players only, a player enters once, and the record names each
registered player's id beside the names; tournaments without registered players keep their
payloads and records as they were."""

from __future__ import annotations

import json
import uuid

import pytest

from bergen.domain.errors import BergenError, InvalidArgument
from bergen.domain.tournament_engine import (
    CreateTournament,
    Register,
    TournamentState,
    decide_tournament,
    evolve_tournament,
)
from bergen.domain.tournament_events import (
    EntrantRegistered,
    decode_tournament_event,
    encode_tournament_event,
)
from bergen.domain.tournament_pairing import Settings
from bergen.domain.tournament_record import parse_tournament_record, settings_json

TID = "5b0e7a34-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
SEED = bytes(range(32))
ANN, BOB, CY = (str(uuid.uuid5(uuid.NAMESPACE_OID, n)) for n in ("ann", "bob", "cy"))


def tournament(settings: Settings) -> TournamentState:
    state = None
    for e in decide_tournament(None, CreateTournament(TID, settings, SEED, "t")):
        state = evolve_tournament(state, e)
    assert state is not None
    return state


def register(state: TournamentState, command: Register) -> TournamentState:
    for e in decide_tournament(state, command):
        name, version, payload = encode_tournament_event(e)
        assert decode_tournament_event(name, version, json.loads(json.dumps(payload))) == e
        state = evolve_tournament(state, e)
    return state


def refused(state: TournamentState, command: Register) -> BergenError:
    with pytest.raises(BergenError) as caught:
        decide_tournament(state, command)
    return caught.value


RATED = Settings("swiss", 2, rounds=1, rated=True)
PAIRS = Settings("swiss", 4, partnerships=True, rounds=1)


def test_a_rated_tournament_enters_registered_players_only() -> None:
    state = tournament(RATED)
    error = refused(state, Register(("ann",), "s"))
    assert (error.status, error.reason) == ("FAILED_PRECONDITION", "PLAYER_REQUIRED")
    state = register(state, Register(("ann",), "s", player_ids=(ANN,), bots=(False,)))
    assert state.entrants[0].player_ids == (ANN,)


def test_a_registered_player_enters_once() -> None:
    state = register(tournament(RATED), Register(("ann",), "s", player_ids=(ANN,), bots=(False,)))
    error = refused(state, Register(("ann 2",), "s", player_ids=(ANN,), bots=(False,)))
    assert error.reason == "PLAYER_ALREADY_ENTERED"
    pairs = tournament(PAIRS)
    assert refused(
        pairs, Register(("a", "b"), "", player_ids=(ANN, ANN), bots=(False, False))
    ).reason == ("PLAYER_ALREADY_ENTERED")


def test_a_pair_may_hold_one_registered_player_in_an_unrated_tournament() -> None:
    state = register(
        tournament(PAIRS), Register(("a", "b"), "", player_ids=("", BOB), bots=(False, True))
    )
    assert (state.entrants[0].player_ids, state.entrants[0].bots) == (("", BOB), (False, True))
    record = state.record()
    assert record["entrants"][0]["player_ids"] == [None, BOB]
    assert parse_tournament_record(record).entrants[0].player_ids == ("", BOB)


@pytest.mark.parametrize(
    "command",
    [
        Register(("a",), "", player_ids=(ANN, BOB), bots=(False, False)),
        Register(("a",), "", player_ids=(ANN,), bots=()),
        Register(("a",), "", player_ids=("ann",), bots=(False,)),
        Register(("a",), "", player_ids=("",), bots=(True,)),
    ],
)
def test_registered_players_that_do_not_match_the_players_are_refused(command: Register) -> None:
    with pytest.raises(InvalidArgument):
        decide_tournament(tournament(Settings("swiss", 2, rounds=1)), command)


def test_entrants_without_registered_players_keep_their_payload_and_record() -> None:
    state = tournament(Settings("swiss", 2, rounds=1))
    (event,) = decide_tournament(state, Register(("ann",), "s"))
    assert isinstance(event, EntrantRegistered) and event.player_ids == ()
    payload = encode_tournament_event(event)[2]
    assert set(payload) == {"entrant", "players", "client_seed", "client_seed_commitment"}
    assert "player_ids" not in evolve_tournament(state, event).record()["entrants"][0]


def test_rated_is_a_setting_written_always_and_read_when_absent() -> None:
    assert settings_json(RATED)["rated"] is True
    unrated = Settings("swiss", 2, rounds=1)
    assert settings_json(unrated)["rated"] is False
    # A record made before section 6 asked for every setting writes it only when set.
    assert "rated" not in settings_json(unrated, every=False)
    assert settings_json(RATED, every=False)["rated"] is True
    record = register(
        tournament(RATED), Register(("ann",), "s", player_ids=(ANN,), bots=(False,))
    ).record()
    assert parse_tournament_record(record).settings.rated is True
