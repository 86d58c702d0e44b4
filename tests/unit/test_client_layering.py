"""The command line never imports the server: what both need lives in `bergen.api`."""

from __future__ import annotations

import ast
from pathlib import Path

import bergen.cli_client

CLIENT = Path(bergen.cli_client.__file__).resolve().parent
FORBIDDEN = "bergen.server"


def _names_server(name: str) -> bool:
    return name == FORBIDDEN or name.startswith(FORBIDDEN + ".")


def server_imports(source: str, filename: str = "<test>") -> list[str]:
    """Each place in `source` (a module of bergen.cli_client) that imports the server: an
    import statement, a relative import climbing to it, or a string naming it (as
    importlib.import_module, __import__ or an entry point would be given)."""
    problems: list[str] = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        where = f"{filename}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            problems += [f"{where}: import {a.name}" for a in node.names if _names_server(a.name)]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                module = node.module or ""
            else:  # from bergen.cli_client: level 1 is the package, level 2 is `bergen`
                base = ["bergen", "cli_client"][: max(0, 3 - node.level)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            names = [module] + [f"{module}.{a.name}" for a in node.names]
            if any(_names_server(n) for n in names):
                problems.append(f"{where}: from {'.' * node.level}{node.module or ''} import")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and FORBIDDEN in node.value
        ):
            problems.append(f"{where}: the string {node.value[:60]!r}")
    return problems


def test_no_module_of_the_command_line_imports_the_server() -> None:
    files = sorted(CLIENT.rglob("*.py"))
    assert len(files) > 5
    problems = [p for f in files for p in server_imports(f.read_text("utf-8"), f.name)]
    assert problems == []


def test_the_check_sees_every_way_of_importing_the_server() -> None:
    caught = [
        "import bergen.server.main",
        "from bergen.server import main",
        "from bergen import server",
        "from ..server import main",
        "from .. import server",
        "import importlib\nimportlib.import_module('bergen.server.main')",
        "__import__('bergen.server')",
    ]
    for source in caught:
        assert server_imports(source), source
    fine = ["import bergen.api.exit_status", "from .. import api", "from . import verify"]
    for source in fine:
        assert server_imports(source) == [], source
