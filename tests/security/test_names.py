"""A player's or a match's name with a character that does not show (a bidi override, a
zero-width character, a line separator, a private-use or unassigned code point) is refused
with INVALID_ARGUMENT and the reason INVISIBLE_CHARACTER; ordinary spaces inside a name are
kept."""

from __future__ import annotations

import grpc
import pytest
from e2e.client import Client
from e2e.refusals import refusal
from e2e.servers import ServerFarm, ServerProcess

pytestmark = pytest.mark.timeout(120)

INVISIBLE = {
    "right-to-left override": "eve\u202elin",
    "pop directional formatting": "eve\u202c",
    "zero-width space": "ali\u200bce",
    "zero-width joiner": "bo\u200db",
    "byte order mark": "\ufeffcarol",
    "line separator": "dan\u2028",
    "paragraph separator": "dan\u2029",
    "private use": "x\ue000",
    "unassigned": "x\U000e0fff",
}


@pytest.fixture(scope="module")
def server(module_farm: ServerFarm, module_sqlite_url: str) -> ServerProcess:
    return module_farm.start(module_sqlite_url)


@pytest.mark.parametrize("name", INVISIBLE.values(), ids=INVISIBLE.keys())
def test_a_player_name_with_an_invisible_character_is_refused(
    server: ServerProcess, name: str
) -> None:
    with Client(server.target) as client:
        match_id = client.create(2).match_id
        with pytest.raises(grpc.RpcError) as info:
            client.join(match_id, name)
        got = refusal(info.value, "JoinMatch")
        assert got.code is grpc.StatusCode.INVALID_ARGUMENT
        assert got.reason == "INVISIBLE_CHARACTER"
        assert "invisible" in got.message and "U+" in got.message
        assert not any(s.taken for s in client.view(match_id).seats)


@pytest.mark.parametrize("name", INVISIBLE.values(), ids=INVISIBLE.keys())
def test_a_match_name_with_an_invisible_character_is_refused(
    server: ServerProcess, name: str
) -> None:
    with Client(server.target) as client:
        with pytest.raises(grpc.RpcError) as info:
            client.create(2, name=name)
        got = refusal(info.value, "CreateMatch")
        assert got.code is grpc.StatusCode.INVALID_ARGUMENT
        assert got.reason == "INVISIBLE_CHARACTER"


def test_ordinary_spaces_inside_a_name_are_kept(server: ServerProcess) -> None:
    with Client(server.target) as client:
        match_id = client.create(2, name="Friday final").match_id
        joined = client.join(match_id, "Ann Marie\u00a0Lee")
        assert joined.view.seats[joined.seat].name == "Ann Marie\u00a0Lee"
