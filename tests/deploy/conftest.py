"""Fixtures of the deployment tests: the e2e servers' farms (and the hook that shows their logs
when a test fails)."""

from __future__ import annotations

from e2e.conftest import farm, pytest_runtest_makereport, sqlite_url

__all__ = ["farm", "pytest_runtest_makereport", "sqlite_url"]
