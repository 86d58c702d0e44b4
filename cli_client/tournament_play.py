"""Playing a tournament's matches: `bergen bots --tournament` and `bergen play --tournament`.

A tournament player holds only its token. It learns of every change to the tournament from
one WatchTournament stream (`TournamentFeed`, followed in a thread and resumed when it
drops), and after each change asks GetTournament with its token for its match now and its
seat. A match not yet played is played to its end (by a bot: `seat.run_seat`; by a person:
`seat.play_loop`), and the player waits for the next change: the next round paired and its match
seated, or the end of the tournament.

Tokens are made here and sent with the registration (RegisterEntrant's `player_tokens`), so
that a registration whose answer was lost is sent again with the same tokens and answered with
the same entrant. `bergen play --tournament ID --register` keeps the player's token in
`$BERGEN_STATE_DIR/tournament-<id>.json` (mode 0600), and `bergen play --tournament ID`
finds it there.

A player kept in the user's configuration folder (`players`) enters as that registered player
(its token sent as a `registered_player_tokens`), as a rated tournament requires; `bergen bots
--tournament` enters its bots as bot players (`players.BotPlayers`), each entrant its own.
`$BERGEN_STATE_DIR/tournament-<id>-<entrant>.json` (mode 0600), and `bergen play
--tournament ID` finds it there.

An entrant's client seed is made here too (`new_client_seed`), and only its commitment is
sent with the registration (TOURNAMENT.md section 3); the seed is kept beside the tokens.
Once the organiser has started the tournament, each player reveals its entrant's seed on its
own as soon as it sees the reveal phase (`play_tournament`): an entrant whose seed is not
revealed when the window closes is withdrawn before round 1.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from rich.console import Console
from rich.markup import escape

from bergen.api.exit_status import ExitStatus
from bergen.api.state import state_dir
from bergen.domain.montecarlo import Settings
from bergen.domain.tournament_fairness import commitment
from bergen.v1 import bergen_pb2 as pb

from . import players as kept_players
from . import terminal
from .client import Client, Unreachable, new_token, passing, pause_s
from .connect import bearer, describe_error, error_info, exit_status_of, failure_of
from .players import BotPlayers, refused_for
from .seat import (
    MATCH_TIMEOUT_S,
    RECONNECT_S,
    BotFailed,
    Quit,
    SeatLink,
    follow_narrated,
    login_name,
    play_loop,
    run_seat,
    seat_decider,
    settings_from,
)
from .tournament_view import reveal_line, standings_lines, winner_line
from .usage import Failed, fail, report, seat_label


class TournamentFeed:
    """Follows WatchTournament in a daemon thread and counts the changes it is told of.

    `wait_after(count)` blocks until the feed has been told of a change after `count` (read
    from `count` before looking at the tournament, so that no change is missed), the stream
    has ended with the tournament, or it failed for good.
    """

    def __init__(self, client: Client, tournament_id: str, token: str | None = None) -> None:
        self.client = client
        self.tournament_id = tournament_id
        self.token = token
        self.count = 0
        self.latest: pb.TournamentView | None = None
        self.ended = False
        self.failure: BotFailed | None = None
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._call: Any = None
        self._thread = threading.Thread(
            target=self._watch, name=f"watch-tournament-{tournament_id}", daemon=True
        )

    def start(self) -> TournamentFeed:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        call = self._call
        if call is not None:
            call.cancel()

    def _tell(self, view: pb.TournamentView | None, ended: bool = False) -> None:
        with self._changed:
            if view is not None:
                self.latest = view
            self.count += 1
            self.ended = self.ended or ended
            self._changed.notify_all()

    def _watch(self) -> None:
        failing_since: float | None = None
        attempt = 0
        while not self._stop.is_set():
            try:
                call = self.client.stub.WatchTournament(
                    pb.WatchTournamentRequest(tournament_id=self.tournament_id),
                    metadata=bearer(self.token),
                )
                self._call = call
                for reply in call:
                    failing_since, attempt = None, 0
                    self._tell(reply.tournament)
                    if reply.tournament.phase == pb.TOURNAMENT_PHASE_ENDED:
                        self._tell(None, ended=True)
                        return
                # The stream ends with the tournament; a stream cut short is opened again.
                failing_since = failing_since or time.monotonic()
            except grpc.RpcError as e:
                if self._stop.is_set():
                    return
                now = time.monotonic()
                failing_since = failing_since or now
                attempt += 1
                if not passing(e) or now - failing_since > RECONNECT_S:
                    with self._changed:
                        self.failure = BotFailed(
                            f"tournament {self.tournament_id}: its stream failed: "
                            f"{describe_error(e)}",
                            exit_status_of(e),
                        )
                        self._changed.notify_all()
                    return
                self._stop.wait(pause_s(attempt))

    def wait_after(self, count: int, timeout: float | None = None) -> None:
        """Block until a change after `count`, the end, or a failure (raised: BotFailed)."""
        with self._changed:
            self._changed.wait_for(
                lambda: self.count > count or self.ended or self.failure is not None, timeout
            )
            if self.failure is not None:
                raise self.failure


@dataclass
class TournamentPlayer:
    """One player of an entrant: its token, its entrant's client seed (None when it was
    not kept: it cannot be revealed), and the matches it has played."""

    tournament_id: str
    entrant: int
    player: int
    name: str
    token: str
    policy: str = ""
    played: list[str] = field(default_factory=list)
    client_seed: str | None = None


def get_tournament(
    client: Client, tournament_id: str, token: str | None = None
) -> pb.GetTournamentResponse:
    """GetTournament, with the player's token when given (sent again on a passing error).
    Raises grpc.RpcError."""
    reply: pb.GetTournamentResponse = client.call(
        "GetTournament", pb.GetTournamentRequest(tournament_id=tournament_id), token
    )
    return reply


def new_client_seed() -> str:
    """A fresh client seed for an entrant: 128 random bits, as hex."""
    return secrets.token_hex(16)


def register(
    client: Client,
    tournament_id: str,
    names: list[str],
    client_seed: str,
    registered: list[str] | None = None,
) -> tuple[int, list[str]]:
    """Register an entrant of `names` (one player, or two at partnership tables) with tokens
    made here, the commitment to `client_seed` (the seed itself is revealed after the start:
    `reveal`) and each name's registered player's token in `registered` ("" for a name
    alone); returns its number and each player's token. A registration whose answer was lost
    is sent again with the same tokens, which the server answers with the entrant the first
    one made. Raises grpc.RpcError."""
    tokens = [new_token() for _ in names]
    req = pb.RegisterEntrantRequest(
        tournament_id=tournament_id,
        players=names,
        client_seed_commitment=commitment(client_seed.encode("utf-8")),
        player_tokens=tokens,
        registered_player_tokens=registered or [],
    )
    reply: pb.RegisterEntrantResponse = client.call("RegisterEntrant", req)
    return reply.entrant, tokens


def reveal(
    client: Client, tournament_id: str, entrant: int, client_seed: str, token: str
) -> pb.RevealEntrantSeedResponse:
    """Reveal the entrant's client seed with one of its players' tokens (sent again on a
    passing error: a seed revealed before is answered as such). Raises grpc.RpcError."""
    req = pb.RevealEntrantSeedRequest(
        tournament_id=tournament_id, entrant=entrant, client_seed=client_seed
    )
    reply: pb.RevealEntrantSeedResponse = client.call("RevealEntrantSeed", req, token)
    return reply


def needs_reveal(view: pb.TournamentView, entrant: int) -> bool:
    """Whether the entrant is to reveal its seed now: the tournament is in its reveal phase
    and the entrant, still in, has not revealed."""
    if view.phase != pb.TOURNAMENT_PHASE_REVEAL:
        return False
    me = next((e for e in view.entrants if e.entrant == entrant), None)
    return me is not None and not me.revealed and not me.HasField("withdrawn_after_round")


TOO_LATE = frozenset({"REVEAL_CLOSED", "ALREADY_WITHDRAWN"})
"""A reveal's refusals that the tournament answers by itself: the window closed (round 1
was paired meanwhile, and the entrant withdrawn), or the entrant withdrawn."""

PlayMatch = Callable[[TournamentPlayer, pb.TournamentAssignment], None]
"""Plays one match of a player to its end (raises BotFailed, grpc.RpcError)."""


def play_tournament(
    client: Client,
    feed: TournamentFeed,
    player: TournamentPlayer,
    play_match: PlayMatch,
    between: Callable[[pb.TournamentView], None] | None = None,
) -> pb.TournamentView:
    """Play each match the server seats `player` in, one after another, until the tournament
    ends; returns it as it ended. Once registration has closed it reveals the entrant's seed
    (when the player keeps it). `between` is told of the tournament each time the player has
    no match to play (before the start, while seeds are revealed, between rounds, a bye).

    Raises BotFailed, grpc.RpcError."""
    told: int | None = None
    while True:
        count = feed.count
        got = get_tournament(client, player.tournament_id, player.token)
        view, where = got.tournament, got.assignment
        if view.phase == pb.TOURNAMENT_PHASE_ENDED:
            return view
        if player.client_seed is not None and needs_reveal(view, player.entrant):
            try:
                reveal(
                    client, player.tournament_id, player.entrant, player.client_seed, player.token
                )
            except grpc.RpcError as e:
                info = error_info(e)
                if info is None or info.reason not in TOO_LATE:
                    raise
            continue
        if where.match_id and where.match_id not in player.played:
            play_match(player, where)
            player.played.append(where.match_id)
            told = None
            continue
        if between is not None and told != view.version:
            between(view)
            told = view.version
        feed.wait_after(count)


def bot_match(client: Client, settings: Settings, rng: random.Random) -> PlayMatch:
    """A bot's way of playing a match: `seat.run_seat` with the player's policy."""

    def play(player: TournamentPlayer, where: pb.TournamentAssignment) -> None:
        link = SeatLink(client, where.match_id, where.seat, player.token)
        try:
            link.start()
            decide = seat_decider(player.policy, settings, link.clock)
            run_seat(link, decide, rng, time.monotonic() + MATCH_TIMEOUT_S)
        finally:
            link.close()

    return play


# --- `bergen bots --tournament` ----------------------------------------------------------


ENTRY_ATTEMPTS = 1000
"""Bot players tried for one entrant before `bergen bots` gives up entering it."""
PASSED_OVER = frozenset({"NAME_TAKEN", "PLAYER_ALREADY_ENTERED"})
"""Why a bot is not entered that the next bot may be: its name is an entrant's already (by a
name alone), or it entered already (from another `bergen bots` sharing its folder)."""


def standings_rows(
    view: pb.TournamentView, policy_of: dict[int, str] | None = None
) -> list[dict[str, object]]:
    """The standings as JSON-ready rows, with each entrant's players (and policy)."""
    players = {e.entrant: list(e.players) for e in view.entrants}
    rows: list[dict[str, object]] = []
    for s in view.standings:
        row: dict[str, object] = {
            "rank": s.rank,
            "entrant": s.entrant,
            "players": players.get(s.entrant, []),
            "match_points": s.match_points,
            "margin": s.margin,
            "buchholz": s.buchholz,
            "wins": s.wins,
        }
        if policy_of is not None:
            row["policy"] = policy_of.get(s.entrant)
        rows.append(row)
    return rows


def run_bots(args: argparse.Namespace) -> int:
    """`bergen bots --tournament ID --entrants N`: register N bot entrants, play every match
    each is seated in until the tournament ends, and report the final standings."""
    out = Console(highlight=False, soft_wrap=True)
    tid: str = args.tournament
    if args.entrants is None or args.entrants < 1:
        return fail("bots", "--tournament needs --entrants N (1 or more)", ExitStatus.USAGE)
    seed = args.seed if args.seed is not None else secrets.token_hex(8)
    rng = random.Random(seed)
    settings = settings_from(args)
    with Client(args.endpoint) as client:
        try:
            client.wait_ready()
        except Unreachable as e:
            return fail("bots", str(e), ExitStatus.UNREACHABLE)
        feed = TournamentFeed(client, tid)
        try:
            view = get_tournament(client, tid).tournament
            if view.phase != pb.TOURNAMENT_PHASE_REGISTRATION:
                return fail(
                    "bots",
                    f"tournament {tid} is not open for registration",
                    ExitStatus.REFUSED,
                    "TOURNAMENT_NOT_OPEN",
                )
            partnerships = view.settings.partnerships
            players: list[TournamentPlayer] = []
            policy_of: dict[int, str] = {}
            keeper = BotPlayers(client, args.server)
            for i in range(args.entrants):
                policy = args.policy[i % len(args.policy)]
                # A bot another process entered (or whose name an entrant took) is passed
                # over for the next: bots from several machines can fill one tournament.
                for attempt in range(ENTRY_ATTEMPTS):
                    bots = [keeper.take(policy) for _ in range(2 if partnerships else 1)]
                    names = [b.name for b in bots]
                    client_seed = f"{seed}-{i + 1}"
                    try:
                        entrant, tokens = register(
                            client,
                            tid,
                            names,
                            client_seed,
                            registered=[b.token for b in bots],
                        )
                        break
                    except grpc.RpcError as e:
                        if refused_for(e) not in PASSED_OVER or attempt + 1 == ENTRY_ATTEMPTS:
                            raise
                policy_of[entrant] = policy
                for p, (name, token) in enumerate(zip(names, tokens, strict=True)):
                    players.append(
                        TournamentPlayer(
                            tid, entrant, p, name, token, policy, client_seed=client_seed
                        )
                    )
                if not args.json:
                    out.print(f"entrant {entrant}: {', '.join(names)} ({policy})", markup=False)
            feed.start()
            done: queue.Queue[pb.TournamentView | BaseException] = queue.Queue()
            rngs = [random.Random(rng.random()) for _ in players]

            def body(player: TournamentPlayer, player_rng: random.Random) -> None:
                try:
                    done.put(
                        play_tournament(
                            client, feed, player, bot_match(client, settings, player_rng)
                        )
                    )
                except BaseException as e:  # reported by the main thread
                    done.put(e)

            for player, player_rng in zip(players, rngs, strict=True):
                threading.Thread(
                    target=body,
                    args=(player, player_rng),
                    name=f"bot-entrant-{player.entrant}-{player.player}",
                    daemon=True,
                ).start()
            final: pb.TournamentView | None = None
            for _ in players:
                got = done.get()
                if isinstance(got, BaseException):
                    raise got
                final = got
            assert final is not None
        except (grpc.RpcError, Failed) as e:
            return report("bots", failure_of(e))
        finally:
            feed.close()
    matches = sorted({m for p in players for m in p.played})
    if final.cancelled and not args.json:
        out.print(f"tournament {tid} {winner_line(final)}", markup=False)
        return ExitStatus.SUCCESS
    if args.json:
        print(
            json.dumps(
                {
                    "server": args.server,
                    "tournament_id": tid,
                    "seed": seed,
                    "entrants": [{"entrant": e, "policy": policy_of[e]} for e in sorted(policy_of)],
                    "rounds": final.round,
                    "cancelled": final.cancelled,
                    "matches": matches,
                    "standings": standings_rows(final, policy_of),
                }
            )
        )
        return ExitStatus.SUCCESS
    out.print(
        f"tournament {tid} ended after {final.round} round(s), {len(matches)} match(es) "
        f"played by {args.entrants} bot entrant(s), seed {seed}",
        markup=False,
    )
    for line in standings_lines(final):
        out.print(line, markup=False)
    out.print(winner_line(final) or "", markup=False)
    return ExitStatus.SUCCESS


# --- `bergen play --tournament` ----------------------------------------------------------


def _safe(tournament_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in tournament_id)


def registration_path(tournament_id: str, entrant: int) -> Path:
    """An entrant's file, as `bergen tournament register` writes it too."""
    return state_dir() / f"tournament-{_safe(tournament_id)}-{entrant}.json"


def save_registration(data: dict[str, Any]) -> Path:
    """Write an entrant's file (owner-only: it holds its players' tokens) atomically:
    {tournament_id, entrant, server, client_seed, players: [{player, name, token}]}."""
    path = registration_path(str(data["tournament_id"]), int(data["entrant"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)
    return path


def load_registrations(tournament_id: str) -> list[dict[str, Any]]:
    """The entrants of the tournament registered from here, by entrant number."""
    found: list[dict[str, Any]] = []
    for path in sorted(state_dir().glob(f"tournament-{_safe(tournament_id)}-*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data["tournament_id"] == tournament_id and data["players"][0]["token"]:
                found.append(data)
        except (OSError, ValueError, KeyError, IndexError, TypeError):
            continue
    return sorted(found, key=lambda d: int(d["entrant"]))


def entrant_players(args: argparse.Namespace) -> tuple[list[str], list[str] | None]:
    """The names `bergen play --tournament --register` enters, and their registered players'
    tokens (None when no name is a player kept for the server): you as the player you keep
    (`kept_players.choose`: --player NAME, else your one player unless --name names another),
    else by --name; and --partner, as the player of that name you keep, if any. Raises
    Failed (a --player not kept)."""
    server: str = args.server
    me = kept_players.choose(server, args.player, args.name)
    names = [me.name if me else args.name or os.environ.get("BERGEN_NAME") or login_name()]
    tokens = [me.token if me else ""]
    if args.partner:
        partner = kept_players.find(server, args.partner)
        names.append(partner.name if partner else args.partner)
        tokens.append(partner.token if partner else "")
    return names, tokens if any(tokens) else None


def run_player(args: argparse.Namespace) -> int:
    """`bergen play --tournament ID`: play the player's matches one after another as the
    server seats it, showing the standings between rounds, until the tournament ends."""
    console = Console(highlight=False, soft_wrap=True)
    tid: str = args.tournament
    if args.entrant_player not in (1, 2):
        return fail("play", "--entrant-player is 1 or 2", ExitStatus.USAGE)
    live = terminal.LiveLine(console, terminal.is_interactive())
    with Client(args.endpoint) as client:
        try:
            client.wait_ready()
        except Unreachable as e:
            return fail("play", str(e), ExitStatus.UNREACHABLE)
        feed: TournamentFeed | None = None
        try:
            saved: dict[str, Any] | None = None
            if args.register:
                names, registered = entrant_players(args)
                client_seed = new_client_seed()
                entrant, tokens = register(client, tid, names, client_seed, registered=registered)
                saved = {
                    "tournament_id": tid,
                    "entrant": entrant,
                    "server": args.server,
                    "client_seed": client_seed,
                    "players": [
                        {"player": i, "name": n, "token": t}
                        for i, (n, t) in enumerate(zip(names, tokens, strict=True))
                    ],
                }
                path = save_registration(saved)
                console.print(
                    f"registered in tournament [bold]{escape(tid)}[/] as entrant {entrant} "
                    f"({escape(' and '.join(names))}); tokens saved in {escape(str(path))}"
                )
            else:
                mine = [
                    d
                    for d in load_registrations(tid)
                    if args.entrant is None or int(d["entrant"]) == args.entrant
                ]
                if not mine:
                    return fail(
                        "play",
                        f"no registration saved for tournament {tid}"
                        + ("" if args.entrant is None else f" as entrant {args.entrant}")
                        + "; --register --name NAME registers now",
                        ExitStatus.USAGE,
                        "NOT_REGISTERED_HERE",
                    )
                if len(mine) > 1:
                    entrants = ", ".join(str(d["entrant"]) for d in mine)
                    return fail(
                        "play",
                        f"entrants {entrants} of tournament {tid} were registered here: say "
                        "which with --entrant N",
                        ExitStatus.USAGE,
                    )
                saved = mine[0]
            players = saved["players"]
            if args.entrant_player > len(players):
                return fail(
                    "play", "this entrant has one player: --entrant-player 1", ExitStatus.USAGE
                )
            me = players[args.entrant_player - 1]
            kept = saved.get("client_seed")
            player = TournamentPlayer(
                tid,
                int(saved["entrant"]),
                args.entrant_player - 1,
                str(me["name"]),
                str(me["token"]),
                client_seed=kept if isinstance(kept, str) else None,
            )
            feed = TournamentFeed(client, tid, player.token).start()

            def between(view: pb.TournamentView) -> None:
                if view.phase == pb.TOURNAMENT_PHASE_REGISTRATION:
                    console.print(
                        f"waiting for the tournament to start ({len(view.entrants)} entrant(s) "
                        "registered)"
                    )
                    return
                if view.phase == pb.TOURNAMENT_PHASE_REVEAL:
                    if player.client_seed is None and needs_reveal(view, player.entrant):
                        console.print(
                            "your entrant's client seed is not kept here, so it cannot be "
                            "revealed: unless it is revealed elsewhere, the entrant is "
                            "withdrawn before round 1"
                        )
                    console.print(reveal_line(view) or "", markup=False)
                    return
                console.print(
                    f"round {view.round} of {view.total_rounds}: waiting for your next match"
                )
                for line in standings_lines(view, mark=player.entrant):
                    console.print(line, markup=False)

            def play_match(p: TournamentPlayer, where: pb.TournamentAssignment) -> None:
                console.print(
                    f"round {where.round}, table {where.table}: match "
                    f"[bold]{escape(where.match_id)}[/], you are {seat_label(where.seat)}"
                )
                link = SeatLink(client, where.match_id, where.seat, p.token)
                try:
                    # Tell the hand in play so far (as `bergen play --match` does), then
                    # follow the stream from there.
                    narrator = follow_narrated(link, console, live)
                    play_loop(console, link, narrator, [], live)
                finally:
                    live.show(None)
                    link.close()

            final = play_tournament(client, feed, player, play_match, between)
        except (grpc.RpcError, Failed) as e:
            return report("play", failure_of(e))
        except Quit as e:
            console.print(f"{e}; bergen play --tournament {escape(tid)} plays on")
            return ExitStatus.SUCCESS
        except KeyboardInterrupt:
            console.print(f"\ninterrupted; bergen play --tournament {escape(tid)} plays on")
            return ExitStatus.INTERRUPTED
        finally:
            live.done()
            if feed is not None:
                feed.close()
    if final.cancelled:
        console.print(f"tournament {tid} {winner_line(final)}", markup=False)
        return ExitStatus.SUCCESS
    console.print(f"tournament {escape(tid)} ended after {final.round} round(s)")
    for line in standings_lines(final, mark=player.entrant):
        console.print(line, markup=False)
    console.print(winner_line(final) or "", markup=False)
    return ExitStatus.SUCCESS


__all__ = [
    "TournamentFeed",
    "TournamentPlayer",
    "get_tournament",
    "load_registrations",
    "needs_reveal",
    "new_client_seed",
    "play_tournament",
    "register",
    "reveal",
    "run_bots",
    "run_player",
    "save_registration",
    "standings_lines",
    "standings_rows",
]
