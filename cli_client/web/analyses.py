"""The web replay's analyses: each finished match analysed once (`bergen-replay --analyse`'s
analysis, its default seed and budget) and kept.

An analysis is asked for (`POST /api/matches/{id}/analysis`) and then read (`GET`, which
never starts one). One is computed at a time, on every core, in processes of its own (the
gateway's event loop never waits on it); a few more wait their turn (more are refused:
the gateway is busy), and a client starts at most `ANALYSES_PER_MINUTE` (its limiter's
"analyse"). Each is kept in memory (the latest `KEPT`) and, when the gateway has a state
directory, in a file there named after the match, the engine, the seed and the budget, so
that a restarted gateway serves it again without working it out.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
from collections import OrderedDict
from pathlib import Path
from typing import Any

from bergen.api.convert import event_in
from bergen.api.durable import replace_whole

from ..analysis import DEFAULT_BUDGET_S, ENGINE, analyse_match, as_json

log = logging.getLogger(__name__)

SEED = "0"
KEPT = 256
"""Analyses kept in memory."""
WAITING = 4
"""Analyses that may wait for the one being worked out; more are refused (busy)."""
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


class NotEnded(Exception):
    """The match has not ended: its analysis would judge seats on tiles not shown yet."""


class TooBusy(Exception):
    """As many analyses wait as may."""


class Analyses:
    """The analyses asked of this gateway: done (kept), and under way."""

    def __init__(self, folder: Path | None = None, workers: int | None = None) -> None:
        self._folder = folder
        self._workers = workers
        self._done: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._running: dict[str, asyncio.Task[None]] = {}
        self._turn = asyncio.Semaphore(1)
        self._failed: dict[str, str] = {}

    def _key(self, match_id: str) -> str:
        return f"{match_id}-{ENGINE.replace('/', '-')}-{SEED}-{DEFAULT_BUDGET_S:g}"

    def _path(self, key: str) -> Path | None:
        if self._folder is None:
            return None
        return self._folder / f"{_SAFE.sub('_', key)}.json"

    def state(self, match_id: str) -> tuple[str, dict[str, Any] | None]:
        """("done", the analysis), ("pending", None), ("failed", {"error": why}) or ("none",
        None)."""
        key = self._key(match_id)
        found = self._done.get(key)
        if found is None:
            found = self._read(key)
        if found is not None:
            self._done[key] = found
            self._done.move_to_end(key)
            while len(self._done) > KEPT:
                self._done.popitem(last=False)
            return "done", found
        if key in self._running:
            return "pending", None
        if key in self._failed:
            return "failed", {"error": self._failed[key]}
        return "none", None

    def _read(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        if path is None or not path.exists():
            return None
        try:
            found: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            log.warning("analysis %s: its file cannot be read (%s); worked out again", key, e)
            return None
        return found if found.get("engine") == ENGINE else None

    def start(self, match_id: str, events: list[Any], complete: bool) -> None:
        """Work out the analysis of the match whose replay is `events` (protobuf events,
        `complete` when it has ended). Raises NotEnded, TooBusy."""
        if not complete:
            raise NotEnded(f"match {match_id} has not ended: it is analysed once it has")
        key = self._key(match_id)
        if key in self._running or self.state(match_id)[0] == "done":
            return
        if len(self._running) > WAITING:
            raise TooBusy("this gateway is analysing as many matches as it may: try again soon")
        self._failed.pop(key, None)
        domain_events = [event_in(e)[1] for e in events]
        self._running[key] = asyncio.create_task(self._work(key, domain_events))

    async def _work(self, key: str, events: list[Any]) -> None:
        try:
            async with self._turn:
                analysed = await asyncio.to_thread(
                    analyse_match, events, SEED, DEFAULT_BUDGET_S, self._workers
                )
            body = as_json(analysed)
            self._done[key] = body
            path = self._path(key)
            if path is not None:
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    replace_whole(path, json.dumps(body).encode())
                except OSError as e:
                    log.warning("analysis %s: not kept on disk: %s", key, e)
        except Exception as e:  # an analysis that fails is said so, and may be asked again
            log.exception("analysis %s failed", key)
            self._failed[key] = f"{type(e).__name__}: {e}"
        finally:
            self._running.pop(key, None)

    async def close(self) -> None:
        for task in list(self._running.values()):
            task.cancel()
        for task in list(self._running.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):  # shutting down
                await task


def workers_default() -> int:
    """Processes an analysis uses: every core but one for the gateway, at least one."""
    return max(1, (os.cpu_count() or 1) - 1)
