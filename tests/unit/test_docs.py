"""The README and docs/ read whole in a clone: every relative link names a file of the
repository and, with `#anchor`, a heading of that file (GitHub's heading-to-anchor rules), no
path leaves the repository through `..`, and the README stays a front door (at most 250
lines)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 250

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(?:.+?)\1")
# [text](target "title"), ![alt](target); the target may be <wrapped>.
INLINE_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]"  # the text, which may hold [brackets]
    r"\(\s*(<[^>]*>|[^\s)]*)(?:\s+\"[^\"]*\")?\s*\)"  # (target "title")
)
REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(\S+)", re.M)
HTML_LINK = re.compile(r"""(?:href|src)\s*=\s*["']([^"']+)["']""")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
PARENT_PATH = re.compile(r"(?<![\w.])(?:\.\./)+[^\s`)\"'>\]]*")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line outside fenced code blocks."""
    out: list[tuple[int, str]] = []
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        opened = FENCE.match(line)
        if fence is None:
            if opened:
                fence = opened.group(1)[0] * len(opened.group(1))
                continue
            out.append((number, line))
        elif opened and opened.group(1).startswith(fence):
            fence = None
    return out


def without_code_spans(line: str) -> str:
    return CODE_SPAN.sub("", line)


def link_targets(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every link and image in the prose of a Markdown text."""
    found: list[tuple[int, str]] = []
    for number, line in prose_lines(text):
        plain = without_code_spans(line)
        for match in INLINE_LINK.finditer(plain):
            found.append((number, match.group(1).strip("<>")))
        for match in REFERENCE_DEFINITION.finditer(plain):
            found.append((number, match.group(1).strip("<>")))
        for match in HTML_LINK.finditer(plain):
            found.append((number, match.group(1)))
    return found


def anchor_of(heading: str) -> str:
    """The anchor GitHub gives a heading: its text as shown, lowercased, every character but
    letters, digits, spaces, hyphens and underscores left out, spaces made hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links and images: their text
    text = text.replace("`", "")
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.strip().lower()
    kept = "".join(
        c
        for c in text
        if c in " -_" or unicodedata.category(c)[0] in ("L", "N") or unicodedata.category(c) == "Mn"
    )
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor of a Markdown file's headings, repeated ones numbered as GitHub does."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        heading = HEADING.match(line)
        if not heading:
            continue
        base = anchor_of(heading.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def inside_repository(path: Path, root: Path = ROOT) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def broken_links(document: Path, root: Path = ROOT) -> list[str]:
    """Why each relative link of `document` does not resolve in a clone of `root`."""
    problems: list[str] = []
    text = document.read_text(encoding="utf-8")
    name = document.relative_to(root)
    for number, target in link_targets(text):
        if not target or EXTERNAL.match(target):
            continue
        where = f"{name}:{number}: {target}"
        path_part, _, fragment = target.partition("#")
        path_part = unquote(path_part)
        if path_part.startswith("/"):
            resolved = root / path_part.lstrip("/")
        elif path_part:
            resolved = document.parent / path_part
        else:
            resolved = document
        if not inside_repository(resolved, root):
            problems.append(f"{where}: leaves the repository")
            continue
        if not resolved.exists():
            problems.append(f"{where}: no such file in the repository")
            continue
        if fragment:
            if resolved.is_dir() or resolved.suffix.lower() != ".md":
                problems.append(f"{where}: an anchor into a file that has no headings")
            elif unquote(fragment).lower() not in anchors(resolved):
                problems.append(f"{where}: {resolved.relative_to(root)} has no heading #{fragment}")
    return problems


def paths_leaving_the_repository(document: Path, root: Path = ROOT) -> list[str]:
    """Every `../` path in the prose of `document` (a link or a path in code) that resolves
    outside the repository `root`: a clone does not have it."""
    problems: list[str] = []
    name = document.relative_to(root)
    for number, line in prose_lines(document.read_text(encoding="utf-8")):
        for match in PARENT_PATH.finditer(line):
            if not inside_repository(document.parent / match.group(0), root):
                problems.append(f"{name}:{number}: {match.group(0)} is outside the repository")
    return problems


@pytest.mark.parametrize("document", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_in_a_clone(document: Path) -> None:
    assert broken_links(document) == []


@pytest.mark.parametrize("document", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_path_leaves_the_repository(document: Path) -> None:
    assert paths_leaving_the_repository(document) == []


def test_the_readme_is_a_front_door_of_at_most_250_lines() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


def test_every_docs_file_says_first_who_it_is_for() -> None:
    for path in sorted((ROOT / "docs").glob("*.md")):
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        assert lines[0].startswith("# "), f"{path.name} starts with its title"
        assert lines[1].startswith("*For "), f"{path.name} says next who it is for"


# The checks themselves, on a repository made to fail them.


def test_anchors_follow_githubs_rules() -> None:
    assert anchor_of("Reads on a hot standby: `--read-database`") == (
        "reads-on-a-hot-standby---read-database"
    )
    assert anchor_of("4. Rotating keys") == "4-rotating-keys"
    assert anchor_of("`bergen watch`, `bergen resign`") == "bergen-watch-bergen-resign"
    assert anchor_of("Fair dealing: commit and reveal") == "fair-dealing-commit-and-reveal"


def test_links_to_missing_files_headings_or_outside_the_clone_are_found(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "docs" / "rules.md").write_text("# Rules\n\n## The lead\n\n## The lead\n")
    readme = repo / "README.md"
    readme.write_text(
        "The rules are in `../shared/RULES.md` and [here](../shared/RULES.md).\n"
        "[a](docs/missing.md) [b](docs/rules.md#no-such-heading) `[c](ignored.md)`\n"
        "[d](docs/rules.md#the-lead-1) [e](https://example.org/x.md) [f](#nowhere)\n"
        "```sh\n[g](in-a-code-block.md) ../also/ignored\n```\n",
        encoding="utf-8",
    )
    assert broken_links(readme, repo) == [
        "README.md:1: ../shared/RULES.md: leaves the repository",
        "README.md:2: docs/missing.md: no such file in the repository",
        "README.md:2: docs/rules.md#no-such-heading: docs/rules.md has no heading #no-such-heading",
        "README.md:3: #nowhere: README.md has no heading #nowhere",
    ]
    assert paths_leaving_the_repository(readme, repo) == [
        "README.md:1: ../shared/RULES.md is outside the repository",
        "README.md:1: ../shared/RULES.md is outside the repository",
    ]
    inside = repo / "docs" / "cli.md"
    inside.write_text("[back](../README.md) `../README.md`\n", encoding="utf-8")
    assert broken_links(inside, repo) == []
    assert paths_leaving_the_repository(inside, repo) == []
