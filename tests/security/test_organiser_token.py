"""The organiser token is checked when `bergen serve` starts: a token a client could never
send, one too short or too repetitive to hold 128 random bits, and the example value of
deploy/bergen.env.example are each refused with one line and the usage exit status, from the
environment and from a file alike; `bergen token` makes one that the server takes and a client
can use. A token `bergen token` did not make must also stand up to zxcvbn's estimate of an
attacker's guesses (128 bits)."""

from __future__ import annotations

import base64
import os
import re
import secrets
import stat
import subprocess
from pathlib import Path

import pytest
from e2e.client import Client
from e2e.servers import ServerFarm, bergen_command

from bergen.api.exit_status import ExitStatus
from bergen.server import auth
from bergen.v1 import bergen_pb2 as pb

from .serving import clean_env, serve_refused

pytestmark = pytest.mark.timeout(300)

ENV_EXAMPLE = Path(__file__).parents[2] / "deploy" / "bergen.env.example"


def _example_token() -> str:
    found = re.search(r"^BERGEN_ORGANISER_TOKEN=(.*)$", ENV_EXAMPLE.read_text(), re.MULTILINE)
    assert found is not None, f"{ENV_EXAMPLE} sets no BERGEN_ORGANISER_TOKEN"
    return found.group(1).strip()


def _standard_base64() -> str:
    """256 random bits in standard base64: 44 characters, the last of them `=`."""
    return base64.b64encode(secrets.token_bytes(32)).decode()


WEAK = {
    "standard base64": (_standard_base64(), "holds"),
    "a space inside": (
        "bgo_" + secrets.token_urlsafe(16) + " " + secrets.token_urlsafe(16),
        "holds",
    ),
    "15 characters": (secrets.token_urlsafe(12)[:15], "too short"),
    "21 base64url characters": (secrets.token_urlsafe(16)[:21], "too short"),
    "31 hex digits": (secrets.token_hex(16)[:31], "too short"),
    "one character repeated": ("a" * 60, "repeats"),
    "two characters alternating": ("ab" * 40, "repeats"),
    "a word repeated": ("Passw0rd-" * 5, "repeats"),
    "201 characters": (secrets.token_urlsafe(160)[:201], "at most 200"),
    "the example of deploy/": (_example_token(), "example value"),
    "the example with a suffix": (_example_token() + "-please", "example value"),
    # Long enough to carry 128 bits, but guessed in far fewer tries.
    "the alphabet in order": ("abcdefghijklmnopqrstuvwxyzABCDEF", "guessable"),
    "a keyboard walk": ("qwertyuiopasdfghjklzxcvbnm1234567890", "guessable"),
    "a 34-character passphrase": ("correct-horse-battery-staple-1984x", "guessable"),
    "32 random hex digits": (secrets.token_hex(16), "guessable"),
}


WHERE = [(case, ("file", "environment")[i % 2]) for i, case in enumerate(WEAK)]
WHERE += [("a space inside", "file"), ("201 characters", "environment")]
"""Each weak token given to a server from the environment or from a file, in turn (both go to
the one check), so that each source is refused every kind of weakness; the one with a space
inside from both (a file's line is stripped)."""


@pytest.mark.parametrize(("case", "where"), WHERE)
def test_a_weak_organiser_token_is_refused_at_start_in_one_line(
    tmp_path: Path, case: str, where: str
) -> None:
    token, why = WEAK[case]
    if where == "file":
        token_file = tmp_path / "organiser-token"
        token_file.write_text(token + "\n")
        done = serve_refused(["--organiser-token-file", str(token_file)], tmp_path)
    else:
        done = serve_refused([], tmp_path, env={"BERGEN_ORGANISER_TOKEN": token})
    assert done.returncode == ExitStatus.USAGE, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("bergen serve: the organiser token"), lines[0]
    assert why in lines[0]
    assert token not in lines[0], "the refusal repeats the secret"


def test_an_organiser_token_file_that_cannot_be_read_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "no-such-token"
    done = serve_refused(["--organiser-token-file", str(missing)], tmp_path)
    assert done.returncode == ExitStatus.USAGE, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(missing) in lines[0], done.stderr


def _bergen_token(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*bergen_command(), "token", *args],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
        check=False,
    )


def test_a_token_from_bergen_token_is_taken_by_the_server_and_abandons_a_match(
    farm: ServerFarm, sqlite_url: str
) -> None:
    made = _bergen_token()
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert re.fullmatch(r"bgo_[A-Za-z0-9_-]{43}[A-Za-z0-9]{6}", token), token
    assert auth.is_generated_organiser_token(token)
    assert _bergen_token().stdout.strip() != token
    server = farm.start(sqlite_url, organiser_token=token)
    with Client(server.target) as client:
        created = client.create(2)
        client.abandon(created.match_id, token, "closed by the organiser")
        view = client.stub.GetMatch(pb.GetMatchRequest(match_id=created.match_id)).view
    assert view.phase == pb.PHASE_ENDED
    assert view.result.reason == pb.MATCH_END_REASON_ABANDONED


def test_bergen_token_writes_a_token_file_only_when_there_is_none(
    farm: ServerFarm, sqlite_url: str, tmp_path: Path
) -> None:
    token_file = tmp_path / "organiser-token"
    wrote = _bergen_token("--file", str(token_file))
    assert wrote.returncode == 0, wrote.stderr
    assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
    token = token_file.read_text().strip()
    kept = _bergen_token("--file", str(token_file))
    assert kept.returncode == 0, kept.stderr
    assert token_file.read_text().strip() == token
    farm.start(sqlite_url, extra_args=["--organiser-token-file", str(token_file)])
    token_file.write_text(_example_token() + "\n")
    refused = _bergen_token("--file", str(token_file))
    assert refused.returncode == ExitStatus.USAGE
    assert "example value" in refused.stderr
    assert token_file.read_text().strip() == _example_token()


def test_the_servers_own_format_is_known_by_its_checksum_and_long_random_tokens_pass() -> None:
    made = auth.new_organiser_token()
    auth.check_organiser_token(made)
    assert auth.is_generated_organiser_token(made)
    # One character changed: the checksum no longer holds (a typo, not the server's token).
    typo = made[:10] + ("A" if made[10] != "A" else "B") + made[11:]
    assert not auth.is_generated_organiser_token(typo)
    # A token made elsewhere passes on the estimator's word when it is random and long.
    auth.check_organiser_token(secrets.token_hex(24))
    auth.check_organiser_token(secrets.token_urlsafe(32))
