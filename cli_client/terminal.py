"""How the terminal shows things: Unicode domino tiles, colours for sides, raw keys, and a
live line rewritten in place under what is printed.

Nothing here knows a rule of Bergen: it draws tiles, lines and reads keys.
"""

from __future__ import annotations

import os
import select
import sys
import termios
import threading
import tty
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO

from rich.console import Console
from rich.text import Text

HORIZONTAL_TILE_00 = 0x1F031
"""U+1F031 DOMINO TILE HORIZONTAL-00-00; the tile a|b as laid left to right is + 7*a + b."""
HORIZONTAL_BACK = "\U0001f030"

SIDE_STYLES = ("bold cyan", "bold magenta", "bold yellow", "bold green")
"""One colour per side, in side order (at most four sides)."""

_NO_DOMINO_GLYPHS = ("dumb", "linux", "vt100", "vt220")
"""TERM values of terminals whose fonts have no domino tiles."""


@dataclass(frozen=True, slots=True)
class Look:
    """How to draw: Unicode domino tiles or `[a|b]` text, and whether to colour."""

    unicode: bool = False
    colour: bool = False

    def line_tile(self, left: int, right: int) -> str:
        """A tile on the line, `left` touching the tile before it."""
        if self.unicode:
            return chr(HORIZONTAL_TILE_00 + 7 * left + right)
        return f"[{left}|{right}]"

    def hidden(self, count: int) -> str:
        """`count` tiles the viewer may not see."""
        noun = "tile" if count == 1 else "tiles"
        if self.unicode and count:
            return f"{HORIZONTAL_BACK * count} ({count} {noun} hidden)"
        return f"({count} {noun} hidden)"

    def side_style(self, side: int) -> str:
        return SIDE_STYLES[side % len(SIDE_STYLES)] if self.colour else ""

    def style(self, style: str) -> str:
        return style if self.colour else ""


PLAIN = Look()


def detect_look(console: Console, plain: bool) -> Look:
    """Unicode tiles on a UTF-8 terminal whose font has them, colour on a colour terminal;
    plain when `plain` or when the output is not a terminal."""
    if plain or not console.is_terminal:
        return PLAIN
    term = os.environ.get("TERM", "")
    unicode = console.encoding.lower().replace("-", "") == "utf8" and term not in _NO_DOMINO_GLYPHS
    return Look(unicode=unicode, colour=console.color_system is not None)


# ----- keys -------------------------------------------------------------------------------

FORWARD = "forward"
BACK = "back"
NEXT_HAND = "next_hand"
PREVIOUS_HAND = "previous_hand"
FIRST = "first"
LAST = "last"
QUIT = "quit"

_KEYS = {
    b"\x1b[C": FORWARD,
    b"\x1bOC": FORWARD,
    b"n": FORWARD,
    b" ": FORWARD,
    b"\r": FORWARD,
    b"\n": FORWARD,
    b"l": FORWARD,
    b"\x1b[D": BACK,
    b"\x1bOD": BACK,
    b"p": BACK,
    b"h": BACK,
    b"\x7f": BACK,
    b"]": NEXT_HAND,
    b"\x1b[6~": NEXT_HAND,
    b"[": PREVIOUS_HAND,
    b"\x1b[5~": PREVIOUS_HAND,
    b"g": FIRST,
    b"\x1b[H": FIRST,
    b"\x1bOH": FIRST,
    b"G": LAST,
    b"\x1b[F": LAST,
    b"\x1bOF": LAST,
    b"q": QUIT,
    b"Q": QUIT,
    b"\x1b": QUIT,
    b"\x03": QUIT,
    b"\x04": QUIT,
}


def is_interactive() -> bool:
    """Both ends of the conversation are a terminal."""
    return sys.stdin.isatty() and sys.stdout.isatty()


@contextmanager
def raw_keys() -> Iterator[int]:
    """Put the terminal on stdin in cbreak mode (keys arrive one at a time, unechoed) and
    give its file descriptor; the old mode comes back on exit. Raises termios.error when
    stdin is not a terminal."""
    fd = sys.stdin.fileno()
    old = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield fd
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, old)


SIGNAL_CHECK_S = 0.2
"""How often `line_typed` and `read_key` look for a signal taken while they wait."""


def line_typed(stream: IO[str] | None = None) -> None:
    """Return once a terminal on `stream` (stdin) has a line to read, looking for signals
    every SIGNAL_CHECK_S seconds meanwhile, so that a Ctrl-C is acted on at once: one the
    system hands to another of this process's threads, or that comes just before a blocking
    read begins, would otherwise wait in the interpreter for the next key. Returns at once
    when `stream` is no terminal (a pipe's lines may already sit in the stream's own buffer,
    which no poll sees), or cannot be polled."""
    stream = stream or sys.stdin
    try:
        fd = stream.fileno()
        if not os.isatty(fd):
            return
        _await_input(fd)
    except (AttributeError, OSError, ValueError):
        return


def _await_input(fd: int) -> None:
    """Return once `fd` can be read, back in the interpreter every SIGNAL_CHECK_S seconds
    meanwhile, where a signal taken in the meantime raises (see `line_typed`)."""
    while not select.select([fd], [], [], SIGNAL_CHECK_S)[0]:
        pass


def read_key(fd: int) -> str | None:
    """The next key as one of FORWARD, BACK, ..., QUIT; None for a key that means nothing.
    End of input reads as QUIT. A Ctrl-C meanwhile raises KeyboardInterrupt at once."""
    _await_input(fd)
    data = os.read(fd, 1)
    if not data:
        return QUIT
    if data == b"\x1b" and _ready(fd):
        # An escape sequence arrives at once; a lone Escape has nothing after it.
        data += os.read(fd, 1)
        if data == b"\x1bO" and _ready(fd):
            data += os.read(fd, 1)
        elif data == b"\x1b[":
            while _ready(fd):
                more = os.read(fd, 1)
                data += more
                if not more or more.isalpha() or more == b"~":
                    break
    return _KEYS.get(data)


def _ready(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0.05)[0])


def read_char(fd: int, timeout: float) -> str | None:
    """The next character typed on `fd` (in cbreak mode) within `timeout` seconds: None when
    none came, "" at the end of the input. An escape sequence (an arrow key) reads as one
    ESC; a byte beyond ASCII as the Latin-1 character of that byte."""
    if not select.select([fd], [], [], timeout)[0]:
        return None
    data = os.read(fd, 1)
    if not data:
        return ""
    if data == b"\x1b":
        while _ready(fd):
            if not os.read(fd, 16):
                break
    return data.decode("latin-1")


# ----- the live line ----------------------------------------------------------------------

_ERASE = "\r\x1b[2K"
"""Back to the start of the line, and clear it."""


class LiveLine:
    """One line at the bottom of the output, rewritten in place (a countdown, a prompt and
    what is typed after it), and the lines printed above it. Thread-safe.

    Disabled (the output is no terminal), it never draws and prints lines as they come. The
    line is cut to the console's width, so that the terminal never wraps it: a wrapped line
    could not be rewritten from its start.
    """

    def __init__(self, console: Console, enabled: bool) -> None:
        self.console = console
        self.enabled = enabled
        self.text: Text | None = None
        self._shown = False
        self._lock = threading.RLock()

    def show(self, text: Text | None) -> None:
        """Make `text` the live line (None: no line) and draw it."""
        with self._lock:
            self.text = text
            if self.enabled:
                self._draw()

    def print(self, markup: str) -> None:
        """Print a line of console markup above the live line."""
        with self._lock:
            self._erase()
            self.console.print(markup)
            if self.enabled:
                self._draw()

    def done(self) -> None:
        """Clear the live line, leaving the cursor at the start of an empty line."""
        with self._lock:
            self.text = None
            self._erase()

    def _erase(self) -> None:
        if self._shown:
            self.console.file.write(_ERASE)
            self.console.file.flush()
            self._shown = False

    def _draw(self) -> None:
        self._erase()
        if self.text is None:
            return
        text = self.text.copy()
        text.truncate(max(1, self.console.width - 1))
        self.console.print(text, end="")
        self.console.file.flush()
        self._shown = True
