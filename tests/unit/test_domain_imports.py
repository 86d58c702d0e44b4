"""The rules modules import one another without a cycle: each can be read, and loaded, on
top of the ones it builds on."""

from __future__ import annotations

import ast
from pathlib import Path

import bergen.domain

DOMAIN = Path(bergen.domain.__file__).resolve().parent


def _imports(path: Path) -> set[str]:
    """The domain modules `path` imports, at module level or in a function, leaving out
    `if TYPE_CHECKING:` blocks (never run)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for n in ast.walk(node))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped or not isinstance(node, ast.ImportFrom):
            continue
        module = node.module or ""
        if node.level == 1 and module:
            found.add(module.split(".")[0])
        elif node.level == 1:
            found.update(a.name for a in node.names)
        elif module.startswith("bergen.domain"):
            parts = module.split(".")
            found.update([parts[2]] if len(parts) > 2 else [a.name for a in node.names])
    return {m for m in found if (DOMAIN / f"{m}.py").exists()}


def test_the_domain_modules_import_one_another_without_a_cycle() -> None:
    graph = {p.stem: _imports(p) for p in DOMAIN.glob("*.py")}
    assert graph["engine"] >= {"fastplay", "state"}  # the walk sees imports at all
    done: set[str] = set()
    path: list[str] = []

    def visit(module: str) -> None:
        assert module not in path, f"import cycle: {' -> '.join([*path, module])}"
        if module in done:
            return
        path.append(module)
        for imported in sorted(graph[module]):
            visit(imported)
        path.pop()
        done.add(module)

    for module in sorted(graph):
        visit(module)
