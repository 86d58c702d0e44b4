"""No import cycles among the project's modules.

Every module of the packages pyproject.toml maps (`package-dir`) is parsed with `ast`; its
imports, at module level and inside functions alike, become edges to the project's modules
they name. Imports under `if TYPE_CHECKING:` are left out: they never run. Importing
`a.b.c` is an edge to `a.b.c` only, not to the packages `a` and `a.b` that Python imports on
the way; `from a.b import c` is an edge to `a.b.c` when that is a module, else to `a.b`; so a
package's `__init__` that imports its submodules (`from . import x`) has an edge to each.

A strongly connected component of more than one module, or a module importing itself, is a
cycle: the test fails and prints chains such as `a -> b -> a`, each edge with its line.
"""

from __future__ import annotations

import ast
import tomllib
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from itertools import pairwise
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]

# Graph: module -> {imported module -> "path:line" of the first import of it}.
Graph = Mapping[str, Mapping[str, str]]


def package_roots(project: Path) -> dict[str, Path]:
    """Each top-level package name of pyproject.toml's `package-dir` with its folder."""
    with (project / "pyproject.toml").open("rb") as f:
        package_dir = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    return {name: project / folder for name, folder in package_dir.items()}


def module_files(roots: Mapping[str, Path]) -> dict[str, Path]:
    """Every module's installed name with its file; a folder without `__init__.py` is no
    package and is skipped."""
    modules: dict[str, Path] = {}
    for package, folder in roots.items():
        for path in sorted(folder.rglob("*.py")):
            relative = path.relative_to(folder)
            folders = relative.parents
            if any(not (folder / d / "__init__.py").is_file() for d in folders):
                continue
            parts = relative.with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((package, *parts))] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement in `node`, except in the body of `if TYPE_CHECKING:`."""
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
        return
    if isinstance(node, ast.If) and _is_type_checking(node.test):
        children: Iterable[ast.AST] = node.orelse
    else:
        children = ast.iter_child_nodes(node)
    for child in children:
        yield from _import_nodes(child)


def _known(name: str, modules: set[str]) -> str | None:
    """`name` if it is one of `modules`, else its longest prefix that is, else None."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def imports_of(module: str, path: Path, modules: set[str]) -> dict[str, int]:
    """The project modules `module` (in file `path`) imports, each with the line of its
    first import."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: dict[str, int] = {}

    def add(target: str | None, line: int) -> None:
        if target is not None and target not in found:
            found[target] = line

    for node in _import_nodes(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(_known(alias.name, modules), node.lineno)
            continue
        if node.level:
            parts = package.split(".")
            base = ".".join(parts[: len(parts) - (node.level - 1)])
            source = f"{base}.{node.module}" if node.module else base
        else:
            source = node.module or ""
        for alias in node.names:
            submodule = f"{source}.{alias.name}"
            add(submodule if submodule in modules else _known(source, modules), node.lineno)
    return dict(sorted(found.items(), key=lambda item: item[1]))


def import_graph(project: Path) -> dict[str, dict[str, str]]:
    """Every project module's imports of project modules, each with where it is made."""
    files = module_files(package_roots(project))
    names = set(files)
    graph: dict[str, dict[str, str]] = {}
    for module, path in files.items():
        where = path.relative_to(project)
        graph[module] = {
            target: f"{where}:{line}" for target, line in imports_of(module, path, names).items()
        }
    return graph


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of `graph`, each sorted; nodes only named as
    targets count as nodes without edges."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return components


def _shortest_path(graph: Graph, start: str, goal: str, within: set[str]) -> list[str]:
    """A shortest path from `start` to `goal` through `within` (one exists: they share a
    strongly connected component)."""
    came_from: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        if v == goal:
            break
        for w in sorted(graph.get(v, {})):
            if w in within and w not in came_from:
                came_from[w] = v
                queue.append(w)
    path: list[str] = []
    node: str | None = goal
    while node is not None:
        path.append(node)
        node = came_from[node]
    return path[::-1]


def cycles(graph: Graph) -> list[list[str]]:
    """The import cycles of `graph`, each as a chain that ends where it starts: for every
    edge inside a strongly connected component, the shortest cycle through it (the same
    cycle once), and every self-import."""
    found: list[list[str]] = []
    seen: set[tuple[str, ...]] = set()
    for component in strongly_connected(graph):
        members = set(component)
        for u in component:
            for v in sorted(graph.get(u, {})):
                if v not in members:
                    continue
                loop = [u] if u == v else [u, *_shortest_path(graph, v, u, members)[:-1]]
                # One rotation of each cycle: starting at its least module.
                start = loop.index(min(loop))
                loop = loop[start:] + loop[:start]
                if tuple(loop) not in seen:
                    seen.add(tuple(loop))
                    found.append([*loop, loop[0]])
    return sorted(found)


def describe(cycle: list[str], graph: Graph) -> str:
    """`a -> b -> a`, then where each of its imports is made."""
    edges = [f"    {a} -> {b}  ({graph[a][b]})" for a, b in pairwise(cycle)]
    return "\n".join([" -> ".join(cycle), *edges])


def test_the_project_has_no_import_cycles():
    graph = import_graph(PROJECT)
    assert len(graph) >= 50
    assert "bergen.server.store.postgres" in graph
    found = cycles(graph)
    message = "\n".join(describe(c, graph) for c in found)
    assert not found, f"{len(found)} import cycles:\n{message}"


def test_the_cycle_finder_finds_components_and_self_imports():
    graph = {
        "a": {"b": "a.py:1"},
        "b": {"c": "b.py:1", "d": "b.py:2"},
        "c": {"a": "c.py:1", "b": "c.py:2"},
        "d": {"d": "d.py:1"},
        "e": {"a": "e.py:1"},
        "f": {},
    }
    assert [c for c in strongly_connected(graph) if len(c) > 1] == [["a", "b", "c"]]
    assert cycles(graph) == [["a", "b", "c", "a"], ["b", "c", "b"], ["d", "d"]]
    assert describe(["b", "c", "b"], graph).splitlines() == [
        "b -> c -> b",
        "    b -> c  (b.py:1)",
        "    c -> b  (c.py:2)",
    ]
    assert cycles({"a": {"b": ""}, "b": {"c": ""}, "c": {}}) == []


def test_imports_are_resolved_as_python_resolves_them(tmp_path):
    pkg = tmp_path / "src" / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "notes").mkdir()
    files = {
        "__init__.py": "from . import a\n",
        "a.py": (
            "from typing import TYPE_CHECKING\n"
            "import os\n"
            "from .sub import deep\n"
            "if TYPE_CHECKING:\n"
            "    from . import b\n"
            "else:\n"
            "    from . import c\n"
        ),
        "b.py": "def late():\n    from .a import something\n    import top.pkg.sub\n",
        "c.py": "from top.pkg import sub\nfrom top.pkg.sub.deep import name\n",
        "sub/__init__.py": "",
        "sub/deep.py": "from ..b import late\nfrom .. import *\n",
        "notes/ignored.py": "from top.pkg import a\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(text, encoding="utf-8")
    modules = module_files({"top.pkg": pkg})
    assert sorted(modules) == [
        "top.pkg",
        "top.pkg.a",
        "top.pkg.b",
        "top.pkg.c",
        "top.pkg.sub",
        "top.pkg.sub.deep",
    ]
    names = set(modules)

    def edges(module: str) -> dict[str, int]:
        return imports_of(module, modules[module], names)

    assert edges("top.pkg") == {"top.pkg.a": 1}
    assert edges("top.pkg.a") == {"top.pkg.sub.deep": 3, "top.pkg.c": 7}
    assert edges("top.pkg.b") == {"top.pkg.a": 2, "top.pkg.sub": 3}
    assert edges("top.pkg.c") == {"top.pkg.sub": 1, "top.pkg.sub.deep": 2}
    assert edges("top.pkg.sub") == {}
    assert edges("top.pkg.sub.deep") == {"top.pkg.b": 1, "top.pkg": 2}
