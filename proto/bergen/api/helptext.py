"""What every command's help ends with, the server's commands' included: its examples."""

from __future__ import annotations


def examples(*lines: str) -> str:
    """The EXAMPLES section that ends a command's help: each example a command line,
    optionally followed by `  # what it does`."""
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


__all__ = ["examples"]
