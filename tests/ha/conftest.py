"""Fixtures of the high-availability tests: a PostgreSQL primary and its hot standby of this
test's own (bergen.tests.ha.clusters), and `bergen serve` processes on them.

The clusters need Debian's postgresql-common and root; without them the tests are skipped
saying why, or fail when BERGEN_REQUIRE_POSTGRES=1 (CI). The pg_auto_failover formation
(bergen.tests.ha.autofailover) needs pg_autoctl too (`.ci/autofailover` installs it): without
it its test is skipped saying why, or fails when BERGEN_REQUIRE_AUTOFAILOVER=1.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e.servers import ServerFarm

from bergen.server.store import upgrade_to_head

from . import autofailover
from .clusters import ClusterPair, held, why_not


def _pair(synchronous: bool) -> Iterator[ClusterPair]:
    reason = why_not()
    if reason is not None:
        if os.environ.get("BERGEN_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"BERGEN_REQUIRE_POSTGRES=1 but {reason}")
        pytest.skip(f"a primary and standby cannot be made here: {reason}")
    with held():
        pair = ClusterPair(synchronous=synchronous)
        try:
            pair.make()
            upgrade_to_head(pair.primary_url)
            pair.wait_replayed()
            yield pair
        finally:
            pair.drop()


@pytest.fixture
def pg_pair() -> Iterator[ClusterPair]:
    """A primary and a hot standby streaming from it (asynchronously), migrated."""
    yield from _pair(synchronous=False)


@pytest.fixture
def pg_sync_pair() -> Iterator[ClusterPair]:
    """A primary and a hot standby that acknowledges every commit (synchronous_standby_names):
    promoting the standby loses no acknowledged write."""
    yield from _pair(synchronous=True)


@pytest.fixture
def formation() -> Iterator[autofailover.Formation]:
    """A pg_auto_failover monitor and two nodes, the first primary, the second its
    synchronous secondary. Skipped without pg_autoctl, unless BERGEN_REQUIRE_AUTOFAILOVER=1."""
    reason = autofailover.why_not()
    if reason is not None:
        if os.environ.get("BERGEN_REQUIRE_AUTOFAILOVER") == "1":
            pytest.fail(f"BERGEN_REQUIRE_AUTOFAILOVER=1 but {reason}")
        pytest.skip(
            f"a pg_auto_failover formation cannot be made here: {reason}"
            " (set BERGEN_REQUIRE_AUTOFAILOVER=1 to fail instead)"
        )
    with autofailover.held():
        autofailover.drop_leftovers()
        made = autofailover.Formation()
        try:
            made.make()
            yield made
        finally:
            made.drop()


@pytest.fixture
def farm(tmp_path: Path) -> Iterator[ServerFarm]:
    farm = ServerFarm(tmp_path)
    yield farm
    problems = farm.stop_all()
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)
