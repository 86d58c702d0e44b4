"""A Ctrl-C at `bergen play`'s prompt, or while `bergen-replay` waits for a key, is acted on
at once, whichever of the process's threads the system hands the signal to (a blocking read
in the main thread would otherwise wait for the next key)."""

from __future__ import annotations

import io
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from rich.console import Console

from bergen.cli_client import terminal
from bergen.cli_client.seat import Quit, ask


@pytest.fixture
def terminal_stdin(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """stdin on a new pseudo-terminal; yields the terminal's other end, to type on."""
    typist, reader = os.openpty()
    stream = open(reader, encoding="utf-8", closefd=True)  # noqa: SIM115 (closed below)
    monkeypatch.setattr(sys, "stdin", stream)
    try:
        yield typist
    finally:
        stream.close()
        os.close(typist)


@pytest.fixture
def interrupts() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt in this test (a test runner's worker may ignore it)."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are handled in the main thread only")
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def _interrupt_from_another_thread(
    typist: int, after: float, unblock_after: float
) -> threading.Event:
    """SIGINT taken by a thread that is not the main one, `after` seconds from now; a line
    typed `unblock_after` seconds from now, so that a read that missed it still ends, unless
    the event returned is set first."""
    done = threading.Event()

    def taker() -> None:
        time.sleep(after)
        # The signal is sent to this thread: its handler runs here, and only flags the
        # interpreter, which acts on it when the main thread next runs Python code.
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
        if not done.wait(unblock_after - after):
            os.write(typist, b"1\n")

    threading.Thread(target=taker, daemon=True).start()
    return done


@pytest.mark.usefixtures("interrupts")
def test_a_ctrl_c_another_thread_took_ends_the_prompt_at_once(terminal_stdin: int) -> None:
    done = _interrupt_from_another_thread(terminal_stdin, after=0.3, unblock_after=5.0)
    console = Console(file=io.StringIO())
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            ask(console, 3)
    finally:
        done.set()
    # Not held until the line typed at 5 s: within a poll of the signal.
    assert time.monotonic() - started < 0.3 + 4 * terminal.SIGNAL_CHECK_S


def test_the_prompt_takes_a_line_typed_on_the_terminal(terminal_stdin: int) -> None:
    os.write(terminal_stdin, b"2\n")
    assert ask(Console(file=io.StringIO()), 3) == 1


def test_a_pipe_is_read_without_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    # Its lines may already be in the stream's buffer, where a poll of the pipe cannot see:
    # after the first line both sit there, and the pipe stays open with nothing more in it.
    reader, writer = os.pipe()
    os.write(writer, b"9\nq\n")
    stream = open(reader, encoding="utf-8", closefd=True)  # noqa: SIM115 (closed below)
    monkeypatch.setattr(sys, "stdin", stream)
    monkeypatch.setattr(terminal.select, "select", _no_poll)
    console = Console(file=io.StringIO())
    try:
        with pytest.raises(Quit, match="you left"):
            ask(console, 3)
    finally:
        stream.close()
        os.close(writer)
    assert "type a number from 1 to 3" in console.file.getvalue()  # type: ignore[attr-defined]


def _no_poll(*_: object) -> object:
    raise AssertionError("a stream that is no terminal was polled")


@pytest.mark.usefixtures("interrupts")
def test_a_ctrl_c_another_thread_took_ends_a_wait_for_a_key_at_once(terminal_stdin: int) -> None:
    # bergen-replay's stepping waits for one key at a time.
    done = _interrupt_from_another_thread(terminal_stdin, after=0.3, unblock_after=5.0)
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            terminal.read_key(sys.stdin.fileno())
    finally:
        done.set()
    assert time.monotonic() - started < 0.3 + 4 * terminal.SIGNAL_CHECK_S
