"""No module imports another module's private name (`from x import _y`).

A name with a leading underscore is its module's own business: a module that needs it from
elsewhere gets a public name, so that what one module offers another is visible where it is
written. The project's packages, the benchmarks and the tests are all held to it. A public
name imported under a private alias (`from x import say as _say`) is fine: it keeps the name
private to the importer.
"""

from __future__ import annotations

import ast
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
FOLDERS = ("domain", "server", "cli_client", "proto/bergen/api", "migrations", "bench", "tests")


def private_imports(source: str, where: str) -> list[str]:
    """Each `from <module> import _name` in `source`, as `where:line: module._name`.
    Dunder names (`__version__`) and `import _thread`-style standard modules are not private
    names of another module of ours."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom):
            continue
        for alias in node.names:
            name = alias.name
            if name.startswith("_") and not name.startswith("__"):
                module = "." * node.level + (node.module or "")
                dot = "" if module.endswith(".") else "."
                found.append(f"{where}:{node.lineno}: {module}{dot}{name}")
    return found


def test_no_module_imports_another_modules_private_name():
    found = []
    for folder in FOLDERS:
        for path in sorted((PROJECT / folder).rglob("*.py")):
            if "_pb2" in path.name:
                continue  # generated code
            rel = path.relative_to(PROJECT)
            found += private_imports(path.read_text(encoding="utf-8"), str(rel))
    assert not found, "private names imported from another module:\n" + "\n".join(found)


def test_a_private_import_is_found_and_a_private_alias_is_not():
    source = (
        "from a.b import _hidden, shown\n"
        "from . import _sibling\n"
        "from x import say as _say\n"
        "from y import __version__\n"
        "def f():\n"
        "    from .z import _late\n"
    )
    assert private_imports(source, "m.py") == [
        "m.py:1: a.b._hidden",
        "m.py:2: ._sibling",
        "m.py:6: .z._late",
    ]
