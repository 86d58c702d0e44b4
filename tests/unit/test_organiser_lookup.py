"""Where the organiser's commands find the organiser token: the option, the environment, the
file the server of this machine named for its address in the state folder (any listener of
this machine on the same port is the same server), then the current folder's, for a server
of this machine only; a file that is missing, empty or another user's is a clear refusal
that says how to give a token."""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path

import pytest

from bergen.api import state
from bergen.api.exit_status import ExitStatus
from bergen.cli_client.organiser import organiser_token
from bergen.cli_client.usage import Failed

TOKEN = "bgo_" + "k3Jd9-Qx7_Lm2Vb8Nc4Rt6Yw1Ze5Pa0Hs3Uf9Gi2"


@pytest.fixture(autouse=True)
def folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A state folder and a current folder of the test's own, no token in the environment."""
    monkeypatch.setenv("BERGEN_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("BERGEN_ORGANISER_TOKEN", raising=False)
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    return tmp_path


def args(server: str = "127.0.0.1:50051", file: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(server=server, organiser_token_file=file)


def refused(a: argparse.Namespace, reason: str) -> Failed:
    with pytest.raises(Failed) as caught:
        organiser_token(a)
    assert caught.value.reason == reason, caught.value
    assert caught.value.status == ExitStatus.USAGE
    return caught.value


def token_file(folder: Path, token: str = TOKEN) -> Path:
    path = folder / "bergen-organiser-token"
    path.write_text(token + "\n")
    return path


@pytest.mark.parametrize(
    ("listen", "asked"),
    [
        ("127.0.0.1:50051", "127.0.0.1:50051"),
        ("0.0.0.0:50051", "localhost:50051"),
        ("[::]:50051", "[::1]:50051"),
        ("localhost:50051", "0.0.0.0:50051"),
        ("Bergen.Example:443", "bergen.example:443"),
    ],
)
def test_a_server_of_this_machine_is_found_by_any_of_its_addresses(
    folders: Path, listen: str, asked: str
) -> None:
    made = token_file(folders)
    pointer = state.record_token_file(listen, made)
    assert stat.S_IMODE(pointer.stat().st_mode) == 0o600
    assert organiser_token(args(asked)) == TOKEN


def test_another_port_or_host_is_another_server(folders: Path) -> None:
    state.record_token_file("127.0.0.1:50051", token_file(folders))
    for other in ("127.0.0.1:50052", "bergen.example:50051"):
        assert organiser_token(args(other), required=False) is None
    failed = refused(args("127.0.0.1:50052"), "NO_ORGANISER_TOKEN")
    assert "--organiser-token-file FILE" in failed.sentence
    assert "BERGEN_ORGANISER_TOKEN" in failed.sentence


def test_the_option_then_the_environment_win(
    folders: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state.record_token_file("127.0.0.1:50051", token_file(folders))
    mine = folders / "mine"
    mine.write_text("bgo_from-the-option-file-0123456789abcdef\n")
    monkeypatch.setenv("BERGEN_ORGANISER_TOKEN", "bgo_from-the-environment-0123456789abc")
    assert organiser_token(args(file=str(mine))) == "bgo_from-the-option-file-0123456789abcdef"
    assert organiser_token(args()) == "bgo_from-the-environment-0123456789abc"


def test_the_current_folders_file_is_for_a_server_of_this_machine_only(folders: Path) -> None:
    token_file(Path.cwd())
    assert organiser_token(args("localhost:7000")) == TOKEN
    # Never sent, unasked, to a server elsewhere.
    refused(args("bergen.example:443"), "NO_ORGANISER_TOKEN")


def test_a_missing_or_empty_file_is_refused_saying_how_to_give_one(folders: Path) -> None:
    failed = refused(args(file=str(folders / "nothing")), "NO_ORGANISER_TOKEN")
    assert "does not exist" in failed.sentence and "--organiser-token-file" in failed.sentence
    empty = folders / "empty"
    empty.write_text("\n")
    assert "is empty" in refused(args(file=str(empty)), "NO_ORGANISER_TOKEN").sentence


def test_a_named_token_file_that_is_gone_is_said(folders: Path) -> None:
    made = token_file(folders)
    state.record_token_file("127.0.0.1:50051", made)
    made.unlink()
    failed = refused(args(), "NO_ORGANISER_TOKEN")
    assert f"names {made}, which is gone" in failed.sentence


def test_files_of_another_user_are_not_used(folders: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state.record_token_file("127.0.0.1:50051", token_file(folders))
    someone_else = os.getuid() + 1
    monkeypatch.setattr(state.os, "getuid", lambda: someone_else)
    failed = refused(args(), "ORGANISER_TOKEN_NOT_YOURS")
    assert "belongs to another user" in failed.sentence
    # No pointer: the current folder's file, another user's, is not used either.
    assert state.pointer_path("127.0.0.1:50051").unlink() is None
    token_file(Path.cwd())
    failed = refused(args(), "ORGANISER_TOKEN_NOT_YOURS")
    assert "the organiser token file" in failed.sentence and "another user" in failed.sentence


def test_forgetting_a_name_leaves_no_pointer(folders: Path) -> None:
    state.record_token_file("[::1]:9", token_file(folders))
    assert state.forget_token_file("127.0.0.1:9")
    assert not state.forget_token_file("127.0.0.1:9")
    assert state.recorded_token_file("localhost:9") is None


def test_a_pointer_file_that_is_not_one_is_refused(folders: Path) -> None:
    path = state.pointer_path("127.0.0.1:50051")
    path.parent.mkdir(parents=True)
    path.write_text("not json")
    assert "not a pointer file" in refused(args(), "ORGANISER_TOKEN_UNREADABLE").sentence


def test_the_state_folder_is_found_as_the_clients_always_found_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("BERGEN_STATE_DIR")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state.state_dir() == tmp_path / "xdg" / "bergen"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert state.state_dir() == tmp_path / "home" / ".local" / "state" / "bergen"


def test_the_servers_token_file_is_made_once_owner_only_and_checked_when_read(
    tmp_path: Path,
) -> None:
    from bergen.server import auth

    path = tmp_path / "keys" / "bergen-organiser-token"
    token, made = auth.organiser_token_file(path)
    assert made and stat.S_IMODE(path.stat().st_mode) == 0o600
    auth.check_organiser_token(token)
    assert auth.organiser_token_file(path) == (token, False)
    assert list(path.parent.iterdir()) == [path]  # nothing left of its making
    path.write_text("\n")
    with pytest.raises(auth.WeakToken, match="holds no token"):
        auth.organiser_token_file(path)
    path.write_text("ab" * 30 + "\n")
    with pytest.raises(auth.WeakToken, match="repeats"):
        auth.organiser_token_file(path)
