"""A small terminal screen: what a person sees after a program's output, escape sequences
and all, so that a test can tell whether one thing was drawn over another.

It keeps the lines and a cursor, and acts on what a line-drawing program sends: text,
carriage return, line feed, erase line (`ESC [ n K`), cursor up (`ESC [ n A`) and down,
cursor to column (`ESC [ n G`); other sequences (colours, showing the cursor) draw nothing.
"""

from __future__ import annotations

import re

_SEQUENCE = re.compile(r"\x1b\[([?0-9;]*)([A-Za-z])|\x1b[()][A-Z0-9]|\x1b[=>]")


class Screen:
    def __init__(self) -> None:
        self.lines: list[list[str]] = [[]]
        self.row = 0
        self.col = 0

    def feed(self, data: str) -> None:
        i = 0
        while i < len(data):
            found = _SEQUENCE.match(data, i)
            if found is not None:
                self._sequence(found.group(1) or "", found.group(2) or "")
                i = found.end()
                continue
            c = data[i]
            i += 1
            if c == "\r":
                self.col = 0
            elif c == "\n":
                self.row += 1
                self.col = 0
                while len(self.lines) <= self.row:
                    self.lines.append([])
            elif c == "\x08":
                self.col = max(0, self.col - 1)
            elif c >= " ":
                line = self.lines[self.row]
                while len(line) < self.col:
                    line.append(" ")
                if self.col < len(line):
                    line[self.col] = c
                else:
                    line.append(c)
                self.col += 1

    def _sequence(self, arg: str, command: str) -> None:
        n = int(arg) if arg.isdigit() else None
        if command == "K":
            line = self.lines[self.row]
            if n == 2:
                line.clear()
            elif n == 1:
                for k in range(min(self.col, len(line))):
                    line[k] = " "
            else:
                del line[self.col :]
        elif command == "A":
            self.row = max(0, self.row - (n or 1))
        elif command == "B":
            self.row += n or 1
            while len(self.lines) <= self.row:
                self.lines.append([])
        elif command == "G":
            self.col = (n or 1) - 1

    @property
    def text(self) -> list[str]:
        return ["".join(line).rstrip() for line in self.lines]
