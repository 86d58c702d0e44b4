"""The servicer: check a parsed request's fields, call the application, translate back.

It only translates: parsing, the size and deadline checks, and turning errors into statuses
are the edge's (`edge.py`), and the handler table is built from the service descriptor.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, cast

import grpc

from bergen.api import convert
from bergen.api.chain import canonical_json, metadata_json
from bergen.api.signing import ALGORITHM
from bergen.domain.errors import (
    BergenError,
    DeadlineExceeded,
    InvalidArgument,
    ResourceExhausted,
    Unimplemented,
)
from bergen.domain.events import Event
from bergen.domain.handoff import SEAT
from bergen.domain.players import Player
from bergen.domain.record import RECORD_FORMAT
from bergen.domain.rules import RULES_VERSION
from bergen.domain.tournament_record import result_json
from bergen.domain.views import View
from bergen.v1 import bergen_pb2 as pb

from . import auth
from .app import Application
from .config import MAX_FOLLOWS
from .edge import service_handler
from .feed import Subscription
from .identity import Caller
from .limits import ClientLimits, Limits, StreamTable
from .streams import StepFailed, merged, stepped
from .threads import pool_thread_named
from .tlog import TransparencyLog
from .tournaments import TournamentView, check_tournament_id

SERVICE_DESCRIPTOR = pb.DESCRIPTOR.services_by_name["BergenService"]
SERVICE = SERVICE_DESCRIPTOR.full_name
_MATCH_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


STREAM_WORKERS = 8
"""Threads a servicer given no pool of its own runs its streams' steps in."""

FOLLOWS_PER_REQUEST = 500
"""The most follows one WatchMatches request may give (its size stays under the edge's
limit)."""
FOLLOW_QUEUE = 256
"""Messages a WatchMatches stream's follows may have ready before they wait for the client
(`merged`'s room)."""


REMATCH_TAKES = ("seats", "partnerships", "preset", "options", "name", "creator_token")
"""The fields of a CreateMatchRequest a rematch must not give: it takes them from the match it
follows (and has no creator: its seats are its old players')."""


def _given(req: pb.CreateMatchRequest, field: str) -> bool:
    """Whether `field` of `req` is given (an empty options message is none)."""
    if field == "creator_token":
        return req.HasField(field)
    if field == "options":
        return bool(req.options.ListFields())
    return bool(getattr(req, field))


Context = grpc.ServicerContext | grpc.aio.ServicerContext[Any, Any]
"""A call's context: a plain function's, or a stream's on grpc.aio's event loop."""


def _match_id(value: str, field: str = "match_id") -> str:
    if not value:
        raise InvalidArgument(f"{field} is required", reason="MATCH_ID_REQUIRED")
    # fullmatch: with match and `$`, an id followed by a newline would pass.
    if not _MATCH_ID.fullmatch(value):
        raise InvalidArgument(
            f"{field} must be a match id as CreateMatch returns it", reason="INVALID_MATCH_ID"
        )
    return value


def _caller(context: Context) -> Caller:
    metadata = context.invocation_metadata()
    return Caller(auth.bearer_token(tuple(metadata) if metadata is not None else None))


def _always() -> bool:
    """A stream's caller is there as long as its coroutine runs: when it goes, gRPC cancels
    the coroutine, which closes the stream's generator (`stepped`)."""
    return True


def _deadline(context: grpc.ServicerContext) -> Callable[[], None]:
    def check() -> None:
        remaining = context.time_remaining()
        if remaining is not None and remaining <= 0:
            raise DeadlineExceeded("the deadline passed before the command was applied")

    return check


def _events(pairs: Any) -> list[pb.Event]:
    return [convert.event_out(seq, e) for seq, e in pairs]


class BergenServicer:
    """One method per RPC of the service, named as the .proto names it: the parsed request
    and the context in, the response message (or its serialized bytes) out."""

    def __init__(
        self,
        app: Application,
        max_watchers: int,
        limits: ClientLimits | None = None,
        stream_pool: Executor | None = None,
        max_follows: int = MAX_FOLLOWS,
    ) -> None:
        self._limits = limits or ClientLimits(Limits())
        self._commands = app.commands
        self._queries = app.queries
        self._repository = app.repository
        self._tournaments = app.tournaments
        self._hand_offs = app.hand_offs
        self._players = app.players
        self._ratings = app.ratings
        self._tlog = app.tlog
        self._max_watchers = max_watchers
        self._watch_slots = threading.BoundedSemaphore(max_watchers)
        self._max_follows = max_follows
        self._follows = StreamTable(max_follows)
        """The matches followed on WatchMatches streams, counted as a client's streams are
        (one key: the server's)."""
        self._stream_pool = stream_pool or ThreadPoolExecutor(
            STREAM_WORKERS, thread_name_prefix="bergen-watch", initializer=pool_thread_named
        )
        """Where the streams' steps run (`stepped`): their reads of the store."""

    def _view_out(
        self, view: View, at_ms: int | None = None, rematch_of: str | None = None
    ) -> pb.MatchView:
        """The view's message; in a clocked match, with the match time now on this server's
        clock (`at_ms` when the caller has it, else from the match as cached), from which a
        client counts a running clock down; for a rematch, the match it is the rematch of."""
        msg = convert.view_out(view)
        if rematch_of:
            msg.rematch_of = rematch_of
        if view.clocks:
            if at_ms is None:
                match = self._repository.cached(view.match_id) or self._repository.load(
                    view.match_id
                )
                at_ms = self._commands.at_ms(match)
            if at_ms is not None:
                msg.server_at_ms = max(at_ms, view.at_ms)
        return msg

    def _rematch_of(self, match_id: str) -> str | None:
        """The match `match_id` is the rematch of (None for none), from the match as cached:
        for a view just read or a seat just taken, or a stream's first."""
        match = self._repository.cached(match_id) or self._repository.load(match_id)
        return match.rematch_of

    def CreateMatch(
        self, req: pb.CreateMatchRequest, context: grpc.ServicerContext
    ) -> pb.CreateMatchResponse:
        self._limits.create(context.peer(), _caller(context).token)
        if req.rematch_of:
            return self._create_rematch(req, context)
        options = convert.options_in(req.options)
        preset = convert.preset_in(req.preset) or (None if options else "standard")
        state = self._commands.create_match(
            _caller(context),
            req.seats,
            req.partnerships,
            preset,
            options,
            req.name,
            _deadline(context),
            req.creator_token if req.HasField("creator_token") else None,
            req.rated,
        )
        return pb.CreateMatchResponse(
            match_id=state.match_id,
            commitment=state.commitment,
            rules=convert.rules_out(state.rules),
        )

    def _create_rematch(
        self, req: pb.CreateMatchRequest, context: grpc.ServicerContext
    ) -> pb.CreateMatchResponse:
        old_id = _match_id(req.rematch_of, "rematch_of")
        given = [f for f in REMATCH_TAKES if _given(req, f)]
        if given:
            raise InvalidArgument(
                f"a rematch takes the seats, rules and name of match {old_id}: give no "
                f"{', '.join(given)}",
                reason="REMATCH_WITH_SETTINGS",
                field=given[0],
            )
        self._tournaments.refuse_rematch(old_id)
        match, replayed = self._commands.create_rematch(
            _caller(context), old_id, _deadline(context)
        )
        state = match.state
        return pb.CreateMatchResponse(
            match_id=state.match_id,
            commitment=state.commitment,
            rules=convert.rules_out(state.rules),
            replayed=replayed,
        )

    def JoinMatch(
        self, req: pb.JoinMatchRequest, context: grpc.ServicerContext
    ) -> pb.JoinMatchResponse:
        match_id = _match_id(req.match_id)
        self._limits.join(context.peer(), _caller(context).token)
        self._tournaments.refuse_join(match_id)
        player = (
            self._players.authenticate(req.player_token) if req.HasField("player_token") else None
        )
        seat, token, view = self._commands.join_match(
            match_id,
            req.seat if req.HasField("seat") else None,
            req.name,
            req.client_seed,
            _deadline(context),
            req.seat_token if req.HasField("seat_token") else None,
            req.previous_seat_token if req.HasField("previous_seat_token") else None,
            player,
        )
        rematch_of = self._rematch_of(match_id)  # cached: the join just wrote it, or read it
        return pb.JoinMatchResponse(
            seat=seat, seat_token=token, view=self._view_out(view, rematch_of=rematch_of)
        )

    def GetMatch(
        self, req: pb.GetMatchRequest, context: grpc.ServicerContext
    ) -> pb.GetMatchResponse:
        match_id = _match_id(req.match_id)
        view, rematch_of = self._queries.match_view(_caller(context), match_id)
        return pb.GetMatchResponse(view=self._view_out(view, rematch_of=rematch_of))

    def Play(self, req: pb.PlayRequest, context: grpc.ServicerContext) -> pb.PlayResponse:
        match_id = _match_id(req.match_id)
        if not req.HasField("tile"):
            raise InvalidArgument("a play needs a tile", reason="TILE_REQUIRED")
        out = self._commands.play(
            _caller(context),
            match_id,
            convert.tile_in(req.tile),
            convert.end_in(req.end),
            req.expected_version if req.HasField("expected_version") else None,
            req.command_id or None,
            _deadline(context),
        )
        return pb.PlayResponse(
            events=_events(out.events),
            view=self._view_out(out.view, out.at_ms, out.rematch_of),
            replayed=out.replayed,
        )

    def Resign(self, req: pb.ResignRequest, context: grpc.ServicerContext) -> pb.ResignResponse:
        out = self._commands.resign(
            _caller(context), _match_id(req.match_id), req.command_id or None, _deadline(context)
        )
        return pb.ResignResponse(
            events=_events(out.events), view=self._view_out(out.view, out.at_ms, out.rematch_of)
        )

    async def WatchMatch(
        self, req: pb.WatchMatchRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[pb.WatchMatchResponse | bytes]:
        match_id = _match_id(req.match_id)
        caller = _caller(context)
        loop = asyncio.get_running_loop()
        with self._stream_slot(context, caller):
            steps = self._watch_match(req, match_id, caller, loop)
            async for out in stepped(steps, self._stream_pool):
                yield cast(pb.WatchMatchResponse | bytes, out)

    def _watch_match(
        self,
        req: pb.WatchMatchRequest,
        match_id: str,
        caller: Caller,
        loop: asyncio.AbstractEventLoop,
    ) -> Generator[pb.WatchMatchResponse | bytes | Subscription, None, None]:
        """WatchMatch's messages, as `stepped` runs them (see `MatchQueries.watch`)."""
        if req.batched:
            prepare, batch = _watched_events, WATCH_BATCH
        else:
            prepare, batch = _watched_event, 1
        for item in self._queries.watch(
            caller, match_id, req.after_seq, _always, prepare, batch, loop=loop
        ):
            if isinstance(item, bytes | Subscription):
                yield item
            else:
                rematch_of = self._rematch_of(match_id)
                yield pb.WatchMatchResponse(view=self._view_out(item, rematch_of=rematch_of))

    async def WatchMatches(
        self, req: pb.WatchMatchesRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[bytes]:
        caller = _caller(context)
        follows = _follows(req, caller)
        if any(f.seat_token for f in req.follows):
            # Tokens in the request are secrets as the metadata's are: a client that sent too
            # many wrong ones waits before it may send more.
            self._limits.secrets.hold(context.peer())
        loop = asyncio.get_running_loop()
        with (
            self._stream_slot(context, caller),
            self._follow_slots(context, caller, len(follows)),
        ):
            heads = [
                pb.WatchMatchesResponse(follow=i, match_id=follow[0]).SerializeToString()
                for i, follow in enumerate(follows)
            ]
            steps = [
                self._follow_steps(match_id, after, who, loop) for match_id, after, who in follows
            ]
            try:
                async for item in merged(heads, steps, self._stream_pool, FOLLOW_QUEUE):
                    yield item
            except StepFailed as failed:
                if isinstance(failed.error, BergenError):
                    # The stream answers it, naming the follow.
                    index = failed.index
                    raise _of_follow(failed.error, index, follows[index][0]) from None
                raise failed.error from None  # a bug: answered as one

    def _follow_steps(
        self, match_id: str, after_seq: int, caller: Caller, loop: asyncio.AbstractEventLoop
    ) -> Generator[bytes | Subscription, None, None]:
        """A follow's messages without its head, as `merged` runs them; the last `ended`
        when its match has ended (not when the server stops)."""
        watch = self._queries.watch(
            caller, match_id, after_seq, _always, _followed_events, WATCH_BATCH, loop=loop
        )
        # Nothing made for a message is kept in a local once it is given: this generator
        # waits, suspended, for as long as its match is quiet, and a view kept (its protobuf
        # message above all, which holds C memory) would cost every live follow some KB.
        box: list[object] = []
        try:
            while True:
                try:
                    box.append(next(watch))
                except StopIteration as stop:
                    if stop.value:
                        yield _FOLLOW_ENDED
                    return
                if isinstance(box[0], bytes | Subscription):
                    yield box.pop()  # type: ignore[misc]
                else:
                    yield self._followed_view(cast(View, box.pop()), match_id)
        finally:
            watch.close()

    def _followed_view(self, view: View, match_id: str) -> bytes:
        """A follow's first message without its head: the view, serialized."""
        msg = self._view_out(view, rematch_of=self._rematch_of(match_id))
        return pb.WatchMatchesResponse(view=msg).SerializeToString()

    @contextmanager
    def _follow_slots(self, context: Context, caller: Caller, count: int) -> Iterator[None]:
        """Hold `count` of the server's follows, and of the client's share, while a
        WatchMatches stream is served. Raises ResourceExhausted when fewer are left."""
        client = self._limits.open_follows(context.peer(), caller.token, count)
        if not self._follows.open(_SERVER, count):
            self._limits.close_follows(client, count)
            raise ResourceExhausted(
                f"this server follows at most {self._max_follows} matches at once for "
                "WatchMatches streams, and has too few left; try again later, or another "
                "replica",
                reason="TOO_MANY_FOLLOWS",
                limit=self._max_follows,
            )
        try:
            yield
        finally:
            self._follows.close(_SERVER, count)
            self._limits.close_follows(client, count)

    @contextmanager
    def _stream_slot(self, context: Context, caller: Caller) -> Iterator[None]:
        """Hold one of the server's stream slots, and one of the client's, while a stream is
        served. Raises ResourceExhausted when either is full."""
        # One client may hold only its share of the streams, so that it cannot lock the
        # others out.
        client = self._limits.open_stream(context.peer(), caller.token)
        # Each open stream holds its call's memory in gRPC and here: past the limit a stream
        # is refused, so that watchers cannot take all of the server's memory.
        if not self._watch_slots.acquire(blocking=False):
            self._limits.close_stream(client)
            raise ResourceExhausted(
                f"this server already serves {self._max_watchers} watch streams; "
                "try again later, or another replica",
                reason="TOO_MANY_WATCHERS",
            )
        try:
            yield
        finally:
            self._watch_slots.release()
            self._limits.close_stream(client)

    def GetReplay(
        self, req: pb.GetReplayRequest, context: grpc.ServicerContext
    ) -> pb.GetReplayResponse:
        events, complete = self._queries.replay(
            _caller(context), _match_id(req.match_id), req.after_seq
        )
        return pb.GetReplayResponse(events=_events(events), complete=complete)

    def GetRecord(
        self, req: pb.GetRecordRequest, context: grpc.ServicerContext
    ) -> pb.GetRecordResponse:
        text = self._queries.record_text(_caller(context), _match_id(req.match_id))
        return pb.GetRecordResponse(record_json=text)

    def ExportRecords(
        self, req: pb.ExportRecordsRequest, context: grpc.ServicerContext
    ) -> pb.ExportRecordsResponse:
        texts, token, refused = self._queries.export(
            _caller(context), req.page_size, req.page_token
        )
        return pb.ExportRecordsResponse(
            records_json=texts, next_page_token=token, refused_match_ids=refused
        )

    def GetServerInfo(
        self, req: pb.GetServerInfoRequest, context: grpc.ServicerContext
    ) -> pb.GetServerInfoResponse:
        return pb.GetServerInfoResponse(
            signature_algorithm=ALGORITHM if self._queries.public_key else "",
            public_key=self._queries.public_key,
            record_format=RECORD_FORMAT,
            rules_version=RULES_VERSION,
        )

    def GetAuditLog(
        self, req: pb.GetAuditLogRequest, context: grpc.ServicerContext
    ) -> pb.GetAuditLogResponse:
        match_id = _match_id(req.match_id)
        stored = self._queries.audit_log(_caller(context), match_id)
        return pb.GetAuditLogResponse(
            match_id=match_id,
            events=[
                pb.AuditEvent(
                    seq=e.seq,
                    type=e.type,
                    schema_version=e.schema_version,
                    payload_json=canonical_json(e.payload, "payload").decode(),
                    metadata_json=metadata_json(e.metadata).decode(),
                    prev_hash=e.prev_hash.hex(),
                    salt=e.salt.hex(),
                    hash=e.hash.hex(),
                    recorded_at=convert.timestamp_out(e.recorded_at),
                    position=e.position,
                )
                for e in stored
            ],
        )

    def ListMatches(
        self, req: pb.ListMatchesRequest, context: grpc.ServicerContext
    ) -> pb.ListMatchesResponse:
        if req.phase not in (pb.PHASE_UNSPECIFIED, *convert.PHASE_NAMES):
            raise InvalidArgument(f"unknown phase {req.phase}", reason="INVALID_PHASE")
        phase = convert.PHASE_NAMES.get(req.phase)
        if len(req.player_name) > 64:
            raise InvalidArgument(
                "player_name is at most 64 characters", reason="TEXT_TOO_LONG", field="player_name"
            )
        rows, token = self._queries.list_matches(
            phase, req.player_name, req.page_size, req.page_token
        )
        return pb.ListMatchesResponse(
            matches=[
                pb.MatchSummary(
                    match_id=r.match_id,
                    name=r.name,
                    phase=convert.PHASES[r.phase],
                    seat_count=r.seats,
                    partnerships=r.partnerships,
                    preset=convert.PRESET.out(r.preset),
                    players=r.players,
                    scores=r.scores,
                    version=r.version,
                    created_at=(
                        None if r.created_at is None else convert.timestamp_out(r.created_at)
                    ),
                    started_at=(
                        None if r.started_at is None else convert.timestamp_out(r.started_at)
                    ),
                    rematch_of=r.rematch_of or "",
                    hand=r.hand,
                    player_ids=r.player_ids,
                    bots=r.bots,
                    rated=r.rated,
                )
                for r in rows
            ],
            next_page_token=token,
        )

    def AbandonMatch(
        self, req: pb.AbandonMatchRequest, context: grpc.ServicerContext
    ) -> pb.AbandonMatchResponse:
        events = self._commands.abandon(
            _caller(context), _match_id(req.match_id), req.note, _deadline(context)
        )
        return pb.AbandonMatchResponse(events=_events(events))

    # Tournaments ----------------------------------------------------------------------------

    def CreateTournament(
        self, req: pb.CreateTournamentRequest, context: grpc.ServicerContext
    ) -> pb.CreateTournamentResponse:
        settings, by_hand = convert.tournament_settings_in(req.settings)
        t = self._tournaments.create(_caller(context), settings, req.name, by_hand)
        return pb.CreateTournamentResponse(
            tournament_id=t.state.tournament_id, commitment=t.state.commitment
        )

    def RegisterEntrant(
        self, req: pb.RegisterEntrantRequest, context: grpc.ServicerContext
    ) -> pb.RegisterEntrantResponse:
        tournament_id = check_tournament_id(req.tournament_id)
        self._limits.join(context.peer(), _caller(context).token)
        registered = tuple(
            self._players.authenticate(t) if t else None for t in req.registered_player_tokens
        )
        entrant, tokens = self._tournaments.register(
            tournament_id,
            tuple(req.players),
            req.client_seed,
            tuple(req.player_tokens),
            req.client_seed_commitment,
            registered,
        )
        return pb.RegisterEntrantResponse(entrant=entrant, player_tokens=tokens)

    def WithdrawEntrant(
        self, req: pb.WithdrawEntrantRequest, context: grpc.ServicerContext
    ) -> pb.WithdrawEntrantResponse:
        after = self._tournaments.withdraw(
            _caller(context), check_tournament_id(req.tournament_id), req.entrant, req.note
        )
        return pb.WithdrawEntrantResponse(after_round=after)

    def StartTournament(
        self, req: pb.StartTournamentRequest, context: grpc.ServicerContext
    ) -> pb.StartTournamentResponse:
        t = self._tournaments.start(_caller(context), check_tournament_id(req.tournament_id))
        return pb.StartTournamentResponse(
            seeding=t.state.seeding or (), reveal_deadline_ms=t.state.reveal_deadline_ms or 0
        )

    def StartNextRound(
        self, req: pb.StartNextRoundRequest, context: grpc.ServicerContext
    ) -> pb.StartNextRoundResponse:
        number = self._tournaments.start_next_round(
            _caller(context), check_tournament_id(req.tournament_id)
        )
        return pb.StartNextRoundResponse(round=number)

    def GetTournament(
        self, req: pb.GetTournamentRequest, context: grpc.ServicerContext
    ) -> pb.GetTournamentResponse:
        v = self._tournaments.get(_caller(context), check_tournament_id(req.tournament_id))
        view, assignment = _tournament_out(v)
        out = pb.GetTournamentResponse(tournament=view)
        if assignment is not None:
            out.assignment.CopyFrom(assignment)
        return out

    async def WatchTournament(
        self, req: pb.WatchTournamentRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[pb.WatchTournamentResponse]:
        tournament_id = check_tournament_id(req.tournament_id)
        caller = _caller(context)
        loop = asyncio.get_running_loop()
        with self._stream_slot(context, caller):
            steps = self._watch_tournament(tournament_id, caller, loop)
            async for out in stepped(steps, self._stream_pool):
                yield out

    def _watch_tournament(
        self, tournament_id: str, caller: Caller, loop: asyncio.AbstractEventLoop
    ) -> Generator[pb.WatchTournamentResponse | Subscription, None, None]:
        """WatchTournament's messages, as `stepped` runs them."""
        for v in self._tournaments.watch(caller, tournament_id, _always, loop):
            if isinstance(v, Subscription):
                yield v
                continue
            view, assignment = _tournament_out(v)
            out = pb.WatchTournamentResponse(tournament=view)
            if assignment is not None:
                out.assignment.CopyFrom(assignment)
            yield out

    def ListTournaments(
        self, req: pb.ListTournamentsRequest, context: grpc.ServicerContext
    ) -> pb.ListTournamentsResponse:
        if req.phase not in (pb.TOURNAMENT_PHASE_UNSPECIFIED, *convert.TOURNAMENT_PHASE.words):
            raise InvalidArgument(f"unknown phase {req.phase}", reason="INVALID_PHASE")
        phase = convert.TOURNAMENT_PHASE.words.get(req.phase)
        page, token = self._tournaments.list(phase, req.page_size, req.page_token)
        return pb.ListTournamentsResponse(
            tournaments=[
                pb.TournamentSummary(
                    tournament_id=t.state.tournament_id,
                    name=t.state.name,
                    phase=convert.TOURNAMENT_PHASE.out(t.state.phase),
                    format=convert.TOURNAMENT_FORMAT.out(t.state.settings.format),
                    entrants=len(t.state.entrants),
                    round=t.state.round,
                    total_rounds=t.state.total_rounds,
                )
                for t in page
            ],
            next_page_token=token,
        )

    def GetTournamentRecord(
        self, req: pb.GetTournamentRecordRequest, context: grpc.ServicerContext
    ) -> pb.GetTournamentRecordResponse:
        record = self._tournaments.record(check_tournament_id(req.tournament_id))
        return pb.GetTournamentRecordResponse(record_json=json.dumps(record, ensure_ascii=False))

    def GetAuditManifest(
        self, req: pb.GetAuditManifestRequest, context: grpc.ServicerContext
    ) -> pb.GetAuditManifestResponse:
        caller = _caller(context)
        manifest = self._tournaments.audit_manifest(
            check_tournament_id(req.tournament_id),
            lambda match_id: self._queries.record(caller, match_id),
        )
        return pb.GetAuditManifestResponse(manifest_json=json.dumps(manifest, ensure_ascii=False))

    def SettleTable(
        self, req: pb.SettleTableRequest, context: grpc.ServicerContext
    ) -> pb.SettleTableResponse:
        tournament_id = check_tournament_id(req.tournament_id)
        action = convert.SETTLE_ACTION.into(req.action)
        side = req.forfeited_side if req.HasField("forfeited_side") else None
        result = self._tournaments.settle(
            _caller(context), tournament_id, req.round, req.table, action, side, req.note
        )
        return pb.SettleTableResponse(result=convert.table_result_out(result_json(result)))

    def CancelTournament(
        self, req: pb.CancelTournamentRequest, context: grpc.ServicerContext
    ) -> pb.CancelTournamentResponse:
        self._tournaments.cancel(_caller(context), check_tournament_id(req.tournament_id), req.note)
        return pb.CancelTournamentResponse()

    def RevealEntrantSeed(
        self, req: pb.RevealEntrantSeedRequest, context: grpc.ServicerContext
    ) -> pb.RevealEntrantSeedResponse:
        t = self._tournaments.reveal(
            _caller(context), check_tournament_id(req.tournament_id), req.entrant, req.client_seed
        )
        return pb.RevealEntrantSeedResponse(
            unrevealed=len(t.state.unrevealed()) if t.state.seeding is None else 0,
            reveal_deadline_ms=t.state.reveal_deadline_ms or 0,
        )

    # Hand-offs ------------------------------------------------------------------------------

    def OfferHandOff(
        self, req: pb.OfferHandOffRequest, context: grpc.ServicerContext
    ) -> pb.OfferHandOffResponse:
        place = req.WhichOneof("place")
        if place == "match_id":
            made = self._hand_offs.offer_seat(_caller(context), _match_id(req.match_id), req.parcel)
        elif place == "tournament_id":
            made = self._hand_offs.offer_entrant(
                _caller(context), check_tournament_id(req.tournament_id), req.parcel
            )
        else:
            raise InvalidArgument(
                "name the place to hand off: match_id (a seat's) or tournament_id (a player's)",
                reason="PLACE_REQUIRED",
            )
        expires = datetime.fromtimestamp(made.expires_ms / 1000, UTC)
        return pb.OfferHandOffResponse(code=made.code, expires_at=convert.timestamp_out(expires))

    def ClaimHandOff(
        self, req: pb.ClaimHandOffRequest, context: grpc.ServicerContext
    ) -> pb.ClaimHandOffResponse:
        claimed = self._hand_offs.claim(req.code)
        out = pb.ClaimHandOffResponse(parcel=claimed.parcel)
        h = claimed.holder
        if h.kind == SEAT:
            out.seat.CopyFrom(pb.HandOffSeat(match_id=h.of, seat=h.number))
        else:
            out.entrant.CopyFrom(
                pb.HandOffEntrant(tournament_id=h.of, entrant=h.number, player=h.player)
            )
        return out

    # Players and ratings --------------------------------------------------------------------

    def RegisterPlayer(
        self, req: pb.RegisterPlayerRequest, context: grpc.ServicerContext
    ) -> pb.RegisterPlayerResponse:
        self._limits.register(context.peer(), _caller(context).token)
        player, token = self._players.register(req.name, req.bot)
        return pb.RegisterPlayerResponse(
            player_id=player.player_id, name=player.name, player_token=token
        )

    def GetPlayer(
        self, req: pb.GetPlayerRequest, context: grpc.ServicerContext
    ) -> pb.GetPlayerResponse:
        player = self._player_named(req)
        ratings = self._ratings.ratings_of(player.player_id)
        return pb.GetPlayerResponse(
            player=_player_out(player.player_id, player.name, player.bot),
            ratings=[convert.pool_rating_out(pool, r) for pool, r in ratings.items()],
        )

    def ListLeaderboard(
        self, req: pb.ListLeaderboardRequest, context: grpc.ServicerContext
    ) -> pb.ListLeaderboardResponse:
        pool = convert.RATING_POOL.into(req.pool)
        page = self._ratings.leaderboard(pool, req.page_size, req.page_token)
        return pb.ListLeaderboardResponse(
            entries=[
                pb.LeaderboardEntry(
                    rank=rank,
                    player=_player_out(r.player_id, r.name, r.bot),
                    rating=convert.pool_rating_out(r.pool, r.rating),
                )
                for rank, r in page.entries
            ],
            next_page_token=page.next_token,
        )

    def ListPlayerMatches(
        self, req: pb.ListPlayerMatchesRequest, context: grpc.ServicerContext
    ) -> pb.ListPlayerMatchesResponse:
        player = self._player_named(req)
        pool = convert.RATING_POOL.into(req.pool) if req.pool else None
        rows, token = self._ratings.matches(player.player_id, pool, req.page_size, req.page_token)
        return pb.ListPlayerMatchesResponse(
            player=_player_out(player.player_id, player.name, player.bot),
            matches=[
                pb.PlayerMatch(
                    match_id=h.match_id,
                    pool=convert.RATING_POOL.out(h.pool),
                    order=h.order,
                    seat=h.seat,
                    place=h.place,
                    before=convert.pool_rating_out(h.pool, h.before),
                    after=convert.pool_rating_out(h.pool, h.after),
                    ended_at=convert.timestamp_out(h.ended_at),
                )
                for h in rows
            ],
            next_page_token=token,
        )

    def _player_named(self, req: pb.GetPlayerRequest | pb.ListPlayerMatchesRequest) -> Player:
        """The player a request names by id, by name or (GetPlayer) by its token. Raises
        InvalidArgument, NotFound, Unauthenticated (PLAYER_TOKEN_INVALID)."""
        which = req.WhichOneof("player")
        if which == "player_id":
            return self._players.get(player_id=req.player_id)
        if which == "player_token" and isinstance(req, pb.GetPlayerRequest):
            return self._players.authenticate(req.player_token)
        return self._players.get(name=req.name if which == "name" else "")

    # --- the transparency log -----------------------------------------------------------------

    def _log(self) -> TransparencyLog:
        if self._tlog is None:
            raise Unimplemented("this server keeps no transparency log", reason="NO_TLOG")
        return self._tlog

    def GetCheckpoint(
        self, req: pb.GetCheckpointRequest, context: grpc.ServicerContext
    ) -> pb.GetCheckpointResponse:
        log = self._log()
        signed = log.latest()
        old = req.consistency_from
        # Proved to the size just signed, even if a newer one is signed meanwhile.
        proof = log.consistency(old, signed.size)[0] if 0 < old < signed.size else []
        return pb.GetCheckpointResponse(
            checkpoint=signed.note, tree_size=signed.size, consistency_proof=proof
        )

    def GetConsistencyProof(
        self, req: pb.GetConsistencyProofRequest, context: grpc.ServicerContext
    ) -> pb.GetConsistencyProofResponse:
        proof, signed = self._log().consistency(req.old_size, req.new_size)
        return pb.GetConsistencyProofResponse(proof=proof, checkpoint=signed.note)

    def GetInclusionProof(
        self, req: pb.GetInclusionProofRequest, context: grpc.ServicerContext
    ) -> pb.GetInclusionProofResponse:
        proved = self._log().inclusion(req.position)
        return pb.GetInclusionProofResponse(
            leaf_index=proved.leaf.index,
            leaf_hash=proved.leaf.hash,
            tree_size=proved.signed.size,
            proof=proved.proof,
            checkpoint=proved.signed.note,
        )


def _player_out(player_id: str, name: str, bot: bool) -> pb.Player:
    return pb.Player(player_id=player_id, name=name, bot=bot)


def _tournament_out(v: TournamentView) -> tuple[pb.TournamentView, pb.TournamentAssignment | None]:
    view = _tournament_view(v)
    a = v.assignment
    if a is None:
        return view, None
    return view, pb.TournamentAssignment(
        entrant=a.entrant,
        player=a.player,
        match_id=a.match_id,
        seat=a.seat or 0,
        round=a.round,
        table=a.table,
    )


_VIEWS: OrderedDict[tuple[str, int], pb.TournamentView] = OrderedDict()
_VIEWS_LOCK = threading.Lock()
_VIEWS_SIZE = 256


def _tournament_view(v: TournamentView) -> pb.TournamentView:
    """The tournament's view message with the live scores of its tables in play. The rest is
    translated once per version of the tournament and shared (read only): every player's
    lookup of its table and every watcher woken by a hand ended between two of its events is
    shown that one translation, the live scores added to a copy."""
    t = v.tournament
    key = (t.state.tournament_id, t.version)
    with _VIEWS_LOCK:
        base = _VIEWS.get(key)
        if base is not None:
            _VIEWS.move_to_end(key)
    if base is None:
        base = convert.tournament_view_out(
            v.record,
            t.state.settings,
            phase=t.state.phase,
            total_rounds=t.state.total_rounds,
            version=t.version,
            by_hand=t.by_hand,
            reveal_deadline_ms=t.state.reveal_deadline_ms,
            bots=[e.bots for e in t.state.entrants],
        )
        with _VIEWS_LOCK:
            _VIEWS[key] = base
            while len(_VIEWS) > _VIEWS_SIZE:
                _VIEWS.popitem(last=False)
    if not v.live_scores or not base.rounds:
        return base
    view = pb.TournamentView()
    view.CopyFrom(base)
    # Only the latest round's tables are in play.
    for table in view.rounds[-1].tables:
        scores = v.live_scores.get(table.match_id)
        if scores is not None and not table.HasField("result"):
            table.live_scores.extend(scores)
    return view


WATCH_BATCH = 64
"""The most events in one message of a `batched` WatchMatch stream."""


def _watched_event(seq: int, events: Sequence[Event]) -> bytes:
    """The serialized stream message of one event as shown to a watcher (made once per
    audience: see MatchQueries.watch)."""
    (event,) = events
    return pb.WatchMatchResponse(event=convert.event_out(seq, event)).SerializeToString()


def _numbered(seq: int, events: Sequence[Event]) -> list[pb.Event]:
    """`events` as messages, the first at `seq`."""
    return [convert.event_out(seq + i, e) for i, e in enumerate(events)]


def _followed_events(seq: int, events: Sequence[Event]) -> bytes:
    """A WatchMatches message's events (`events`, the first at `seq`) without its head: the
    same bytes for every follow shown them (a message's fields may come in any order)."""
    return pb.WatchMatchesResponse(events=_numbered(seq, events)).SerializeToString()


_FOLLOW_ENDED = pb.WatchMatchesResponse(ended=True).SerializeToString()
_SERVER = ""
"""The key the server's own follows are counted under."""


def _follows(req: pb.WatchMatchesRequest, caller: Caller) -> list[tuple[str, int, Caller]]:
    """Each follow's match, seq to start after and caller. Raises InvalidArgument for no
    follow or too many, or a malformed id; Unauthenticated for a malformed token."""
    if not req.follows:
        raise InvalidArgument("follow at least one match", reason="NO_FOLLOWS")
    if len(req.follows) > FOLLOWS_PER_REQUEST:
        raise InvalidArgument(
            f"{len(req.follows)} follows: a stream takes at most {FOLLOWS_PER_REQUEST}; "
            "open another",
            reason="TOO_MANY_FOLLOWS_IN_STREAM",
            limit=FOLLOWS_PER_REQUEST,
        )
    out = []
    for i, follow in enumerate(req.follows):
        try:
            match_id = _match_id(follow.match_id, f"follows[{i}].match_id")
            who = caller
            if follow.seat_token:
                who = Caller(auth.token_field(follow.seat_token, f"follows[{i}].seat_token"))
        except BergenError as e:
            e.metadata["follow"] = str(i)
            raise
        out.append((match_id, follow.after_seq, who))
    return out


def _of_follow(error: BergenError, index: int, match_id: str) -> BergenError:
    """`error` as a WatchMatches stream ends with it: its message naming the match, and its
    metadata the follow (its index) and the match, for a client that follows one match more
    than once (two seats of it) to know which. A copy: the error may be another call's too."""
    named = copy.copy(error)
    if match_id not in named.message:
        named.args = (f"match {match_id}: {named.message}",)
    named.metadata = {**error.metadata, "follow": str(index), "match_id": match_id}
    return named


def _watched_events(seq: int, events: Sequence[Event]) -> bytes:
    """The serialized message of a `batched` stream: `events`, the first at `seq`."""
    return pb.WatchMatchResponse(events=_numbered(seq, events)).SerializeToString()


def generic_handler(
    app: Application,
    max_watchers: int,
    limits: ClientLimits | None = None,
    stream_pool: Executor | None = None,
    max_follows: int = MAX_FOLLOWS,
) -> grpc.GenericRpcHandler:
    """The handlers of every RPC of the service, each client held to `limits` (the defaults
    when None), the streams' steps run in `stream_pool` (a pool of STREAM_WORKERS threads of
    their own when None). Raises TypeError when the servicer lacks a method for one."""
    return service_handler(
        SERVICE_DESCRIPTOR, BergenServicer(app, max_watchers, limits, stream_pool, max_follows)
    )
