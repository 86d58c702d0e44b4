"""Headless Chromium for the web tests (Debian's, launched by Playwright from PyPI with
`executable_path`), and helpers to wait on a page and take its screenshots.

Skipped (saying why) without /usr/bin/chromium or playwright, unless BERGEN_REQUIRE_BROWSER=1.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "build" / "screenshots"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}
ACTION_TIMEOUT_MS = 90_000


def _unavailable() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (it is in the dev extra)"
    if not os.access(CHROMIUM, os.X_OK):
        return f"{CHROMIUM} is missing (.ci/browser installs Debian's chromium)"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    reason = _unavailable()
    if reason is not None:
        if os.environ.get("BERGEN_REQUIRE_BROWSER") == "1":
            pytest.fail(f"BERGEN_REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        new_context = b.new_context

        def roomy_context(*args: Any, **kwargs: Any) -> Any:
            # On a machine busy with other tests, a click or a selector can take longer than
            # Playwright's 30 s default to settle; a wait that never ends still fails.
            context = new_context(*args, **kwargs)
            context.set_default_timeout(ACTION_TIMEOUT_MS)
            return context

        b.new_context = roomy_context
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport=DESKTOP)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    context.close()
    assert not errors, f"errors in the page: {errors}"


def wait_js(pg: Any, predicate: str, timeout: float = 60.0) -> None:
    """Wait until the JavaScript function `predicate` returns true in the page, polled from
    here (Playwright's own polling evaluates a string, which the site's CSP forbids)."""
    deadline = time.monotonic() + timeout
    while not _holds(pg, predicate):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {predicate}")
        time.sleep(0.02)


def shoot(pg: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for label, size in (("desktop", DESKTOP), ("phone", PHONE)):
        pg.set_viewport_size(size)
        pg.wait_for_timeout(100)
        pg.screenshot(path=str(SCREENSHOTS / f"{name}-{label}.png"), full_page=True)
    pg.set_viewport_size(DESKTOP)


def _holds(pg: Any, predicate: str) -> bool:
    """Whether `predicate` holds in the page; false while the page is being replaced (a
    reload or a move to another page), which ends the context it is evaluated in, or has no
    body yet (the new document of a reload, before its body is parsed)."""
    from playwright.sync_api import Error

    try:
        return bool(pg.evaluate(f"() => !!document.body && ({predicate})()"))
    except Error as e:
        if "context was destroyed" in str(e) or "navigat" in str(e):
            return False
        raise
