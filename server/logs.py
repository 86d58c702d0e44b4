"""How `bergen serve` writes its log: text for a terminal, or one JSON object a line for a
log collector (`--log-format json`).

A JSON line has `time` (UTC, ISO 8601 with milliseconds), `level`, `logger` and `message`,
then the fields the line was logged with (`extra={"fields": {...}}`, or a function giving
them, called only when a line is written as JSON): a call's line adds
`rpc`, `status`, `duration_ms`, `peer`, and the `match_id`, `tournament_id` and `seat` its
request or answer names (`bergen.server.edge.CallLog`); `reason` and `error` for a refusal.
A traceback goes in `exception`. Nothing a client sent is written unescaped.

Lines are formatted in the thread that logs them and written by one thread of their own
(`log_in_background`), so a command never waits for stderr.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
from datetime import UTC, datetime
from queue import Queue
from typing import Any

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_BASE = ("time", "level", "logger", "message")


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (see the module)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if callable(fields):
            fields = fields()
        if isinstance(fields, dict):
            for key, value in fields.items():
                if isinstance(key, str) and key not in _BASE:
                    out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        # ASCII only: a line separator a client put in a match id (U+2028) must not split
        # the line for a collector that splits on it.
        return json.dumps(out, ensure_ascii=True, default=str, separators=(",", ":"))


def formatter(kind: str) -> logging.Formatter:
    """The formatter of `kind` (one of FORMATS). Raises ValueError for another."""
    if kind == "json":
        return JsonFormatter()
    if kind == "text":
        return logging.Formatter(TEXT_FORMAT)
    raise ValueError(f"log format {kind!r}: one of {', '.join(FORMATS)}")


class _Formatted(logging.handlers.QueueHandler):
    """Formats each record whole (traceback included) before it is queued, and queues the
    line only: the writing thread prints it as it is."""

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        line = self.format(record)
        return logging.makeLogRecord({"msg": line, "levelno": record.levelno, "name": record.name})


def log_in_background(level: str, kind: str = "text") -> logging.handlers.QueueListener:
    """Send the root logger's records at `level` and above to stderr in `kind`, through a
    queue and a writing thread (stop the listener returned to flush it). Raises ValueError
    for an unknown `kind`."""
    queue: Queue[logging.LogRecord] = Queue()
    handler = _Formatted(queue)
    handler.setFormatter(formatter(kind))
    out = logging.StreamHandler()
    out.setFormatter(logging.Formatter("%(message)s"))
    listener = logging.handlers.QueueListener(queue, out)
    root = logging.getLogger()
    root.setLevel(level)
    root.addHandler(handler)
    listener.start()
    return listener
