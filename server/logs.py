"""How `bergen serve` writes its log: text for a terminal, or one JSON object a line for a
log collector (`--log-format json`).

A JSON line has `time` (UTC, ISO 8601 with milliseconds), `level`, `logger` and `message`,
then the fields the line was logged with (`extra={"fields": {...}}`, or a function giving
them, called only when a line is written as JSON): a call's line adds
`rpc`, `status`, `duration_ms`, `peer`, and the `match_id`, `tournament_id` and `seat` its
request or answer names (`bergen.server.edge.CallLog`); `reason` and `error` for a refusal.
A traceback goes in `exception`. Nothing a client sent is written unescaped.

Lines are written by one thread of their own (`log_in_background`), so a command never waits
for stderr, and formatted there too when they can be: a record whose message arguments are
plain values (text, numbers) is kept as it is and formatted by the writing thread, in a batch
with the others of its moment; any other record (a traceback, an argument that is an object
which could change before the line is written) is formatted whole in the thread that logs it,
as are a JSON line's fields. The writing thread writes what has come every `FLUSH_S`; a
WARNING or worse is written by the thread that logs it, with everything held before it, so it
is out when logging returns; stopping writes everything still held.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections import deque
from datetime import UTC, datetime
from enum import Enum
from typing import IO, Any

from .threads import Thread

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_BASE = ("time", "level", "logger", "message")
FLUSH_S = 0.05
"""The writing thread writes the lines that came within this many seconds together."""
_PLAIN = frozenset({str, int, float, bool, type(None), bytes})
"""Arguments that cannot change between the logging and the writing of a line."""


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


class TextFormatter(logging.Formatter):
    """TEXT_FORMAT, with the time's text up to the second made once a second: the same
    lines as logging.Formatter(TEXT_FORMAT), without a strftime a line."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)
        self._second: tuple[int, str] = (-1, "")
        """The last second formatted, and its text (one tuple: read and set at once)."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        second = int(record.created)
        known = self._second
        if known[0] != second:
            text = time.strftime(self.default_time_format, self.converter(record.created))
            known = self._second = (second, text)
        msec = self.default_msec_format
        return known[1] if msec is None else msec % (known[1], record.msecs)


def formatter(kind: str) -> logging.Formatter:
    """The formatter of `kind` (one of FORMATS). Raises ValueError for another."""
    if kind == "json":
        return JsonFormatter()
    if kind == "text":
        return TextFormatter()
    raise ValueError(f"log format {kind!r}: one of {', '.join(FORMATS)}")


def _plain(args: Any) -> bool:
    """Whether a record's message arguments are all plain values (see `_PLAIN`)."""
    if isinstance(args, tuple):
        return all(type(a) in _PLAIN or isinstance(a, Enum) for a in args)
    if isinstance(args, dict):
        return all(type(a) in _PLAIN or isinstance(a, Enum) for a in args.values())
    return args is None


class BackgroundLog(logging.Handler):
    """The root logger's handler: keeps each record (or its line, formatted at once when it
    cannot wait: see the module) for its writing thread, which formats the kept records and
    writes everything that came in one write every `flush_s`. A WARNING or worse is written
    by the logging thread itself, after what is held. `stop` writes what is still held and
    ends the thread."""

    def __init__(self, stream: IO[str], kind: str = "text", flush_s: float = FLUSH_S) -> None:
        super().__init__()
        self.setFormatter(formatter(kind))
        self._json = kind == "json"
        self._stream = stream
        self._flush_s = flush_s
        self._held: deque[logging.LogRecord | str] = deque()
        self._wake = threading.Event()
        self._writing = threading.Lock()
        """Held while lines are taken and written: two writers never reorder lines."""
        self._stopping = False
        self._stopped = False
        self._thread = Thread(target=self._run, name="bergen-log", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def handle(self, record: logging.LogRecord) -> bool:
        # No handler lock: appending to a deque is atomic, and the thread formats alone.
        if not self.filter(record):
            return False
        self.emit(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self._stopped:  # no thread left to write it
                self._held.append(self.format(record))
                self._write()
                return
            if self._can_wait(record):
                self._held.append(record)
            else:
                self._held.append(self.format(record))
            if record.levelno >= logging.WARNING:
                self._write()
            elif self._stopping:
                self._wake.set()
        except Exception:
            self.handleError(record)

    def _can_wait(self, record: logging.LogRecord) -> bool:
        """Whether `record` may be formatted later, by the writing thread: nothing in it can
        change before then. A JSON line's fields are taken now (a function giving them is
        called here), and must be plain values too."""
        if record.exc_info is not None or record.stack_info is not None:
            return False
        if not _plain(record.args):
            return False
        if self._json:
            fields = getattr(record, "fields", None)
            if callable(fields):
                fields = record.fields = fields()
            if fields is not None and not (isinstance(fields, dict) and _plain(fields)):
                return False
        return True

    def _run(self) -> None:
        while True:
            self._wake.wait(self._flush_s)
            self._wake.clear()
            stopping = self._stopping
            self._write()
            if stopping:
                return

    def _write(self) -> None:
        with self._writing:
            self._write_held()

    def _write_held(self) -> None:
        held, lines = self._held, []
        while held:
            item = held.popleft()
            if isinstance(item, str):
                lines.append(item)
                continue
            try:
                lines.append(self.format(item))
            except Exception:
                lines.append(f"(a log line that could not be formatted: {item.msg!r:.200})")
        if lines:
            try:
                self._stream.write("\n".join(lines) + "\n")
                self._stream.flush()
            except (OSError, ValueError):
                pass  # stderr closed: nowhere left to say it

    def stop(self) -> None:
        """Write what is held and end the writing thread (idempotent)."""
        self._stopping = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()
        self._stopped = True
        self._write()  # anything logged while it stopped


def log_in_background(
    level: str, kind: str = "text", stream: IO[str] | None = None
) -> BackgroundLog:
    """Send the root logger's records at `level` and above to `stream` (stderr) in `kind`,
    through a writing thread (stop the handler returned to flush it); the process's records
    do not note their caller, thread or process, which no line shows. Raises ValueError for
    an unknown `kind`."""
    # Neither format shows where a line was logged from, nor its thread or process: a
    # record need not find out (the logging HOWTO's "Optimization"; finding the caller walks
    # a gRPC call's deep stack on every call's line).
    logging._srcfile = None  # the HOWTO's own spelling
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = BackgroundLog(stream or sys.stderr, kind)
    root = logging.getLogger()
    root.setLevel(level)
    root.addHandler(handler)
    handler.start()
    return handler
