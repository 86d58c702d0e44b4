"""Seats the computer plays: bots that `bergen web` runs for the matches its players create.

Each bot is an ordinary client of the game server, as `bergen bots` runs them: it takes a free
seat through JoinMatch with a token made for it, and then holds that token only, so it sees
what its seat may see and nothing more (`seat.start_bot`, one thread per seat). The token is
derived from the gateway's seal key, the match and the seat (`tokens.SeatKeys`), so that any
gateway with the same key can show the game server the computer held that seat, and take the
same seat of the match's rematch (`rematch`). The bots run
in the gateway's own process, on one gRPC channel of their own, so that a gateway needs no
second program next to it; `max_bots` bounds them (each Monte Carlo decision takes CPU from
the gateway's streams).

In a rated match every seat must be a registered player's: the computer's seats there are its
own players, registered by the gateway as programs (`bot`) the first time it needs them, one
for each policy and each of up to three seats of one match ("greedy bot 1", ...), so that each
has a rating of its own. Their player tokens are kept in a file beside the seats' (0600).

Each seat (match, seat, token, policy, name) is written, before its JoinMatch is sent, to a
file under the gateway's state folder that only its owner may read (0600), and forgotten once
its match has ended: a gateway restarted mid-match plays its seats on (`resume`), and a join
whose answer was lost is sent again with the same token, which the server answers with the
same seat.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import re
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import grpc

from bergen.api.state import address_key
from bergen.domain.deciders import POLICY_NAMES
from bergen.domain.montecarlo import Settings
from bergen.v1 import bergen_pb2 as pb

from ..client import Client, new_token
from ..connect import Endpoint, describe_error
from ..seat import BotSeat, SeatLink, start_bot
from .tokens import SeatKeys

log = logging.getLogger("bergen.web.computer")

MAX_BOTS = 64
"""Seats the computer plays at once through one gateway (`bergen web --max-bots`)."""
SEATS_FILE = "computer-seats-{server}.json"
"""The file of one game server's computer seats in the state folder (`address_key`)."""
FORMAT = "bergen-computer-seats/1"
PLAYERS_FILE = "computer-players-{server}.json"
"""The file of the computer's registered players on one game server, in the state folder."""
PLAYERS_FORMAT = "bergen-computer-players/1"
NAME_TRIES = 4
"""Names tried for one computer player: its own, then with a few random letters when another
player (of another gateway, say) has it."""
STOP_S = 5.0
"""How long `close` waits for the bots to stop."""
MATCH_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}")


class ComputerSeatsError(Exception):
    """A fill refused before any seat was taken."""


class TooManyBots(ComputerSeatsError):
    """The gateway already plays (or would play) more seats than `max_bots`."""


class NoFreeSeats(ComputerSeatsError):
    """The match has fewer free seats than asked for, or no longer seats players."""


class SeatingFailed(Exception):
    """A join failed after the check: `seats` were taken (and are played), the rest not."""

    def __init__(self, message: str, seats: list[int]) -> None:
        super().__init__(message)
        self.seats = seats


@dataclass(frozen=True)
class ComputerSeat:
    """One seat the computer plays: what a restarted gateway needs to play it on."""

    match_id: str
    seat: int
    token: str
    policy: str
    name: str

    def __repr__(self) -> str:  # never the token, wherever a seat is printed
        return f"ComputerSeat({self.match_id!r}, seat={self.seat}, policy={self.policy!r})"


@dataclass(frozen=True)
class ComputerPlayer:
    """A registered player (a bot) the computer plays rated seats as: the `number`-th seat of
    `policy` in one match."""

    policy: str
    number: int
    player_id: str
    name: str
    token: str

    def __repr__(self) -> str:  # never the token
        return f"ComputerPlayer({self.name!r}, {self.player_id})"


def computer_player_name(policy: str, number: int) -> str:
    """The name the computer registers its `number`-th player of `policy` under."""
    return f"{policy} bot {number}"


def computer_name(seat: int, policy: str) -> str:
    """A computer seat's display name, its seat counted from 1 as people read it."""
    return f"computer {seat + 1} ({policy})"


class ComputerSeats:
    """Bots the gateway plays for computer-filled seats, in its own process.

    `fill` blocks on the game server: call it from a thread (`asyncio.to_thread`) in an
    async handler.
    """

    def __init__(
        self,
        target: Endpoint | str,
        state_dir: Path,
        *,
        max_bots: int = MAX_BOTS,
        settings: Settings | None = None,
        keys: SeatKeys | None = None,
    ) -> None:
        """`keys` derive the bots' tokens (`bergen web` gives its seal key's); without them
        each token is drawn at random, and the computer's seats of an ended match are not
        taken again in its rematch."""
        self.max_bots = max_bots
        self.keys = keys
        self.settings = settings or Settings()
        server = address_key(str(target))
        self.path = Path(state_dir) / SEATS_FILE.format(server=server)
        self.players_path = Path(state_dir) / PLAYERS_FILE.format(server=server)
        self._players: dict[tuple[str, int], ComputerPlayer] | None = None
        self._client = Client(target)
        self._lock = threading.Lock()
        self._seats: dict[tuple[str, int], ComputerSeat] = {}
        self._links: dict[tuple[str, int], SeatLink] = {}
        self._threads: list[threading.Thread] = []
        self._closing = False

    @property
    def playing(self) -> list[ComputerSeat]:
        """The seats the computer holds now, their matches not yet ended."""
        with self._lock:
            return list(self._seats.values())

    def fill(self, match_id: str, count: int, policy: str, *, rated: bool = False) -> list[int]:
        """Take `count` free seats of `match_id` (the lowest first) with bots of `policy`,
        and play them; in a `rated` match as the computer's registered players. Returns the
        seats taken (counted from 0).

        Raises ValueError (an unknown policy, a count under 1, not a match id), TooManyBots,
        NoFreeSeats, ComputerSeatsError (no computer player for a rated seat: all three before
        any seat is taken), grpc.RpcError (reading the match),
        SeatingFailed (a join refused after the check, say a person took the seat first:
        the seats taken before it are played all the same, never left idle)."""
        if policy not in POLICY_NAMES:
            raise ValueError(f"the policy is one of {', '.join(POLICY_NAMES)}, not {policy!r}")
        if count < 1:
            raise ValueError("the computer fills at least one seat")
        if not MATCH_ID.fullmatch(match_id):
            raise ValueError("not a match id")
        with self._lock:  # one fill at a time: the seats counted are the seats taken
            self._check_room(count)
            view = self._client.get_match(match_id)
            free = [s.seat for s in view.seats if not s.taken]
            if view.phase != pb.PHASE_SEATING or count > len(free):
                raise NoFreeSeats(
                    f"match {match_id} has {len(free) if view.phase == pb.PHASE_SEATING else 0}"
                    f" free seats, not {count}"
                )
            try:
                players = [self._player(policy, n + 1) for n in range(count)] if rated else []
            except (grpc.RpcError, OSError, ValueError) as e:
                why = describe_error(e) if isinstance(e, grpc.RpcError) else str(e)
                raise ComputerSeatsError(f"no computer player for rated seats: {why}") from e
            planned: list[tuple[int, str, str | None]] = [
                (seat, policy, None) for seat in free[:count]
            ]
            return self._take(match_id, planned, players)

    def rematch(self, match_id: str, seats: Mapping[int, tuple[str, str]]) -> list[int]:
        """Take `seats` of the rematch `match_id`: for each seat (from 0), the token the
        computer held it with in the match before and the policy it played. Returns the seats
        taken. Raises ValueError (an unknown policy, no seat), TooManyBots (before any seat
        is taken), SeatingFailed (as `fill`)."""
        if not seats:
            raise ValueError("the computer takes at least one seat")
        for _, policy in seats.values():
            if policy not in POLICY_NAMES:
                raise ValueError(f"the policy is one of {', '.join(POLICY_NAMES)}, not {policy!r}")
        if not MATCH_ID.fullmatch(match_id):
            raise ValueError("not a match id")
        with self._lock:
            self._check_room(len(seats))
            planned = [(seat, policy, previous) for seat, (previous, policy) in seats.items()]
            return self._take(match_id, sorted(planned))

    def _check_room(self, count: int) -> None:
        """Raises ComputerSeatsError when stopping, TooManyBots for more than `max_bots` (under
        `_lock`)."""
        if self._closing:
            raise ComputerSeatsError("the gateway is stopping")
        if len(self._seats) + count > self.max_bots:
            raise TooManyBots(
                f"the gateway plays at most {self.max_bots} seats at once and plays "
                f"{len(self._seats)}: {count} more is too many"
            )

    def _take(
        self,
        match_id: str,
        planned: list[tuple[int, str, str | None]],
        players: Sequence[ComputerPlayer] = (),
    ) -> list[int]:
        """Join each (seat, policy, previous seat token) of `planned` and play it (under
        `_lock`), as the computer's registered `players` (one for each, in a rated match).
        Raises SeatingFailed."""
        taken: list[int] = []
        for n, (seat, policy, previous) in enumerate(planned):
            token = self.keys.computer(match_id, seat) if self.keys is not None else new_token()
            player = players[n] if players else None
            name = player.name if player is not None else computer_name(seat, policy)
            bot = ComputerSeat(match_id, seat, token, policy, name)
            self._seats[(match_id, seat)] = bot
            self._save()  # before the join: a gateway stopped meanwhile still knows it
            try:
                self._join(bot, previous, player)
            except grpc.RpcError as e:
                del self._seats[(match_id, seat)]
                self._save()
                raise SeatingFailed(
                    f"match {match_id}: the computer took seats "
                    f"{[s + 1 for s in taken] or 'none'} but not seat {seat + 1}: "
                    f"{describe_error(e)}",
                    taken,
                ) from e
            taken.append(seat)
            self._start(bot)
        policies = sorted({policy for _, policy, _ in planned})
        seats = ", ".join(str(seat + 1) for seat in taken)
        log.info("match %s: the computer plays seats %s (%s)", match_id, seats, ", ".join(policies))
        return taken

    def _join(
        self,
        bot: ComputerSeat,
        previous: str | None = None,
        player: ComputerPlayer | None = None,
    ) -> None:
        """Take the bot's seat with its token (sent again, with it, after a passing error);
        of a rematch, with the token the computer held the seat with before; as `player`
        when given. Raises grpc.RpcError."""
        request = pb.JoinMatchRequest(
            match_id=bot.match_id, seat=bot.seat, name=bot.name, seat_token=bot.token
        )
        if previous is not None:
            request.previous_seat_token = previous
        if player is not None:
            request.player_token = player.token
        self._client.call("JoinMatch", request)

    # --- the computer's players ---------------------------------------------------------

    def _player(self, policy: str, number: int) -> ComputerPlayer:
        """The computer's `number`-th player of `policy` (under `_lock`), registered now
        when it has none yet. Raises grpc.RpcError (the registration refused), OSError,
        ValueError (a players' file that is not one)."""
        if self._players is None:
            self._players = self._load_players()
        found = self._players.get((policy, number))
        if found is not None:
            return found
        base = computer_player_name(policy, number)
        name = base
        for attempt in range(NAME_TRIES):
            try:
                # Never sent again by itself: a registration whose answer was lost has
                # claimed the name, and its token with it. The next name is tried instead.
                got: pb.RegisterPlayerResponse = self._client.call(
                    "RegisterPlayer", pb.RegisterPlayerRequest(name=name, bot=True), retry=False
                )
            except grpc.RpcError as e:
                code = e.code() if isinstance(e, grpc.Call) else None
                if code != grpc.StatusCode.ALREADY_EXISTS or attempt == NAME_TRIES - 1:
                    raise
                name = f"{base} {secrets.token_hex(2)}"
                continue
            found = ComputerPlayer(policy, number, got.player_id, got.name, got.player_token)
            self._players[(policy, number)] = found
            self._save_players()
            log.info("registered the computer's player %s (%s)", found.name, found.player_id)
            return found
        raise AssertionError("unreachable")

    def _save_players(self) -> None:
        """Write the computer's players (under `_lock`): owner-only, replaced at once."""
        players = list((self._players or {}).values())
        body = {"format": PLAYERS_FORMAT, "players": [asdict(p) for p in players]}
        _write_private(self.players_path, json.dumps(body, indent=1).encode())

    def _load_players(self) -> dict[tuple[str, int], ComputerPlayer]:
        """The computer's players written in its file (none without one). Raises ValueError
        for a file that is not one of these."""
        try:
            data: Any = json.loads(self.players_path.read_text())
        except FileNotFoundError:
            return {}
        if not isinstance(data, dict) or data.get("format") != PLAYERS_FORMAT:
            raise ValueError(f"{self.players_path} is not a file of computer players")
        found = {}
        for item in data.get("players", []):
            player = ComputerPlayer(**item)
            found[(player.policy, player.number)] = player
        return found

    def resume(self) -> list[ComputerSeat]:
        """Play on every seat written by an earlier gateway on this state folder (after a
        restart); returns them. A seat whose match has ended is forgotten once seen so."""
        seats = self._load()
        with self._lock:
            for bot in seats:
                key = (bot.match_id, bot.seat)
                if key in self._seats:
                    continue
                self._seats[key] = bot
                self._start(bot)
        if seats:
            log.info("resumed %d computer seats", len(seats))
        return seats

    def close(self) -> None:
        """Stop every bot (their seats stay written, for `resume`) and the channel."""
        with self._lock:
            self._closing = True
            links = list(self._links.values())
            threads = list(self._threads)
        for link in links:
            link.close()
        deadline = time.monotonic() + STOP_S
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._client.close()

    # --- the bots ------------------------------------------------------------------------

    def _start(self, bot: ComputerSeat) -> None:
        """Play `bot` in its own thread (under `_lock`)."""
        key = (bot.match_id, bot.seat)
        link = SeatLink(self._client, bot.match_id, bot.seat, bot.token)
        self._links[key] = link
        self._threads = [t for t in self._threads if t.is_alive()]
        self._threads.append(
            start_bot(
                self._client,
                bot.match_id,
                BotSeat(bot.seat, bot.token, bot.policy, bot.name),
                self.settings,
                random.Random(),
                lambda e: self._failed(bot, e),
                link=link,
                on_done=lambda: self._forget(bot),
            )
        )

    def _failed(self, bot: ComputerSeat, error: BaseException) -> None:
        with self._lock:
            if self._closing:
                return  # stopped with the gateway: kept for the next one
        why = describe_error(error) if isinstance(error, grpc.RpcError) else str(error)
        log.warning("match %s: computer seat %d stopped: %s", bot.match_id, bot.seat + 1, why)
        self._forget(bot)

    def _forget(self, bot: ComputerSeat) -> None:
        with self._lock:
            key = (bot.match_id, bot.seat)
            if self._seats.get(key) == bot:
                del self._seats[key]
                self._links.pop(key, None)
                self._save()

    # --- the file -------------------------------------------------------------------------

    def _save(self) -> None:
        """Write the seats (under `_lock`): owner-only, replaced at once."""
        body = {"format": FORMAT, "seats": [asdict(s) for s in self._seats.values()]}
        _write_private(self.path, json.dumps(body, indent=1).encode())

    def _load(self) -> list[ComputerSeat]:
        """The seats written in the file (none without one). Raises ValueError for a file
        that is not one of these."""
        try:
            data: Any = json.loads(self.path.read_text())
        except FileNotFoundError:
            return []
        with contextlib.suppress(OSError):
            self.path.chmod(0o600)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"{self.path} is not a file of computer seats")
        seats = []
        for item in data.get("seats", []):
            seat = ComputerSeat(**item)
            if not MATCH_ID.fullmatch(seat.match_id) or seat.policy not in POLICY_NAMES:
                raise ValueError(f"{self.path} names a seat it should not: {seat!r}")
            seats.append(seat)
        return seats


def _write_private(path: Path, data: bytes) -> None:
    """Replace `path` with `data` at once, readable by its owner alone (0600)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
