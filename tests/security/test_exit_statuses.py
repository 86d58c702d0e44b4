"""One fault, one exit status, in every command; and no verdict of OK that no key vouches for.

A tampered tournament's export stops as a tampered match's does (6, INVALID), and a record or
pack whose signer nobody trusts is UNTRUSTED (8), not OK.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from e2e.conftest import on_backend
from e2e.servers import ServerFarm, bergen_command
from e2e.test_cli_tournament import environment

from bergen.api.exit_status import ExitStatus

from .conftest import ORGANISER_TOKEN, Database
from .test_log_authenticity import Access


def bergen(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*bergen_command(), *args], capture_output=True, text=True, env=env, timeout=60
    )


def ok_json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def test_a_tampered_tournament_exports_with_the_status_of_a_tampered_match(
    farm: ServerFarm, database: Database, tmp_path: Path
) -> None:
    # Without the transparency log, which would refuse the whole rewritten log first
    # (LOG_ROLLED_BACK, the same exit status): here the tournament's own rows are checked.
    no_tlog = ("--no-transparency-log",)
    server = farm.start(database.server_url, organiser_token=ORGANISER_TOKEN, extra_args=no_tlog)
    state = tmp_path / "state"
    organiser = environment(server.target, state, BERGEN_ORGANISER_TOKEN=ORGANISER_TOKEN)
    anyone = environment(server.target, state)
    made = ok_json(bergen(organiser, "tournament", "create", "--rounds", "1", "--json"))
    tid = made["tournament_id"]
    for name in ("Ann", "Bob"):
        ok_json(bergen(anyone, "tournament", "register", tid, "--name", name, "--json"))
    ok_json(bergen(organiser, "tournament", "cancel", tid, "--note", "closed", "--json"))
    honest = tmp_path / "honest"
    ok_json(bergen(anyone, "tournament", "export", tid, "--out", str(honest), "--json"))

    access = Access(database.owner_url)
    stream = f"tournament-{tid}"
    entrant = next(r for r in access.rows(stream) if r.payload.get("players") == ["Bob"])
    access.rewrite(stream, entrant.seq, {**entrant.payload, "players": ["Mallory"]})
    assert server.terminate() == 0  # the rows are read again from the store
    server = farm.start(database.server_url, organiser_token=ORGANISER_TOKEN, extra_args=no_tlog)
    anyone = environment(server.target, state)
    done = bergen(anyone, "tournament", "export", tid, "--out", str(tmp_path / "pack"))
    assert done.returncode == ExitStatus.INVALID, done.stdout + done.stderr
    assert "(LOG_TAMPERED)" in done.stderr
    assert not (tmp_path / "pack" / "tournament.json").exists()


@on_backend("sqlite")
def test_a_pack_nobody_vouches_for_is_untrusted_not_ok(
    farm: ServerFarm, database: Database, tmp_path: Path
) -> None:
    # Without the transparency log, which would refuse the whole rewritten log first
    # (LOG_ROLLED_BACK, the same exit status): here the tournament's own rows are checked.
    no_tlog = ("--no-transparency-log",)
    server = farm.start(database.server_url, organiser_token=ORGANISER_TOKEN, extra_args=no_tlog)
    state = tmp_path / "state"
    organiser = environment(server.target, state, BERGEN_ORGANISER_TOKEN=ORGANISER_TOKEN)
    made = ok_json(bergen(organiser, "tournament", "create", "--rounds", "1", "--json"))
    tid = made["tournament_id"]
    ok_json(bergen(organiser, "tournament", "cancel", tid, "--json"))
    pack = tmp_path / "pack"
    # The export learns the server's key (first use); a verifier elsewhere has not.
    ok_json(bergen(organiser, "tournament", "export", tid, "--out", str(pack), "--json"))
    elsewhere = {**organiser, "XDG_CONFIG_HOME": str(tmp_path / "elsewhere")}
    done = bergen(elsewhere, "verify", str(pack))
    assert done.returncode == ExitStatus.UNTRUSTED, done.stdout + done.stderr
    assert done.stdout.startswith(f"UNTRUSTED: tournament {tid}")
    here = bergen(organiser, "verify", str(pack))
    assert here.returncode == ExitStatus.SUCCESS, here.stdout + here.stderr
    assert here.stdout.rstrip().endswith(f"the key known for {server.target}")
