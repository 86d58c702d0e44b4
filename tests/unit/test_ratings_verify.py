"""`bergen ratings verify`'s pieces, on records signed here and a server made of the ratings
it should show (a fake stub): a folder that agrees, and every kind of difference named with
its player, its pool and the first match after which the two part."""

from __future__ import annotations

import copy
import itertools
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from e2e.failed_calls import FailedCall

from bergen.api.convert import RATING_POOL, pool_rating_out
from bergen.api.signing import RecordSigner
from bergen.cli_client import known_keys
from bergen.cli_client.ratings import (
    Folder,
    Recomputed,
    agrees,
    compare,
    first_disagreement,
    read_folder,
    recomputed,
)
from bergen.domain.commands import CreateMatch, Resign, TakeSeat
from bergen.domain.engine import execute
from bergen.domain.events import Event
from bergen.domain.ratings import NEWCOMER, POOLS, Rating, leaderboard
from bergen.domain.record import build_record
from bergen.domain.state import fold
from bergen.v1 import bergen_pb2 as pb

from .support import SEED, rules_for

NAMES = ("Ann", "Bob", "Cy")
IDS = {n: str(uuid.uuid5(uuid.NAMESPACE_OID, n)) for n in NAMES}


def rated_record(match: int, players: Sequence[str], loser: int, order: int) -> dict[str, Any]:
    """A rated two- or three-seat match of `players` (names), ended by `loser`'s
    resignation."""
    match_id = str(uuid.uuid5(uuid.NAMESPACE_OID, f"match {match}"))
    seats = len(players)
    events: list[Event] = list(
        execute(None, CreateMatch(match_id, seats, False, rules_for(seats, False), SEED, "", True))[
            0
        ]
    )
    for seat, name in enumerate(players):
        events += execute(fold(events), TakeSeat(name, f"seed {seat}", seat, IDS[name]))[0]
    events += execute(fold(events), Resign(loser))[0]
    return build_record(events, rated_order=order)


@dataclass
class Signed:
    folder: Path
    key: str
    records: list[dict[str, Any]]

    def path(self, record: dict[str, Any]) -> Path:
        return self.folder / f"{record['match_id']}.json"


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Signed:
    """36 rated two-seat matches among three players (enough for a leaderboard), and three
    three-seat ones, signed, as an export writes them."""
    signer = RecordSigner(Ed25519PrivateKey.generate())
    folder = tmp_path_factory.mktemp("records")
    records = []
    order = 100
    for i in range(36):
        a, b = NAMES[i % 3], NAMES[(i + 1) % 3]
        order += 3 + i % 4
        records.append(signer.sign(rated_record(i, (a, b), (i * 7) % 2, order)))
    for i in range(3):
        order += 2
        records.append(signer.sign(rated_record(100 + i, NAMES, i, order)))
    for r in records:
        (folder / f"{r['match_id']}.json").write_text(json.dumps(r, indent=2))
    return Signed(folder, signer.public_key, records)


def copied(signed: Signed, tmp_path: Path) -> Signed:
    folder = tmp_path / "records"
    folder.mkdir()
    for r in signed.records:
        (folder / f"{r['match_id']}.json").write_text(json.dumps(r))
    return replace(signed, folder=folder)


NO_KEYS = known_keys.KnownKeys(Path("/nonexistent/known_keys"), {})


class FakeServer:
    """GetPlayer, ListPlayerMatches and ListLeaderboard answered from the ratings and the
    histories given, a page at a time as the server pages them."""

    def __init__(
        self,
        ratings: dict[str, dict[str, Rating]],
        history: dict[tuple[str, str], list[tuple[str, int, Rating, Rating]]],
        names: dict[str, str],
    ) -> None:
        self.ratings = ratings
        self.history = history
        self.names = names
        self.board: dict[str, list[str]] = {pool: leaderboard(ratings[pool]) for pool in POOLS}

    def _player(self, player_id: str) -> pb.Player:
        return pb.Player(player_id=player_id, name=self.names[player_id], bot=False)

    def GetPlayer(self, request: pb.GetPlayerRequest, timeout: float) -> pb.GetPlayerResponse:
        return pb.GetPlayerResponse(
            player=self._player(request.player_id),
            ratings=[
                pool_rating_out(pool, self.ratings[pool].get(request.player_id, NEWCOMER))
                for pool in POOLS
            ],
        )

    def ListPlayerMatches(
        self, request: pb.ListPlayerMatchesRequest, timeout: float
    ) -> pb.ListPlayerMatchesResponse:
        pool = RATING_POOL.into(request.pool)
        newest_first = list(reversed(self.history.get((request.player_id, pool), [])))
        start = int(request.page_token or 0)
        page = newest_first[start : start + request.page_size]
        after = start + request.page_size
        return pb.ListPlayerMatchesResponse(
            player=self._player(request.player_id),
            matches=[
                pb.PlayerMatch(
                    match_id=match_id,
                    pool=request.pool,
                    order=order,
                    before=pool_rating_out(pool, before),
                    after=pool_rating_out(pool, after_),
                )
                for match_id, order, before, after_ in page
            ],
            next_page_token=str(after) if after < len(newest_first) else "",
        )

    def ListLeaderboard(
        self, request: pb.ListLeaderboardRequest, timeout: float
    ) -> pb.ListLeaderboardResponse:
        pool = RATING_POOL.into(request.pool)
        board = self.board[pool]
        start = int(request.page_token or 0)
        after = start + request.page_size
        return pb.ListLeaderboardResponse(
            entries=[
                pb.LeaderboardEntry(
                    rank=start + i + 1,
                    player=self._player(p),
                    rating=pool_rating_out(pool, self.ratings[pool][p]),
                )
                for i, p in enumerate(board[start:after])
            ],
            next_page_token=str(after) if after < len(board) else "",
        )


def honest(folder: Folder, rec: Recomputed) -> FakeServer:
    """A server showing what the records give."""
    history = {
        key: [(s.match_id, s.order, s.before, s.after) for s in steps]
        for key, steps in rec.steps.items()
    }
    ratings = {pool: dict(r) for pool, r in rec.ratings.items()}
    return FakeServer(ratings, history, dict(folder.names))


def checked(signed: Signed) -> tuple[Folder, Recomputed]:
    folder = read_folder(signed.folder, signed.key, NO_KEYS)
    return folder, recomputed(folder.rated)


def test_a_folder_of_signed_records_gives_the_ratings_of_the_domain(signed: Signed) -> None:
    folder, rec = checked(signed)
    assert folder.problems == [] and folder.untrusted == []
    assert len(folder.proven) == len(folder.rated) == 39
    assert folder.players() == [IDS[n] for n in NAMES]
    # In the order of the records' rated.order, whatever the order of the files.
    orders = [p.order for p in folder.rated]
    assert orders == sorted(orders)
    ann = rec.steps[(IDS["Ann"], "2")]
    assert len(ann) == 24 and ann[0].before == NEWCOMER
    assert all(a.after == b.before for a, b in itertools.pairwise(ann))
    assert rec.of(IDS["Ann"], "2") == ann[-1].after
    assert leaderboard(rec.ratings["2"])  # the three are past provisional
    assert rec.of(IDS["Ann"], "4") == NEWCOMER


def test_a_server_that_shows_what_the_records_give_agrees(signed: Signed) -> None:
    folder, rec = checked(signed)
    assert compare(honest(folder, rec), "here", folder, rec) == []


def test_a_rating_changed_on_the_server_is_named_with_its_player_and_pool(
    signed: Signed,
) -> None:
    folder, rec = checked(signed)
    server = honest(folder, rec)
    bob = IDS["Bob"]
    was = server.ratings["2"][bob]
    server.ratings["2"][bob] = Rating(was.mu + 1e-6, was.sigma, was.matches)
    problems = compare(server, "here", folder, rec)
    player = [p for p in problems if p.kind == "player"]
    assert len(player) == 1
    (p,) = player
    assert (p.facts["player_id"], p.facts["pool"]) == (bob, "2")
    assert p.line.startswith(f"DIFFERS: player Bob ({bob}), pool 2: the server shows")
    assert repr(was.mu + 1e-6) in p.line and repr(was.mu) in p.line
    assert "every rated match of its history agrees" in p.line
    # The leaderboard shows the same rating: its rank is named too.
    board = [p for p in problems if p.kind == "leaderboard"]
    assert board and all(b.facts["pool"] == "2" for b in board)


def test_within_a_billionth_two_ratings_agree() -> None:
    r = Rating(27.5, 5.25, 14)
    assert agrees(pool_rating_out("2", Rating(27.5 + 5e-10, 5.25 - 5e-10, 14)), r)
    assert not agrees(pool_rating_out("2", Rating(27.5 + 2e-9, 5.25, 14)), r)
    assert not agrees(pool_rating_out("2", Rating(27.5, 5.25, 15)), r)


def test_the_first_match_after_which_the_history_parts_is_named(signed: Signed) -> None:
    folder, rec = checked(signed)
    server = honest(folder, rec)
    cy = IDS["Cy"]
    steps = server.history[(cy, "2")]
    k = 9
    match_id, order, before, after = steps[k]
    wrong = Rating(after.mu - 0.5, after.sigma, after.matches)
    steps[k] = (match_id, order, before, wrong)
    server.ratings["2"][cy] = Rating(22.0, 5.0, len(steps))
    problems = [p for p in compare(server, "here", folder, rec) if p.kind == "player"]
    assert len(problems) == 1
    line = problems[0].line
    assert f"after match {match_id} (order {order}) the server has" in line
    assert repr(wrong.mu) in line and repr(after.mu) in line
    assert problems[0].facts["first"]["match_id"] == match_id


def test_a_match_only_the_server_rates_and_one_it_does_not_are_named(signed: Signed) -> None:
    _, rec = checked(signed)
    steps = rec.steps[(IDS["Ann"], "2")]
    extra = ("extra-match", steps[3].order + 1, steps[3].after, steps[3].after)
    served = [(s.match_id, s.order, s.before, s.after) for s in steps]
    with_extra = [*served[:4], extra, *served[4:]]
    assert first_disagreement(_messages(with_extra), steps) == (
        f"match extra-match (order {extra[1]}) is rated by the server, and in no record here: "
        f"after it the server has {_words(extra[3])}",
        {"match_id": "extra-match", "order": extra[1], "in": "server"},
    )
    missing = [*served[:4], *served[5:]]
    text, facts = first_disagreement(_messages(missing), steps) or ("", {})
    assert text.startswith(f"match {steps[4].match_id} (order {steps[4].order}) is rated by its")
    assert facts["in"] == "records"
    assert first_disagreement(_messages(served), steps) is None


def _messages(rows: list[tuple[str, int, Rating, Rating]]) -> list[pb.PlayerMatch]:
    return [
        pb.PlayerMatch(
            match_id=m, order=o, before=pool_rating_out("2", b), after=pool_rating_out("2", a)
        )
        for m, o, b, a in rows
    ]


def _words(r: Rating) -> str:
    return (
        f"{r.display}{'?' if r.provisional else ''} (mu {r.mu!r}, sigma {r.sigma!r}, "
        f"{r.matches} rated matches)"
    )


def test_a_leaderboard_in_another_order_is_named_at_its_first_wrong_rank(
    signed: Signed,
) -> None:
    folder, rec = checked(signed)
    server = honest(folder, rec)
    board = server.board["2"]
    board[0], board[1] = board[1], board[0]
    problems = compare(server, "here", folder, rec)
    assert [p.kind for p in problems] == ["leaderboard"]
    (p,) = problems
    first, second = leaderboard(rec.ratings["2"])[:2]
    assert p.facts == {"pool": "2", "rank": 1, "server": second, "records": first}
    assert p.line.startswith(
        f"DIFFERS: leaderboard of pool 2, rank 1: the server has {folder.name(second)} "
    )


def test_a_player_the_server_does_not_know_is_named(signed: Signed) -> None:
    folder, rec = checked(signed)
    server = honest(folder, rec)
    ann = IDS["Ann"]

    class Forgetful(FakeServer):
        def GetPlayer(self, request: pb.GetPlayerRequest, timeout: float) -> Any:
            if request.player_id == ann:
                raise FailedCall(grpc.StatusCode.NOT_FOUND, "no such player")
            return super().GetPlayer(request, timeout)

    forgetful = Forgetful(server.ratings, server.history, server.names)
    problems = [p for p in compare(forgetful, "here", folder, rec) if p.kind == "player"]
    assert [p.facts["player_id"] for p in problems] == [ann]
    assert "the server has no such player" in problems[0].line


def test_a_record_changed_after_signing_is_named_and_left_out(
    signed: Signed, tmp_path: Path
) -> None:
    mine = copied(signed, tmp_path)
    first, second = mine.records[0], mine.records[1]
    swapped = copy.deepcopy(first)
    swapped["seats"][0]["player"], swapped["seats"][1]["player"] = (
        swapped["seats"][1]["player"],
        swapped["seats"][0]["player"],
    )
    mine.path(first).write_text(json.dumps(swapped))
    scored = copy.deepcopy(second)
    scored["result"]["scores"] = list(reversed(scored["result"]["scores"]))
    mine.path(second).write_text(json.dumps(scored))
    folder, _ = checked(mine)
    lines = {p.facts["file"]: p.line for p in folder.problems}
    assert lines[str(mine.path(first))] == (
        f"REJECTED: {mine.path(first)}: signature: the signature does not match the record"
    )
    changed = lines[str(mine.path(second))]
    assert changed.startswith(f"REJECTED: {mine.path(second)}: result: ")
    assert changed.endswith("its signature fails too: the signature does not match the record")
    assert len(folder.proven) == len(mine.records) - 2


def test_records_signed_by_another_key_are_rejected_or_untrusted(
    signed: Signed, tmp_path: Path
) -> None:
    other = RecordSigner(Ed25519PrivateKey.generate()).public_key
    folder = read_folder(signed.folder, other, NO_KEYS)
    assert len(folder.problems) == len(signed.records)
    assert all("signed by another key than the one given" in p.line for p in folder.problems)
    # Offline without a key: any key known vouches; none known, each is untrusted.
    folder = read_folder(signed.folder, None, NO_KEYS)
    assert folder.problems == [] and len(folder.untrusted) == len(signed.records)
    known = known_keys.KnownKeys(tmp_path / "known_keys", {"127.0.0.1:1": signed.key})
    folder = read_folder(signed.folder, None, known)
    assert folder.problems == [] and folder.untrusted == []


def test_a_copy_counts_once_and_a_missing_listed_file_is_named(
    signed: Signed, tmp_path: Path
) -> None:
    mine = copied(signed, tmp_path)
    first = mine.records[0]
    (mine.folder / "copy.json").write_text(json.dumps(first))
    gone = mine.path(mine.records[1])
    gone.unlink()
    manifest = {
        "format": "bergen-export/1",
        "matches": [
            {"match_id": r["match_id"], "file": f"{r['match_id']}.json"} for r in mine.records
        ],
    }
    (mine.folder / "manifest.json").write_text(json.dumps(manifest))
    folder, _ = checked(mine)
    assert [p.line for p in folder.problems] == [
        f"REJECTED: {gone}: missing: the manifest lists it"
    ]
    assert len(folder.proven) == len(mine.records) - 1
