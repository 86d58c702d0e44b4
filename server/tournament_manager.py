"""The tournaments' process manager: each replica runs one, driven by the store's global order.

When the entrants of a started tournament have all revealed their client seeds, or its reveal
window has passed, it closes the window: the silent ones withdrawn, the seeding fixed. The
deadline is in the tournament's events, so a restart keeps it, and whichever replica is up
when it falls closes the window. When a round is paired it creates the round's matches
(their ids and server seeds derived as TOURNAMENT.md section 3 says, the table's rules) and
seats each entrant's players with their tournament tokens, without JoinMatch; when a
tournament's match ends it records the result; when every table of a round has its result it
pairs the next round (after `round_delay`, unless the organiser starts rounds by hand) or
ends the tournament. A match the organiser settled (abandoned, or forfeited for a side) or
the server abandoned is recorded with that intervention, read from the match's end, whoever
gets there first.

Every step is idempotent, so a crash anywhere, or two replicas doing the same step at once,
neither loses nor doubles one: the reveal window is closed under the command id
`close-reveal`, a round is paired under `pair-round-R`, a result recorded under
`result-round-R-table-T`, the end under `end`, a match's creation is the first event of a
stream whose id is derived (a second one loses the race), and each seat is taken under the
command id `tournament-seat-S`. A step is decided from the tournament's stored state alone,
so whichever replica gets there does the same thing. On start the manager looks at every
tournament, so what a replica killed midway left undone is done.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import replace

from bergen.domain.commands import CreateMatch, TakeSeat
from bergen.domain.errors import (
    BergenError,
    ConcurrencyConflict,
    LogTampered,
    MatchNotInProgress,
    NotFound,
)
from bergen.domain.state import ENDED, SEATING
from bergen.domain.tournament_engine import REVEAL, RUNNING
from bergen.domain.tournament_fairness import table_server_seed
from bergen.domain.tournament_pairing import seats_of
from bergen.domain.tournament_record import MAX_NOTE_CHARS, SERVER, UNPLAYABLE, PlayedTable
from bergen.domain.tournament_standings import ABANDONED

from .commands import Clock, Intent, UnitOfWork, Written, wall_ms
from .matches import EPOCH_KEY, Match, MatchRepository, token_metadata
from .store import StoredEvent
from .threads import Thread
from .tournaments import (
    STREAM_PREFIX,
    Tournament,
    TournamentCommands,
    is_tournament_stream,
    table_match_name,
    table_metadata,
    table_rules,
)
from .worker import Worker

log = logging.getLogger("bergen.server.tournaments")

RETRY_S = 1.0
"""A step that failed (the store down, say) is tried again this long after."""
SEATING_THREADS = 8
"""Tables of a round created and seated at once."""


def seat_command_id(seat: int) -> str:
    return f"tournament-seat-{seat}"


class TournamentManager(Worker):
    """Runs every tournament's automatic steps, in a thread of its own."""

    def __init__(
        self,
        tournaments: TournamentCommands,
        work: UnitOfWork,
        matches: MatchRepository,
        clock: Clock = wall_ms,
    ) -> None:
        super().__init__("bergen-tournaments")
        self._tournaments = tournaments
        self._work = work
        self._matches = matches
        self._clock = clock
        self._index: dict[str, str] = {}
        """Match id -> the tournament whose table it is (the tables paired so far)."""
        self._live: set[str] = set()
        """Tables' matches this manager saw seated and not ended: nothing to do for them until
        their MatchEnded is noted (any replica's, through the feed), so a tournament's step does
        not read every table of its round from the store again."""
        self._dirty: set[str] = set()
        self._due: dict[str, int] = {}
        """Tournaments to look at again at a time (Unix ms): a round delay, the end of a reveal
        window, a retry."""
        self._lock = threading.Lock()
        self.steps = 0
        """Steps this replica wrote (for tests)."""

    def note(self, events: Iterable[StoredEvent]) -> None:
        """Events any replica wrote (the feed's, possibly twice): a tournament's, or the end
        of a tournament's match. Cheap: the work is done in the manager's thread."""
        fresh = False
        with self._lock:
            for e in events:
                if is_tournament_stream(e.stream_id):
                    self._dirty.add(e.stream_id[len(STREAM_PREFIX) :])
                    fresh = True
                elif e.type == "MatchEnded":
                    self._live.discard(e.stream_id)
                    tournament_id = self._index.get(e.stream_id)
                    if tournament_id is not None:
                        self._dirty.add(tournament_id)
                        fresh = True
        if fresh:
            self._wake.set()

    def _run(self) -> None:
        self._scan()
        while not self._stop.is_set():
            try:
                wait = self._work_once()
            except Exception:  # keep running: a passing database error must not end it
                log.exception("tournaments: a bug or a lost database; trying again")
                wait = RETRY_S
            self._wake.wait(wait)
            self._wake.clear()

    def _scan(self) -> None:
        """Look at every tournament (on start: steps may have been left undone)."""
        after = ""
        while not self._stop.is_set():
            try:
                ids = self._tournaments.repository.ids(after, 100)
            except BergenError as e:
                log.warning("tournaments: cannot list them (%s); trying again", e)
                self._stop.wait(RETRY_S)
                continue
            with self._lock:
                self._dirty.update(ids)
            if len(ids) < 100:
                return
            after = ids[-1]

    def _work_once(self) -> float:
        """Look at the tournaments due; the seconds until the next one is (at most a minute)."""
        now = self._clock()
        with self._lock:
            dirty, self._dirty = self._dirty, set()
            for tournament_id, at in list(self._due.items()):
                if at <= now:
                    dirty.add(tournament_id)
                    del self._due[tournament_id]
        for tournament_id in dirty:
            if self._stop.is_set():
                break
            try:
                again = self.advance(tournament_id, fed=True)
            except BergenError as e:
                log.warning("tournament %s: a step failed: %s", tournament_id, e)
                again = self._clock() + int(RETRY_S * 1000)
            if again is not None:
                with self._lock:
                    self._due[tournament_id] = min(again, self._due.get(tournament_id, again))
        with self._lock:
            if self._dirty:
                return 0.0
            if not self._due:
                return 60.0
            return max(0.0, min(60.0, (min(self._due.values()) - self._clock()) / 1000))

    def advance(self, tournament_id: str, fed: bool = False) -> int | None:
        """Do every step `tournament_id` is ready for. Returns when to look again (Unix ms),
        None when only an event can move it. `fed`: every event is given to `note` (the
        manager's own thread, a feed listener), so a table's match seen seated is not read
        again until its MatchEnded is noted; else each table's match is read from the store.
        Raises StorageUnavailable and what a store raises."""
        while True:
            t = self._tournaments.repository.load(tournament_id)
            state = t.state
            if state.phase == REVEAL:
                deadline = state.reveal_deadline_ms
                assert deadline is not None
                now = self._clock()
                if state.unrevealed() and now < deadline:
                    return deadline
                self._count(self._tournaments.close_reveal(tournament_id, now).replayed)
                log.info("tournament %s: reveal window closed", tournament_id)
                continue
            if state.phase != RUNNING:
                return None
            if state.rounds:
                latest = state.rounds[-1]
                with self._lock:
                    for table in latest.tables:
                        if table.match_id is not None:
                            self._index[table.match_id] = tournament_id
                    todo = [
                        table
                        for table in latest.tables
                        if table.match_id is not None
                        and table.result is None
                        and not (fed and table.match_id in self._live)
                    ]
                moved = False
                failed: BaseException | None = None
                for table, outcome in zip(todo, self._tables(t, todo, fed), strict=True):
                    if isinstance(outcome, LogTampered):
                        self._abandon_unplayable(t, latest.round, table, outcome)
                        moved = True
                        continue
                    if isinstance(outcome, BaseException):
                        failed = failed or outcome
                        continue
                    match = outcome
                    if match.state.phase == ENDED and match.state.result is not None:
                        written = self._tournaments.record_match_result(
                            tournament_id, latest.round, table.table, match
                        )
                        self._count(written.replayed)
                        moved = True
                if failed is not None:
                    raise failed
                if moved:
                    continue
                if not state.round_finished:
                    return None
            if state.over:
                self._count(self._tournaments.end(tournament_id).replayed)
                log.info("tournament %s ended", tournament_id)
                return None
            if state.rounds:
                if t.by_hand:
                    return None
                due = t.changed_ms + state.settings.round_delay * 1000
                if state.settings.round_delay and self._clock() < due:
                    return due
            number = state.round + 1
            self._count(self._tournaments.pair(tournament_id, number).replayed)
            log.info("tournament %s: round %d paired", tournament_id, number)

    def _abandon_unplayable(
        self, t: Tournament, round_number: int, table: PlayedTable, why: LogTampered
    ) -> None:
        """Settle a table whose match cannot be trusted: rows at its (derived, public) match
        id fail their authenticators, put there before the server created it or during its
        play. The table is abandoned by the server, saying why, and the tournament goes on
        (TOURNAMENT.md section 3: an intervention, in the record)."""
        tournament_id = t.state.tournament_id
        log.critical(
            "LOG TAMPERED: tournament %s round %d table %d: match %s: %s: the table is "
            "abandoned by the server",
            tournament_id,
            round_number,
            table.table,
            table.match_id,
            why,
        )
        seq = why.metadata.get("seq")
        note = f"{UNPLAYABLE}" + (f" (seq {seq})" if seq else "")
        written = self._tournaments.record_result(
            tournament_id,
            round_number,
            table.table,
            ABANDONED,
            (0,) * len(table.sides),
            None,
            SERVER,
            note[:MAX_NOTE_CHARS],
        )
        self._count(written.replayed)

    def _count(self, replayed: bool) -> None:
        if not replayed:
            with self._lock:
                self.steps += 1

    def _tables(
        self, t: Tournament, tables: list[PlayedTable], fed: bool
    ) -> list[Match | BaseException]:
        """Each table's match, created and seated when it is not yet (`_table`), or what
        that raised. A round's tables are seated several at once: its players wait for
        their tables at its start, while each one's creation and seats wait on the store."""
        if len(tables) < 2:
            return [self._attempt(t, table, fed) for table in tables]
        outcomes: list[Match | BaseException] = [RuntimeError("not seated")] * len(tables)
        left = iter(range(len(tables)))
        taking = threading.Lock()

        def seat() -> None:
            while True:
                with taking:
                    i = next(left, None)
                if i is None:
                    return
                outcomes[i] = self._attempt(t, tables[i], fed)

        # Daemon threads, as the manager's own: a step blocked on the store must not hold
        # the process's exit.
        seating = [
            Thread(target=seat, name="bergen-seating", daemon=True)
            for _ in range(min(SEATING_THREADS, len(tables)))
        ]
        for thread in seating:
            thread.start()
        for thread in seating:
            thread.join()
        return outcomes

    def _attempt(self, t: Tournament, table: PlayedTable, fed: bool) -> Match | BaseException:
        try:
            return self._table(t, table, fed)
        except Exception as e:  # given back to `advance`, which raises the first
            return e

    def _table(self, t: Tournament, table: PlayedTable, fed: bool) -> Match:
        """The match of a table of the latest round, created and seated when it is not yet.
        `fed`: one seen seated is noted as live, so it is not read again until its end."""
        assert table.match_id is not None
        match = self._ensure_match(t, t.state.round, table.table)
        if fed and match.state.phase not in (SEATING, ENDED):
            with self._lock:
                self._live.add(table.match_id)
            # Read once more: a MatchEnded noted before it was added is not lost.
            match = self._matches.load(table.match_id)
            if match.state.phase == ENDED:
                with self._lock:
                    self._live.discard(table.match_id)
        return match

    def _ensure_match(self, t: Tournament, round_number: int, table_number: int) -> Match:
        """The match of a table, created and seated when it is not yet."""
        state = t.state
        table = state.rounds[round_number - 1].tables[table_number - 1]
        assert table.match_id is not None
        match_id = table.match_id
        try:
            match = self._matches.load(match_id)
        except NotFound:
            seats = seats_of(state.settings, table.sides)
            rules = table_rules(state.settings, len(seats))
            name = table_match_name(state.name, round_number, table_number)
            command = CreateMatch(
                match_id,
                len(seats),
                state.settings.partnerships,
                rules,
                table_server_seed(self._tournaments.seed_of(t), match_id),
                name,
                state.settings.rated,
            )
            fingerprint = f"tournament {state.tournament_id} round {round_number} table"
            try:
                extra = table_metadata(state.tournament_id, round_number, table_number)
                created = self._work.run(
                    match_id,
                    lambda _: Intent(command, "server", fingerprint, extra),
                    new=True,
                )
                self._count(False)
                match = self._written(match_id, created)
            except ConcurrencyConflict:
                match = self._matches.load(match_id)  # another replica created it
        seats = seats_of(state.settings, table.sides)
        for seat, (entrant, player) in enumerate(seats):
            if match.state.phase != SEATING:
                break  # abandoned before it was seated (no server ran to seat it): its result
            if match.state.players[seat] is not None:
                continue
            e = state.entrants[entrant - 1]
            assert e.players is not None
            sealed = t.tokens[entrant][player]
            take = TakeSeat(e.players[player], e.seed, seat)
            if e.player_ids and e.player_ids[player]:
                take = replace(take, player=e.player_ids[player], bot=e.bots[player])
            intent = self._seat_intent(take, token_metadata(sealed))
            try:
                written = self._work.run(match_id, intent, command_id=seat_command_id(seat))
            except MatchNotInProgress:
                # The organiser abandoned it while it was being seated: its result stands.
                return self._matches.load(match_id)
            self._count(written.replayed)
            match = self._written(match_id, written)
        return match

    def _written(self, match_id: str, written: Written) -> Match:
        """The match after `written`: as this process cached it when it wrote it (no read of
        the store), else from the store."""
        if not written.replayed:
            match = self._matches.cached(match_id)
            if match is not None and match.version >= written.first_seq + len(written.events) - 1:
                return match
        return self._matches.load(match_id)

    def _seat_intent(
        self, take: TakeSeat, sealed: dict[str, str]
    ) -> Callable[[Match | None], Intent]:
        seat = take.seat

        def authorise(current: Match | None) -> Intent:
            assert current is not None
            extra = sealed
            free = [s for s, p in enumerate(current.state.players) if p is None]
            if free == [seat] and current.state.info.rules.clocked:
                # This seat deals: the match's time starts now.
                extra = {**sealed, EPOCH_KEY: str(self._clock())}
            return Intent(take, f"seat:{seat}", f"seat {seat}", extra)

        return authorise


__all__ = ["TournamentManager", "seat_command_id"]
