"""A slot file: two slots written in place in turns, each with a sequence number and a
checksum, one sync a write. What was written last is read back; a slot torn or corrupt by a
crash is passed over for the other, the record before; both torn is an error, never an empty
file; the sync comes after the slot's bytes and before the write returns."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bergen.api.durable import SLOT_BYTES, Folder, NoValidSlot, SlotFile

TAG = b"test-slot/1\n"


def written(path: Path, *payloads: bytes) -> None:
    with SlotFile(path, TAG) as slots:
        slots.read()
        for payload in payloads:
            slots.write(payload)


def read(path: Path) -> bytes | None:
    with SlotFile(path, TAG) as slots:
        return slots.read()


def slot_holding(path: Path, payload: bytes) -> int:
    data = path.read_bytes()
    found = [i for i in (0, 1) if payload in data[i * SLOT_BYTES : (i + 1) * SLOT_BYTES]]
    assert len(found) == 1, found
    return found[0]


def damage(path: Path, offset: int, new: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(new)


def flip(path: Path, offset: int) -> None:
    """One bit of the byte at `offset` changed."""
    damage(path, offset, bytes([path.read_bytes()[offset] ^ 0x01]))


def test_a_record_written_is_read_back_by_another_process(tmp_path: Path) -> None:
    path = tmp_path / "state"
    assert read(path) is None
    written(path, b"first")
    assert read(path) == b"first"
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.stat().st_size == 2 * SLOT_BYTES  # every block made at once
    assert [p.name for p in tmp_path.iterdir()] == ["state"]  # no temporary file left
    written(path, b"second", b"third")
    assert read(path) == b"third"


def test_writes_alternate_between_the_slots_and_keep_the_one_before(tmp_path: Path) -> None:
    path = tmp_path / "state"
    records = [f"record {n}".encode() for n in range(5)]
    holders = []
    for n, record in enumerate(records):
        written(path, record)  # a new process each time: the slot to write is read from disk
        holders.append(slot_holding(path, record))
        if n > 0:
            assert slot_holding(path, records[n - 1]) == 1 - holders[-1]
    assert holders == [0, 1, 0, 1, 0]


@pytest.mark.parametrize(
    "torn",
    [
        "cut",  # the file ends inside the newest slot
        "flipped",  # one bit of its payload changed
        "half written",  # a write that reached the disk in part over the record before it
        "header only",  # its tag, checksum and sequence number, not its payload
    ],
)
def test_a_torn_slot_is_passed_over_for_the_other(tmp_path: Path, torn: str) -> None:
    path = tmp_path / "state"
    written(path, b"older " * 40, b"newer " * 40)
    newest = slot_holding(path, b"newer " * 40)
    start = newest * SLOT_BYTES
    if torn == "cut":
        os.truncate(path, start + 100)
    elif torn == "flipped":
        flip(path, start + 150)
    elif torn == "half written":
        # The next write, over "older", reaches the disk for its first 200 bytes only.
        newest, start = 1 - newest, (1 - newest) * SLOT_BYTES
        old = path.read_bytes()[start : start + 400]
        written(path, b"newest " * 40)
        damage(path, start + 200, old[200:])
    else:
        damage(path, start + 80, bytes(200))
    expected = b"newer " * 40 if torn == "half written" else b"older " * 40
    assert read(path) == expected
    # The next write goes to the torn slot: the only good one is never written over.
    written(path, b"after")
    assert read(path) == b"after"
    assert slot_holding(path, b"after") == newest
    assert slot_holding(path, expected) == 1 - newest


def test_both_slots_torn_is_an_error_and_nothing_is_written_over_them(tmp_path: Path) -> None:
    path = tmp_path / "state"
    written(path, b"one", b"two")
    flip(path, 20)  # in each slot's checksum
    flip(path, SLOT_BYTES + 20)
    before = path.read_bytes()
    with pytest.raises(NoValidSlot, match="neither of its two slots"):
        read(path)
    with SlotFile(path, TAG) as slots, pytest.raises(NoValidSlot):
        slots.write(b"fresh")  # not taken for a file never written
    assert path.read_bytes() == before


def test_a_file_of_another_tag_is_not_read_as_this_one(tmp_path: Path) -> None:
    path = tmp_path / "state"
    written(path, b"one")
    with SlotFile(path, b"other-slot/1\n") as slots, pytest.raises(NoValidSlot):
        slots.read()


def test_the_sync_comes_after_the_slots_bytes_and_before_the_write_returns(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state"
    written(path, b"first")
    seen: list[bytes | None] = []

    def sync(fd: int) -> None:
        seen.append(read(path))  # what another reader finds as the sync starts

    with SlotFile(path, TAG, sync) as slots:
        slots.read()
        slots.write(b"second")
        assert seen == [b"second"]  # one sync, after the write
        slots.write(b"third")
    assert seen == [b"second", b"third"]


def test_a_write_whose_sync_failed_is_made_again_in_the_same_slot(tmp_path: Path) -> None:
    path = tmp_path / "state"
    written(path, b"kept", b"newest")
    failures = [OSError(5, "Input/output error")]

    def sync(fd: int) -> None:
        if failures:
            raise failures.pop()

    with SlotFile(path, TAG, sync) as slots:
        slots.read()
        with pytest.raises(OSError):
            slots.write(b"not known on disk")
        slots.write(b"again")
    # "newest" was not written over: the failed write's slot took the next one.
    assert read(path) == b"again"
    assert slot_holding(path, b"newest") == 1 - slot_holding(path, b"again")


def test_a_record_larger_than_a_slot_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state"
    with SlotFile(path, TAG) as slots:
        with pytest.raises(ValueError, match="do not fit"):
            slots.write(bytes(slots.capacity + 1))
        slots.write(bytes(slots.capacity))
    assert read(path) == bytes(SLOT_BYTES - (len(TAG) + 32 + 12))


def test_a_folders_file_is_replaced_whole_owner_only_with_nothing_left_beside_it(
    tmp_path: Path,
) -> None:
    folder = Folder(tmp_path)
    try:
        folder.replace_whole("a.json", b"first")
        folder.replace_whole("a.json", b"second")
        folder.replace_whole("b.json", b"")
    finally:
        folder.close()
    assert (tmp_path / "a.json").read_bytes() == b"second"
    assert (tmp_path / "b.json").read_bytes() == b""
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.json"]


def test_a_folders_file_not_written_leaves_the_old_one_and_no_other(tmp_path: Path) -> None:
    folder = Folder(tmp_path)
    try:
        folder.replace_whole("a.json", b"old")
        with pytest.raises(OSError):
            folder.replace_whole("no/such/place.json", b"new")
        (tmp_path / "d").mkdir()
        (tmp_path / "d" / "x").write_bytes(b"")
        with pytest.raises(IsADirectoryError):
            folder.replace_whole("d", b"new")  # a folder cannot be replaced by a file
    finally:
        folder.close()
    assert (tmp_path / "a.json").read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "d"]
