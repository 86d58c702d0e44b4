"""The user's own folder for Bergen: what a client keeps between runs (the servers' keys it
trusts, player tokens), each file readable by its owner alone."""

from __future__ import annotations

import os
from pathlib import Path


def config_dir() -> Path:
    """$BERGEN_CONFIG_DIR, else $XDG_CONFIG_HOME/bergen, else ~/.config/bergen."""
    own = os.environ.get("BERGEN_CONFIG_DIR")
    if own:
        return Path(own)
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(xdg) if xdg else Path.home() / ".config"
    return base / "bergen"
