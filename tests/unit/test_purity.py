"""The rules are pure: `domain/` imports only the standard library and itself."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import bergen.domain

DOMAIN = Path(bergen.domain.__file__).resolve().parent


def imports_outside_stdlib(path: Path) -> list[str]:
    problems: list[str] = []
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        where = f"{path.name}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top not in sys.stdlib_module_names:
                    problems.append(f"{where}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                top = (node.module or "").split(".")[0]
                if top not in sys.stdlib_module_names and top != "__future__":
                    problems.append(f"{where}: from {node.module} import ...")
            elif node.level > 1:
                # The package is flat: a relative import may only name a sibling module.
                problems.append(f"{where}: relative import leaves the package")
        elif isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            if name in ("__import__", "importlib.import_module", "import_module"):
                problems.append(f"{where}: dynamic import {name}(...)")
    return problems


def test_domain_imports_only_the_standard_library_and_itself():
    files = sorted(DOMAIN.rglob("*.py"))
    assert len(files) >= 10
    problems = [p for f in files for p in imports_outside_stdlib(f)]
    assert problems == []


def test_the_purity_check_catches_a_foreign_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import os\nimport grpc\nfrom sqlalchemy import orm\nfrom .. import server\n"
        "from .tiles import Tile\nx = __import__('rich')\n",
        encoding="utf-8",
    )
    problems = imports_outside_stdlib(bad)
    assert len(problems) == 4
    assert any("grpc" in p for p in problems)
    assert any("sqlalchemy" in p for p in problems)
    assert any("leaves the package" in p for p in problems)
    assert any("__import__" in p for p in problems)


def test_domain_relative_imports_name_modules_of_the_package():
    modules = {f.stem for f in DOMAIN.glob("*.py")}
    for f in DOMAIN.glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                assert node.module.split(".")[0] in modules, f"{f.name}: .{node.module}"
