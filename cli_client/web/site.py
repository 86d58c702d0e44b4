"""The whole gateway, composed: the spectators' site and API (`app`), the players' API
(`players`), rematches (`rematch`), tournament entrants (`entrants`), the links that carry a
seat or an entrant to another device (`handoff`), registered players signing in
(`accounts`) and the ratings (`ratings`). Each module's routes are added here, so that none
of them imports another's composition."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.applications import Starlette

from bergen.cli_client.connect import Endpoint

from . import accounts, entrants, handoff, players, ratings, rematch
from .app import create_app


def create_site(
    endpoint: Endpoint | str, *, seal_key_file: Path | str | None = None, **options: Any
) -> Starlette:
    """The gateway to the game server at `endpoint`: `app.create_app` with `options`, the
    players' API with its seats sealed with the key of `seal_key_file` (default: the state
    directory's, made when missing), rematches, tournament entrants, the links for another
    device, registered players and the ratings. Raises OSError or ValueError for a seal key
    file that cannot be used."""
    site = create_app(endpoint, **options)
    site.router.routes.extend(players.install(site, seal_key_file))
    site.router.routes.extend(rematch.install(site))
    site.router.routes.extend(entrants.routes(site))
    site.router.routes.extend(handoff.routes())
    site.router.routes.extend(accounts.routes())
    site.router.routes.extend(ratings.routes(site))
    return site
