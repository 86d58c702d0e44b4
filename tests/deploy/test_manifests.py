"""What the deployment files promise without running them: the Kubernetes database init is
deploy/roles.sql and its password script as they are, the example Secrets' key and token are
refused by the server, and compose publishes on 127.0.0.1 only."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from e2e.servers import bergen_command

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_the_kubernetes_database_init_is_deploy_roles_sql_and_its_password_script() -> None:
    manifest = (DEPLOY / "k8s" / "postgres.yaml").read_text(encoding="utf-8")
    for key, path in (
        ("10-roles.sql", DEPLOY / "roles.sql"),
        ("20-bergen-passwords.sh", DEPLOY / "postgres-init" / "20-bergen-passwords.sh"),
    ):
        body = "".join(
            "    " + line if line.strip() else "\n"
            for line in path.read_text(encoding="utf-8").splitlines(True)
        )
        assert f"  {key}: |\n{body}" in manifest, f"{key} differs from {path}"


def _example(key: str) -> str:
    """A value of deploy/k8s/secrets.example.yaml (each is one double-quoted line)."""
    text = (DEPLOY / "k8s" / "secrets.example.yaml").read_text(encoding="utf-8")
    found = re.search(rf"^  {re.escape(key)}: (\".*\")$", text, re.MULTILINE)
    assert found is not None, key
    value: str = json.loads(found.group(1))
    assert "EXAMPLE-ONLY" in value
    return value


@pytest.mark.parametrize(
    ("key", "setting", "says"),
    [
        ("organiser-token", "BERGEN_ORGANISER_TOKEN", "organiser token"),
        ("signing-key.pem", "BERGEN_SIGNING_KEY", "signing key"),
        ("log-key", "BERGEN_LOG_KEY", "log key"),
    ],
)
def test_the_example_secrets_are_refused_by_the_server(
    key: str, setting: str, says: str, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERGEN_")}
    env["BERGEN_SIGNING_KEY"] = str(tmp_path / "signing-key.pem")
    if setting == "BERGEN_ORGANISER_TOKEN":
        env[setting] = _example(key)
    else:
        (tmp_path / key).write_text(_example(key), encoding="utf-8")
        env[setting] = str(tmp_path / key)
    served = subprocess.run(
        [*bergen_command(), "serve", "--listen", "127.0.0.1:0", "--database",
         f"sqlite:///{tmp_path / 'bergen.db'}"],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert served.returncode == 2, served.stderr
    assert says in served.stderr.lower(), served.stderr


def test_compose_publishes_on_this_machine_only() -> None:
    compose = (DEPLOY / "compose.yaml").read_text(encoding="utf-8")
    published = re.findall(r"^\s*ports: \[(.*)\]$", compose, re.MULTILINE)
    assert len(published) == 2
    for ports in published:
        for port in json.loads(f"[{ports}]"):
            assert port.startswith("127.0.0.1:"), port
    assert "ports:\n" not in compose, "ports written as a block list: check them too"
