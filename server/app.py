"""The application: a command side and a query side over one store, one feed and one cache.

Servicers translate messages into calls on `commands` (every write, through one unit of
work) and `queries` (views, replays, records, the audit log, the listing, watching); a
tournament's on `tournaments`, and a seat's or player's hand-off to another device on
`hand_offs`.
"""

from __future__ import annotations

from dataclasses import dataclass

from bergen.api.signing import RecordSigner

from .commands import Clock, MatchCommands, UnitOfWork, wall_ms
from .feed import EventFeed
from .handoffs import HandOffCommands
from .identity import Identity
from .keys import LogKeys
from .matches import MatchRepository
from .players import Players
from .queries import MatchQueries
from .ratings import RatingQueries
from .store import EventStore
from .tlog import TransparencyLog
from .tournaments import (
    TableWakes,
    TournamentCommands,
    TournamentRepository,
    TournamentSeeds,
    TournamentWork,
)


@dataclass(frozen=True, slots=True)
class Settings:
    organiser_token: str | None = None
    restrict_create: bool = False
    signer: RecordSigner | None = None
    """Signs finished matches' records; unsigned records when None."""
    tlog: TransparencyLog | None = None
    """The transparency log: checkpoints, proofs, and records that carry them."""


@dataclass(frozen=True, slots=True)
class Application:
    commands: MatchCommands
    queries: MatchQueries
    repository: MatchRepository
    tournaments: TournamentCommands
    work: UnitOfWork
    hand_offs: HandOffCommands
    players: Players
    ratings: RatingQueries
    tlog: TransparencyLog | None = None


def build_application(
    store: EventStore,
    feed: EventFeed,
    settings: Settings,
    log_keys: LogKeys | None = None,
    clock: Clock = wall_ms,
) -> Application:
    """The command and query sides sharing one cache of folded matches, and the
    tournaments' commands, the players and their ratings. Seat tokens and player tokens are
    sealed under keys derived from `log_keys` (the store's own), with plain SHA-256 without
    them (`bergen.server.auth.SeatTokens`); tournament seeds are derived from them too
    (`bergen.server.tournaments.TournamentSeeds`), and the keys hand-off codes are hashed
    under (`bergen.server.handoffs`)."""
    repository = MatchRepository(store)
    identity = Identity(settings.organiser_token, log_keys)
    work = UnitOfWork(store, repository, feed)
    tournaments = TournamentRepository(store)
    wakes = TableWakes()
    feed.listen(wakes.note)
    commands = MatchCommands(work, repository, identity, settings.restrict_create, clock)
    tournament_commands = TournamentCommands(
        TournamentWork(store, tournaments, feed, clock),
        tournaments,
        repository,
        identity,
        TournamentSeeds(log_keys),
        settings.signer,
        feed,
        wakes,
        commands,
        clock,
        settings.tlog,
    )
    return Application(
        commands,
        MatchQueries(store, repository, feed, identity, settings.signer, settings.tlog),
        repository,
        tournament_commands,
        work,
        HandOffCommands(store, repository, tournament_commands, identity, log_keys, clock),
        Players(store, feed, log_keys),
        RatingQueries(store, feed.ratings),
        settings.tlog,
    )


__all__ = ["Application", "Settings", "build_application"]
