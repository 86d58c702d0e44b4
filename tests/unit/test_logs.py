"""`bergen serve`'s log writer (`bergen.server.logs`): every line written, in order, as it was
when logged, many in one write, a warning at once, and nothing lost on stop."""

from __future__ import annotations

import io
import json
import logging
import threading
import time
from collections.abc import Iterator

import pytest

from bergen.server import logs


class Counted(io.StringIO):
    """A stream that counts its writes."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    named = logging.getLogger(f"bergen.test.logs.{time.monotonic_ns()}")
    named.propagate = False
    named.setLevel(logging.DEBUG)
    yield named
    for handler in list(named.handlers):
        named.removeHandler(handler)


def writer(logger: logging.Logger, kind: str = "text", flush_s: float = 0.05) -> tuple[
    logs.BackgroundLog, Counted
]:  # fmt: skip
    stream = Counted()
    handler = logs.BackgroundLog(stream, kind, flush_s)
    logger.addHandler(handler)
    handler.start()
    return handler, stream


def test_every_line_is_written_in_each_threads_order_by_stop(logger):
    handler, stream = writer(logger)

    def say(name: str) -> None:
        for i in range(300):
            logger.info("%s line %d", name, i)

    threads = [threading.Thread(target=say, args=(f"t{n}",)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    handler.stop()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1200
    for n in range(4):
        mine = [ln.split(": ", 1)[1] for ln in lines if f": t{n} line" in ln]
        assert mine == [f"t{n} line {i}" for i in range(300)]
    assert all(" INFO bergen.test.logs." in ln for ln in lines)


def test_the_lines_of_a_moment_go_out_in_one_write(logger):
    handler, stream = writer(logger, flush_s=0.5)
    for i in range(200):
        logger.info("call %d OK %.1f ms %s", i, 0.5, "ipv4:127.0.0.1:1")
    handler.stop()
    assert len(stream.getvalue().splitlines()) == 200
    assert stream.writes <= 3  # not one a line


def test_a_warning_is_written_when_logging_returns_after_what_was_held(logger):
    handler, stream = writer(logger, flush_s=60.0)
    try:
        logger.info("quiet")
        logger.warning("loud %s", "now")
        # Out when logging returns, after what was held before it.
        lines = stream.getvalue().splitlines()
        assert len(lines) == 2 and "quiet" in lines[0] and "loud now" in lines[1]
    finally:
        handler.stop()


def test_an_argument_that_changes_after_logging_is_written_as_it_was(logger):
    handler, stream = writer(logger, flush_s=60.0)
    seats = ["ann"]
    logger.info("seats %s", seats)
    seats.append("bob")
    handler.stop()
    assert stream.getvalue().splitlines()[0].endswith("seats ['ann']")


def test_a_traceback_is_written_with_its_line(logger):
    handler, stream = writer(logger)
    try:
        raise ValueError("boom")
    except ValueError:
        logger.exception("it failed")
    handler.stop()
    text = stream.getvalue()
    assert "it failed" in text and "Traceback" in text and "ValueError: boom" in text


def test_json_fields_are_taken_when_the_line_is_logged(logger):
    handler, stream = writer(logger, "json", flush_s=60.0)
    fields = {"rpc": "/bergen.v1.BergenService/Play", "seat": 1}
    logger.info("%s OK", "Play", extra={"fields": lambda: dict(fields)})
    logger.info("nested", extra={"fields": {"deep": fields}})
    fields["seat"] = 0
    handler.stop()
    first, second = (json.loads(ln) for ln in stream.getvalue().splitlines())
    assert first["message"] == "Play OK" and first["seat"] == 1 and first["level"] == "INFO"
    assert second["deep"]["seat"] == 1


def test_a_line_logged_after_stop_is_still_written(logger):
    handler, stream = writer(logger)
    handler.stop()
    handler.stop()  # idempotent
    logger.info("late %d", 1)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].endswith("late 1")


def test_log_in_background_sends_the_roots_records_at_its_level():
    stream = Counted()
    root = logging.getLogger()
    level = root.level
    handler = logs.log_in_background("WARNING", "text", stream)
    try:
        logging.getLogger("bergen.test.root").info("not this")
        logging.getLogger("bergen.test.root").error("this %s", "one")
    finally:
        handler.stop()
        root.removeHandler(handler)
        root.setLevel(level)
    assert stream.getvalue().splitlines()[-1].endswith("ERROR bergen.test.root: this one")
    assert "not this" not in stream.getvalue()


def test_a_text_line_is_what_loggings_own_formatter_writes():
    """The text formatter makes the time's text once a second: each line is still the one
    logging.Formatter(TEXT_FORMAT) makes, across seconds and back again."""
    ours, plain = logs.formatter("text"), logging.Formatter(logs.TEXT_FORMAT)
    base = 1_764_633_600.0  # a whole second
    for created in (base, base + 0.001, base + 0.999, base + 1.0, base + 61.5, base + 0.5):
        record = logging.LogRecord("bergen.x", logging.INFO, __file__, 1, "m %s", ("a",), None)
        record.created, record.msecs = created, (created - int(created)) * 1000
        assert ours.format(record) == plain.format(record)
        assert ours.formatTime(record, "%H:%M") == plain.formatTime(record, "%H:%M")
