"""Audit packs as real processes: `bergen simulate --tournament` writes one of each format,
`bergen verify DIR` accepts it with one OK line, and rejects it (exit 6, one line naming the
file and place, no traceback) once a field is changed, a file removed or one added."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bergen.api.exit_status import ExitStatus

from .servers import bergen_command

FORMATS = {
    "swiss-2": ["swiss", "--entrants", "8", "--rounds", "3"],
    "swiss-4": ["swiss", "--entrants", "10", "--rounds", "2", "--seats", "4"],
    "double-round-robin-pairs": ["double_round_robin", "--entrants", "4", "--seats", "4",
                                 "--partnerships"],
}  # fmt: skip


def bergen(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*bergen_command(), *args], capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def simulate(out: Path, name: str) -> dict[str, object]:
    done = bergen("simulate", "--tournament", *FORMATS[name], "--seed", name, "--out",
                  str(out), "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary: dict[str, object] = json.loads(done.stdout)
    return summary


@pytest.mark.parametrize("name", list(FORMATS))
def test_bergen_verify_accepts_a_simulated_pack_and_rejects_it_changed(tmp_path, name):
    out = tmp_path / "pack"
    summary = simulate(out, name)
    key = str(summary["public_key"])
    done = bergen("verify", str(out), "--public-key", key)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"OK: tournament {summary['tournament_id']}")
    assert len(done.stdout.splitlines()) == 1

    record_file = out / "tournament.json"
    original = record_file.read_bytes()
    record = json.loads(original)
    record["rounds"][0]["tables"][0]["sides"].reverse()
    record_file.write_text(json.dumps(record), "utf-8")
    done = bergen("verify", str(out), "--public-key", key)
    assert done.returncode == ExitStatus.INVALID
    assert (
        done.stdout == "REJECTED: tournament.json: its SHA-256 is not the one the manifest gives\n"
    )
    record_file.write_bytes(original)

    match = sorted((out / "matches").iterdir())[0]
    match.unlink()
    done = bergen("verify", str(out))
    assert done.returncode == ExitStatus.INVALID
    assert done.stdout == f"REJECTED: matches/{match.name}: missing: the manifest lists it\n"


def test_bergen_verify_rejects_an_extra_file_and_a_folder_that_is_no_pack(tmp_path):
    out = tmp_path / "pack"
    simulate(out, "swiss-2")
    (out / "matches" / "extra.json").write_text("{}\n")
    done = bergen("verify", str(out))
    assert (done.returncode, done.stdout) == (
        ExitStatus.INVALID,
        "REJECTED: matches/extra.json: not in the manifest: a pack holds no other file\n",
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    done = bergen("verify", str(empty), "--json")
    assert done.returncode == ExitStatus.INVALID
    verdict = json.loads(done.stdout)
    assert (verdict["ok"], verdict["source"], verdict["where"]) == (False, "pack", "manifest.json")
