"""The players a user keeps for each server: one file a server and player, readable by its
owner alone, found by name in any case or by id; which one a person plays as."""

from __future__ import annotations

import json
import stat
import uuid
from pathlib import Path

import pytest

from bergen.api.exit_status import ExitStatus
from bergen.cli_client import players
from bergen.cli_client.usage import Failed

SERVER = "127.0.0.1:50051"
TOKEN = "bgp_" + "x" * 40


def pid(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_OID, name))


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_kept_player_is_one_file_of_its_owner_in_folders_of_its_owner(
    own_config_dir: Path,
) -> None:
    kept = players.keep(SERVER, pid("ann"), "Ann", False, TOKEN)
    assert kept.path == own_config_dir / "players" / "local-50051" / f"{pid('ann')}.json"
    assert mode(kept.path) == 0o600
    for folder in (kept.path.parent, kept.path.parent.parent):
        assert mode(folder) == 0o700
    assert json.loads(kept.path.read_text()) == {
        "format": "bergen-player/1",
        "server": SERVER,
        "player_id": pid("ann"),
        "name": "Ann",
        "bot": False,
        "player_token": TOKEN,
    }
    assert TOKEN not in repr(kept)
    # Every name of this machine's listener on that port is one server; another port is not.
    assert [p.player_id for p in players.kept("localhost:50051")] == [pid("ann")]
    assert players.kept("127.0.0.1:50052") == []


def test_a_player_is_found_by_its_name_in_any_case_or_width_or_by_its_id() -> None:
    players.keep(SERVER, pid("ann"), "Ánn", False, TOKEN)
    for text in ("Ánn", "ÁNN", "a\u0301nn", "\uff41\u0301nn", pid("ann")):
        found = players.find(SERVER, text)
        assert found is not None and found.name == "Ánn", text
    assert players.find(SERVER, "bob") is None
    with pytest.raises(Failed) as refused:
        players.named(SERVER, "bob")
    assert (refused.value.status, refused.value.reason) == (ExitStatus.USAGE, "PLAYER_NOT_KEPT")
    assert "kept: Ánn" in refused.value.sentence


def test_a_person_plays_as_the_one_player_kept_unless_told_otherwise() -> None:
    assert players.choose(SERVER, None) is None
    players.keep(SERVER, pid("bot"), "bot-greedy-1", True, TOKEN)
    assert players.choose(SERVER, None) is None  # a bot is nobody's own player
    players.keep(SERVER, pid("ann"), "Ann", False, TOKEN)
    ann = players.choose(SERVER, None)
    assert ann is not None and ann.name == "Ann"
    assert players.choose(SERVER, None, name="ANN") == ann
    assert players.choose(SERVER, None, name="Zed") is None  # --name someone else
    players.keep(SERVER, pid("bob"), "Bob", False, TOKEN)
    assert players.choose(SERVER, None) is None  # which of two?
    bob = players.choose(SERVER, "bob")
    assert bob is not None and bob.name == "Bob"


def test_a_rated_match_needs_a_player_and_says_which_are_kept() -> None:
    with pytest.raises(Failed) as none:
        players.must_choose(SERVER, None)
    assert none.value.reason == "PLAYER_REQUIRED"
    assert "none is kept for 127.0.0.1:50051" in none.value.sentence
    players.keep(SERVER, pid("ann"), "Ann", False, TOKEN)
    players.keep(SERVER, pid("bob"), "Bob", False, TOKEN)
    with pytest.raises(Failed) as two:
        players.must_choose(SERVER, None)
    assert two.value.sentence.endswith("(Ann, Bob): say which with --player")
    assert players.must_choose(SERVER, "Ann").name == "Ann"


def test_a_file_that_is_no_players_is_named() -> None:
    kept = players.keep(SERVER, pid("ann"), "Ann", False, TOKEN)
    kept.path.write_text('{"format": "bergen-player/1", "name": "Ann"}')
    with pytest.raises(Failed) as bad:
        players.kept(SERVER)
    assert (bad.value.status, bad.value.reason) == (ExitStatus.USAGE, "BAD_PLAYER_FILE")
    assert bad.value.sentence == f"{kept.path}: not a player's file (bergen-player/1)"
    kept.path.write_text("not json")
    with pytest.raises(Failed, match="not JSON"):
        players.find(SERVER, "Ann")
