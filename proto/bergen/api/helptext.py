"""What every command shows a person, the server's commands' included: the examples its help
ends with, its help's layout, and its error line."""

from __future__ import annotations

import argparse
import textwrap


def error_line(command: str, sentence: str, reason: str) -> str:
    """`bergen play: no match 6f1c... (MATCH_NOT_FOUND)`: the one shape of every error a
    command prints, `reason` a stable UPPER_SNAKE word."""
    return f"bergen {command}: {sentence} ({reason})"


def at_least_one(text: str) -> int:
    """A whole number from 1, as an option's type. Raises argparse.ArgumentTypeError."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def examples(*lines: str) -> str:
    """The EXAMPLES section that ends a command's help: each example a command line,
    optionally followed by `  # what it does`."""
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Fills the paragraphs of a description or an epilog to the terminal's width, and keeps
    as written a paragraph that is a table or a list: one whose first line ends with `:`
    (`examples:`, `exit statuses:`) or that has an indented line."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out = []
        for paragraph in text.split("\n\n"):
            lines = paragraph.splitlines()
            if not lines:
                continue
            if lines[0].rstrip().endswith(":") or any(x[:1].isspace() for x in lines):
                out.append("\n".join(indent + x for x in lines))
            else:
                out.append(
                    textwrap.fill(
                        " ".join(paragraph.split()),
                        width,
                        initial_indent=indent,
                        subsequent_indent=indent,
                    )
                )
        return "\n\n".join(out)


__all__ = ["HelpFormatter", "at_least_one", "error_line", "examples"]
