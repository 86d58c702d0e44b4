"""Rematches: the people of an ended match play again, in the same seats, with the same rules.

A seat holder proposes a rematch once the match has ended (`POST .../rematch`), and every
other person's seat accepts through the same request. When the last person has accepted, the
gateway creates the new match, seats each person in the seat they held, with a token of its
own, and has the computer fill the seats it played. Each browser learns the new match from
`GET .../rematch`, which also hands it its new seat's sealed cookie: only a browser holding a
seat of the old match gets one, and only for the same seat.

A rematch of a rated match is rated when each person accepts it from a browser signed in as
the player who held their seat (players.py `signed_in`): each is seated as that player again,
and the computer's seats by its own players; else it is an ordinary match.

Proposals, and which seats of a match the computer plays, are kept in this gateway process's
memory: a restarted gateway has forgotten a proposal (the seats propose again), and sees the
computer's seats by their names. They expire after REMATCH_TTL_S.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import grpc
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bergen.domain.montecarlo import POLICY_NAMES
from bergen.v1 import bergen_pb2 as pb

from .computer import ComputerSeats, ComputerSeatsError, SeatingFailed
from .hubs import JSON
from .limits import spend
from .players import (
    Held,
    Refused,
    call_upstream,
    guarded,
    json_answer,
    match_id_of,
    match_link,
    new_token,
    player_id_of,
    read_body,
    refused_upstream,
    seat_view,
    seated_in,
    set_seat_cookie,
    signed_in,
)

REMATCH_TTL_S = 600
"""How long a proposal waits for the other seats, and a started rematch is announced."""
KEPT = 10_000
"""Proposals (and matches' computer seats) kept at most; the oldest go first."""
COMPUTER_NAME = re.compile(r"computer (\d) \(([a-z]+)\)")
COMPUTER_PLAYER = re.compile(r"([a-z]+) bot \d( [0-9a-f]{4})?")
"""The name of one of the computer's registered players (computer.py), a bot."""
RULE_ENUMS = ("lead", "draw", "blocked", "endgame_reduction", "match_end")
RULE_NUMBERS = ("double_bonus", "domino_points", "target")


@dataclass
class Proposal:
    """A rematch of one ended match, while its seats accept."""

    old_id: str
    request: pb.CreateMatchRequest
    names: dict[int, str]
    """Each person's seat (counted from 0) and name."""
    computer: tuple[int, ...]
    policy: str
    expires: float
    rated: bool = False
    """The ended match was rated."""
    player_ids: dict[int, str] = field(default_factory=dict)
    """The registered player of each person's seat in the ended match."""
    player_tokens: dict[int, str] = field(default_factory=dict)
    """The player token of each seat whose browser accepted signed in as that seat's player."""
    accepted: set[int] = field(default_factory=set)
    new_id: str = ""
    seated: dict[int, Held] = field(default_factory=dict)
    error: str = ""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def waiting_for(self) -> list[int]:
        return sorted(set(self.names) - self.accepted)

    def state(self) -> str:
        return "started" if self.new_id else "failed" if self.error else "proposed"


class Rematches:
    """The gateway's proposals, and the seats the computer plays in each match it seated."""

    def __init__(self) -> None:
        self._proposals: OrderedDict[str, Proposal] = OrderedDict()
        self._computer: OrderedDict[str, tuple[tuple[int, ...], str]] = OrderedDict()

    def note_computer(self, match_id: str, seats: list[int], policy: str) -> None:
        """Remember that the computer plays `seats` of `match_id` with `policy`."""
        self._computer[match_id] = (tuple(seats), policy)
        while len(self._computer) > KEPT:
            self._computer.popitem(last=False)

    def get(self, old_id: str) -> Proposal | None:
        """The proposal of `old_id`, None when there is none or it has expired."""
        now = time.monotonic()
        while self._proposals:
            first = next(iter(self._proposals.values()))
            if first.expires > now and len(self._proposals) <= KEPT:
                break
            self._proposals.popitem(last=False)
        return self._proposals.get(old_id)

    def propose(self, view: pb.MatchView) -> Proposal:
        """A new proposal for the ended match of `view`, none accepted yet."""
        computer, policy = self._computer.get(view.match_id, ((), "greedy"))
        if not computer:  # a gateway restarted since: the computer's seats by their names
            for s in view.seats:
                named = COMPUTER_NAME.fullmatch(s.name)
                if named and int(named[1]) == s.seat + 1 and named[2] in POLICY_NAMES:
                    computer, policy = (*computer, s.seat), named[2]
                player = COMPUTER_PLAYER.fullmatch(s.name) if s.bot else None
                if player and player[1] in POLICY_NAMES:
                    computer, policy = (*computer, s.seat), player[1]
        proposal = Proposal(
            old_id=view.match_id,
            request=same_match(view),
            names={s.seat: s.name for s in view.seats if s.seat not in computer},
            computer=tuple(computer),
            policy=policy,
            expires=time.monotonic() + REMATCH_TTL_S,
            rated=view.rated,
            player_ids={s.seat: s.player_id for s in view.seats if s.player_id},
        )
        self._proposals[view.match_id] = proposal
        return proposal


def same_match(view: pb.MatchView) -> pb.CreateMatchRequest:
    """A request for a match like `view`'s: its seats, partnerships, name and rules."""
    rules = view.rules
    options = pb.RuleOptions()
    for name in RULE_ENUMS:
        if getattr(rules, name):  # 0 is *_UNSPECIFIED, which the server refuses
            setattr(options, name, getattr(rules, name))
    for name in RULE_NUMBERS:
        setattr(options, name, getattr(rules, name))
    if rules.clock == pb.CLOCK_FISCHER:
        options.clock = pb.CLOCK_FISCHER
        options.clock_initial = rules.clock_initial
        options.clock_increment = rules.clock_increment
        options.on_timeout = rules.on_timeout
        options.timeouts_to_forfeit = rules.timeouts_to_forfeit
    preset = pb.PRESET_UNSPECIFIED if rules.preset == pb.PRESET_CUSTOM else rules.preset
    return pb.CreateMatchRequest(
        seats=len(view.seats),
        partnerships=view.partnerships,
        preset=preset,
        options=options,
        name=view.name,
    )


def install(app: Any) -> list[Route]:
    """Set `app.state.rematches` and return the rematch routes."""
    app.state.rematches = Rematches()
    return [
        Route("/api/play/matches/{id}/rematch", guarded(rematch_state), methods=["GET"]),
        Route(
            "/api/play/matches/{id}/rematch",
            guarded(spend("join")(propose_or_accept)),
            methods=["POST"],
        ),
    ]


def rematches_of(request: Request) -> Rematches:
    """The app's rematches."""
    found: Rematches = request.app.state.rematches
    return found


def _state(request: Request, held: Held, proposal: Proposal | None) -> Response:
    """The rematch as this browser's seat sees it, with its new seat's cookie once started."""
    if proposal is None:
        return json_answer({"state": "none", "accepted": [], "waiting_for": []})
    body: JSON = {
        "state": proposal.state(),
        "accepted": sorted(proposal.accepted),
        "waiting_for": proposal.waiting_for(),
        "you_accepted": held.seat in proposal.accepted,
    }
    if proposal.error:
        body["error"] = proposal.error
    seat = proposal.seated.get(held.seat)
    if proposal.new_id:
        body["match_id"] = proposal.new_id
        body["link"] = match_link(request, proposal.new_id)
    response = json_answer(body)
    if seat is not None:
        set_seat_cookie(request, response, seat)
    return response


async def rematch_state(request: Request) -> Response:
    """The rematch of this match: none, proposed (who has accepted, who is awaited), started
    (the new match's link, and this seat's cookie in it) or failed."""
    match_id = match_id_of(request)
    held = seated_in(request, match_id)
    return _state(request, held, rematches_of(request).get(match_id))


async def propose_or_accept(request: Request) -> Response:
    """Propose a rematch of this ended match, or accept the one proposed; the last person to
    accept starts it."""
    match_id = match_id_of(request)
    held = seated_in(request, match_id)
    await read_body(request)
    rematches = rematches_of(request)
    proposal = rematches.get(match_id)
    if proposal is None or proposal.error:
        view = await seat_view(request, held)
        if view.phase != pb.PHASE_ENDED:
            raise Refused(409, "a rematch is offered once the match has ended", "MATCH_NOT_ENDED")
        proposal = rematches.get(match_id)
        if proposal is None or proposal.error:
            proposal = rematches.propose(view)
    async with proposal.lock:
        if held.seat not in proposal.names:
            raise Refused(409, "the computer plays this seat", "NOT_A_PERSON")
        proposal.accepted.add(held.seat)
        player = signed_in(request)
        if player is not None and proposal.player_ids.get(held.seat) == player_id_of(player):
            proposal.player_tokens[held.seat] = player.token
        if not proposal.new_id and not proposal.waiting_for():
            await _start(request, proposal)
    return _state(request, held, proposal)


async def _start(request: Request, proposal: Proposal) -> None:
    """Create the new match, seat each person in their old seat and fill the computer's.
    A failure is kept in `proposal.error` (and the seats may propose again)."""
    players = proposal.player_tokens
    rated = proposal.rated and all(seat in players for seat in proposal.names)
    create = pb.CreateMatchRequest()
    create.CopyFrom(proposal.request)
    create.rated = rated
    try:
        created: pb.CreateMatchResponse = await call_upstream(request, "CreateMatch", create)
        seated: dict[int, Held] = {}
        for seat, name in sorted(proposal.names.items()):
            token = new_token()
            join = pb.JoinMatchRequest(
                match_id=created.match_id,
                seat=seat,
                name="" if seat in players else name,
                seat_token=token,
            )
            if seat in players:  # the seat's own player, as in the ended match
                join.player_token = players[seat]
            await call_upstream(request, "JoinMatch", join)
            seated[seat] = Held(created.match_id, seat, token)
    except grpc.aio.AioRpcError as e:
        proposal.error = f"the rematch was not created: {refused_upstream(e)}"
        return
    proposal.seated = seated
    proposal.new_id = created.match_id
    proposal.expires = time.monotonic() + REMATCH_TTL_S
    rematches = rematches_of(request)
    computer: ComputerSeats | None = getattr(request.app.state, "computer", None)
    if proposal.computer and computer is not None:
        try:
            filled = await asyncio.to_thread(
                computer.fill,
                created.match_id,
                len(proposal.computer),
                proposal.policy,
                rated=rated,
            )
        except (ValueError, ComputerSeatsError, SeatingFailed) as e:
            proposal.error = f"the computer took no seat: {str(e)[:200]}"
        else:
            rematches.note_computer(created.match_id, filled, proposal.policy)
