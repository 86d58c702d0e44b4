"""An audit pack's checkpoints, checked offline by `bergen verify DIR`: the tournament record's
and every match record's checkpoint signed by the pack's key and its last event proved in it,
and the records held against each other as records of one log (one root for one size, one
event for one leaf, the leaves in the global order). Each fault is rejected (6) at its file.

The records' last events are put in a tree made here, as the server's log would hold them:
each record's checkpoint is of the tree that ends with its last event."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import pytest

from bergen.api.audit_pack import TOURNAMENT_FILE, match_path
from bergen.api.checkpoints import Checkpoint, event_leaf, log_origin, transparency_field
from bergen.api.exit_status import ExitStatus
from bergen.domain.merkle import Frontier, Node, inclusion_proof, leaf_hash, root
from bergen.domain.tournament_record import tournament_stream

from .test_tournament_pack import KEY, OTHER_KEY, Pack, assert_rejected, simulated, verified

RECORDED_US = 1_780_000_000_000_000
FILLER = 3
"""Other events of the log between two records' last events."""


@dataclass
class Tree:
    """A log's tree, a leaf at a time, and its checkpoints signed by `signer`."""

    signer: Any = KEY
    frontier: Frontier = field(default_factory=Frontier)
    known: dict[Node, bytes] = field(default_factory=dict)

    def nodes(self, wanted: list[Node]) -> dict[Node, bytes]:
        return {n: self.known[n] for n in wanted}

    def append(self, leaf: bytes) -> int:
        index = self.frontier.size
        for level, i, h in self.frontier.append(leaf):
            self.known[(level, i)] = h
        return index

    def fill(self, n: int, salt: str) -> None:
        for _ in range(n):
            self.append(leaf_hash(f"{salt}event {self.frontier.size}".encode()))

    def note(self, size: int) -> str:
        origin = log_origin(self.signer.public_key)
        return str(self.signer.sign_note(Checkpoint(origin, size, root(self, size)).text(), origin))


@dataclass
class Last:
    """A record's last event, as its leaf."""

    path: str
    stream: str
    events: int
    head: bytes
    position: int
    index: int = 0

    def leaf(self) -> bytes:
        return event_leaf(self.stream, self.events, self.position, RECORDED_US, self.head)


def stream_of(path: str, record: dict[str, Any]) -> str:
    if path == TOURNAMENT_FILE:
        return tournament_stream(record["tournament_id"])
    return str(record["match_id"])


def logged(pack: Pack) -> tuple[Pack, dict[str, Last]]:
    """`pack` with every record's `log` and `transparency`, each re-signed: the matches' last
    events in round and table order, then the tournament's, other events between them."""
    pack = pack.copy()
    tree = Tree()
    paths = [match_path(t["match_id"]) for r in pack.tournament["rounds"] for t in r["tables"]] + [
        TOURNAMENT_FILE
    ]
    lasts: dict[str, Last] = {}
    for i, path in enumerate(paths):
        tree.fill(FILLER, "")
        last = Last(
            path,
            stream_of(path, pack.files[path]),
            40 + i,
            hashlib.sha256(path.encode()).digest(),
            100 * (i + 1),
        )
        last.index = tree.append(last.leaf())
        lasts[path] = last
    for last in lasts.values():
        prove(pack, last, tree, last.index + 1)
    return pack, lasts


def prove(pack: Pack, last: Last, tree: Tree, size: int) -> None:
    """Give the record of `last` the checkpoint of `tree` at `size` and its leaf's proof."""
    record = pack.files[last.path]
    record["log"] = {"events": last.events, "head": last.head.hex()}
    proof = inclusion_proof(tree, last.index, size)
    record["transparency"] = transparency_field(
        tree.note(size), last.index, size, last.position, RECORDED_US, proof
    )
    pack.files[last.path] = KEY.sign(record)


def forked(pack: Pack, last: Last, index: int, size: int, signer: Any = KEY) -> None:
    """Prove `last`'s record in another tree of `size` leaves holding its last event at
    `index` (and other events elsewhere), signed by `signer`: each such record checks on
    its own."""
    tree = Tree(signer)
    tree.fill(index, "forked ")
    last.index = tree.append(last.leaf())
    tree.fill(size - index - 1, "forked ")
    prove(pack, last, tree, size)


@pytest.fixture(scope="module")
def pack() -> Pack:
    return simulated("swiss at 2 seats")


def match_paths(lasts: dict[str, Last]) -> list[str]:
    """The match records' paths in the order the pack's check takes them."""
    return [p for p in lasts if p != TOURNAMENT_FILE]


def test_a_pack_whose_records_carry_checkpoints_verifies_and_says_so(pack, tmp_path):
    honest, lasts = logged(pack)
    outcome = verified(honest.write(tmp_path / "pack"))
    assert outcome.status == ExitStatus.SUCCESS, outcome.line
    biggest = lasts[TOURNAMENT_FILE].index + 1
    assert (
        f"every record logged in the transparency log (checkpoints of up to {biggest} events)"
        in outcome.line
    )
    assert outcome.facts["logged"] == len(lasts)
    assert outcome.facts["checkpoint_size"] == biggest


def test_a_tournament_record_whose_proof_does_not_lead_to_its_checkpoint_is_rejected(
    pack, tmp_path
):
    bad, _ = logged(pack)
    record = bad.tournament
    record["log"]["head"] = "00" * 32  # another last event than the one proved
    bad.files[TOURNAMENT_FILE] = KEY.sign(record)
    outcome = verified(bad.write(tmp_path / "pack"))
    assert_rejected(outcome, f"{TOURNAMENT_FILE}, transparency")
    assert "is not in the checkpoint's tree" in outcome.line


def test_a_match_record_whose_proof_does_not_lead_to_its_checkpoint_is_rejected(pack, tmp_path):
    bad, lasts = logged(pack)
    path = match_paths(lasts)[2]
    record = bad.files[path]
    record["transparency"]["proof"][0] = record["transparency"]["proof"][1]
    bad.files[path] = KEY.sign(record)
    outcome = verified(bad.write(tmp_path / "pack"))
    assert_rejected(outcome, path)
    assert outcome.facts["where"].endswith(", transparency"), outcome.line
    assert "is not in the checkpoint's tree" in outcome.line


def test_a_checkpoint_signed_by_another_key_than_the_packs_is_rejected(pack, tmp_path):
    bad, lasts = logged(pack)
    last = lasts[match_paths(lasts)[0]]
    forked(bad, last, last.index, last.index + 1, OTHER_KEY)
    outcome = verified(bad.write(tmp_path / "pack"))
    assert_rejected(outcome, last.path)
    assert outcome.facts["where"].endswith(", transparency"), outcome.line


def test_two_checkpoints_of_one_size_with_different_roots_are_rejected(pack, tmp_path):
    # Each record checks on its own, but the two come from two histories of the log.
    bad, lasts = logged(pack)
    size = lasts[TOURNAMENT_FILE].index + 1
    last = lasts[match_paths(lasts)[1]]
    forked(bad, last, last.index, size)
    outcome = verified(bad.write(tmp_path / "pack"))
    assert outcome.status == ExitStatus.INVALID, outcome.line
    assert_rejected(outcome, f"{last.path}")
    assert f"its checkpoint of {size} events has another root than the one" in outcome.line
    assert TOURNAMENT_FILE in outcome.facts["why"]


def test_two_last_events_at_one_leaf_are_rejected(pack, tmp_path):
    bad, lasts = logged(pack)
    first, second = (lasts[p] for p in match_paths(lasts)[:2])
    forked(bad, second, first.index, first.index + 2)  # a size no other checkpoint has
    outcome = verified(bad.write(tmp_path / "pack"))
    assert_rejected(outcome, second.path)
    assert f"its last event is leaf {first.index} of the log, which {first.path}" in (outcome.line)


def test_leaves_in_another_order_than_the_positions_verify(pack, tmp_path):
    # The global order is by committing transaction, then position: a transaction that took
    # its position first may commit after another, and its event be logged after it.
    honest, lasts = logged(pack)
    first, second = (lasts[p] for p in match_paths(lasts)[:2])
    first.position, second.position = second.position, first.position
    tree = Tree()
    for last in lasts.values():
        tree.fill(FILLER, "")
        last.index = tree.append(last.leaf())
    for last in lasts.values():
        prove(honest, last, tree, last.index + 1)
    assert first.index < second.index and first.position > second.position
    outcome = verified(honest.write(tmp_path / "pack"))
    assert outcome.status == ExitStatus.SUCCESS, outcome.line


def test_a_pack_without_checkpoints_still_verifies_without_saying_so(pack, tmp_path):
    # A server that keeps no transparency log: its records carry none.
    outcome = verified(pack.copy().write(tmp_path / "pack"))
    assert outcome.status == ExitStatus.SUCCESS, outcome.line
    assert "transparency" not in outcome.line and outcome.facts["logged"] == 0


def test_a_malformed_transparency_of_the_tournament_record_is_rejected(pack, tmp_path):
    bad, _ = logged(pack)
    record = bad.tournament
    del record["log"]
    bad.files[TOURNAMENT_FILE] = KEY.sign(record)
    outcome = verified(bad.write(tmp_path / "pack"))
    assert_rejected(outcome, f"{TOURNAMENT_FILE}, transparency")
    assert "needs the record's log" in outcome.line
