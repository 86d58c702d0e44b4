"""`bergen export`: every finished match's signed record and a manifest, in increments."""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bergen.api.exit_status import ExitStatus
from bergen.cli_client.main import main
from bergen.v1 import bergen_pb2 as pb

from .client import Client, play_to_end, seat_everyone
from .conftest import ORGANISER_TOKEN
from .servers import ServerFarm, ServerProcess, bergen_command
from .test_verify import play_matches, verify_here


@pytest.fixture(scope="module")
def server(module_farm: ServerFarm, module_sqlite_url: str) -> ServerProcess:
    return module_farm.start(module_sqlite_url, organiser_token=ORGANISER_TOKEN)


def export(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["export", *args])
    out, err = capsys.readouterr()
    return code, out, err


def manifest_of(out: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((out / "manifest.json").read_text())
    return manifest


def assert_consistent(out: Path, public_key: str) -> dict[str, dict[str, Any]]:
    """Every listed file is there with the listed hash and result; nothing else is."""
    manifest = manifest_of(out)
    assert manifest["format"] == "bergen-export/1"
    assert manifest["public_key"] == public_key
    entries = {m["match_id"]: m for m in manifest["matches"]}
    assert len(entries) == len(manifest["matches"])
    for match_id, entry in entries.items():
        data = (out / entry["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]
        record = json.loads(data)
        assert record["match_id"] == match_id
        assert record["result"] == entry["result"]
        assert record["signature"]["public_key"] == public_key
    files = {p.name for p in out.iterdir()} - {"manifest.json"}
    assert files == {m["file"] for m in entries.values()}
    return entries


def finished(client: Client) -> set[str]:
    reply = client.stub.ListMatches(pb.ListMatchesRequest(phase=pb.PHASE_ENDED, page_size=100))
    assert not reply.next_page_token
    return {m.match_id for m in reply.matches}


def test_export_writes_every_finished_match_and_adds_new_ones_on_the_next_run(
    server: ServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "records"
    with Client(server.target) as client:
        first = play_matches(client, random.Random(31))
        live = seat_everyone(client, 2).match_id
        public_key = client.stub.GetServerInfo(pb.GetServerInfoRequest()).public_key
        code, stdout, err = export(capsys, "--out", str(out), "--server", server.target)
        assert code == ExitStatus.SUCCESS, err
        entries = assert_consistent(out, public_key)
        assert set(entries) == finished(client) >= set(first)
        assert live not in entries
        assert f"exported {len(entries)} new record(s)" in stdout
        key_file = tmp_path / "key.hex"
        key_file.write_text(manifest_of(out)["public_key"])
        for entry in entries.values():
            code, line, _ = verify_here(
                capsys, str(out / entry["file"]), "--public-key", str(key_file)
            )
            assert code == ExitStatus.SUCCESS, line

        before = {name: (out / e["file"]).stat().st_mtime_ns for name, e in entries.items()}
        table = seat_everyone(client, 3, preset="eastern")
        play_to_end([client], random.Random(32), table)
        code, stdout, err = export(capsys, "--out", str(out), "--server", server.target)
        assert code == ExitStatus.SUCCESS, err
        assert "exported 1 new record(s)" in stdout
        again = assert_consistent(out, public_key)
        assert set(again) == set(entries) | {table.match_id}
        assert {k: again[k] for k in entries} == entries
        assert {n: (out / e["file"]).stat().st_mtime_ns for n, e in entries.items()} == before

        # A listed file that went missing or was changed is fetched again.
        victim = next(iter(entries.values()))
        (out / victim["file"]).write_text("{}")
        code, _, err = export(capsys, "--out", str(out), "--server", server.target)
        assert code == ExitStatus.SUCCESS and "missing or changed" in err
        assert assert_consistent(out, public_key)[victim["match_id"]] == victim


def test_since_exports_only_matches_that_ended_later(
    server: ServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Client(server.target) as client:
        early = seat_everyone(client, 2)
        play_to_end([client], random.Random(41), early)
        time.sleep(0.05)
        cut = datetime.now(UTC)
        time.sleep(0.05)
        late = seat_everyone(client, 4, partnerships=True)
        play_to_end([client], random.Random(42), late)
        public_key = client.stub.GetServerInfo(pb.GetServerInfoRequest()).public_key

    by_time = tmp_path / "by-time"
    code, _, err = export(
        capsys, "--out", str(by_time), "--since", cut.isoformat(), "--server", server.target
    )
    assert code == ExitStatus.SUCCESS, err
    assert set(assert_consistent(by_time, public_key)) == {late.match_id}

    by_match = tmp_path / "by-match"
    code, _, err = export(
        capsys, "--out", str(by_match), "--since", early.match_id, "--server", server.target
    )
    assert code == ExitStatus.SUCCESS, err
    assert set(assert_consistent(by_match, public_key)) == {late.match_id}


def test_export_as_a_process_and_its_failures(
    server: ServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "records"
    done = subprocess.run(
        [*bergen_command(), "export", "--out", str(out), "--server", server.target],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert (out / "manifest.json").exists()

    code, _, err = export(capsys, "--out", str(out), "--server", "127.0.0.1:9")
    assert code == ExitStatus.UNREACHABLE, err
    code, _, err = export(
        capsys, "--out", str(out), "--since", "yesterday", "--server", server.target
    )
    assert code == ExitStatus.USAGE, err
    code, _, err = export(
        capsys,
        "--out",
        str(out),
        "--since",
        "00000000-0000-4000-8000-000000000000",
        "--server",
        server.target,
    )
    assert code == ExitStatus.NOT_FOUND, err
    (out / "manifest.json").write_text("[]")
    code, _, err = export(capsys, "--out", str(out), "--server", server.target)
    assert code == ExitStatus.USAGE and "is not a bergen-export/1 manifest" in err
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    code, _, err = export(capsys, "--out", str(blocked), "--server", server.target)
    assert code == ExitStatus.USAGE, err


def test_json_says_what_was_written(
    server: ServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "records"
    code, stdout, err = export(capsys, "--out", str(out), "--server", server.target, "--json")
    assert code == ExitStatus.SUCCESS, err
    report = json.loads(stdout)
    assert report["out"] == str(out) and report["manifest"] == str(out / "manifest.json")
    listed = [m["match_id"] for m in manifest_of(out)["matches"]]
    assert sorted(report["written"]) == sorted(listed) and report["listed"] == len(listed)
    assert report["rejected"] == []
    code, stdout, err = export(capsys, "--out", str(out), "--server", server.target, "--json")
    assert json.loads(stdout)["written"] == []
