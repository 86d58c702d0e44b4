"""Small files kept through a crash: one replaced whole (the newest checkpoint a server
signed, an exported record), or one of two slots written in place in turns (a witness's
state, written at every check: one sync rather than a file's and its folder's)."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import itertools
import os
import secrets
import struct
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


def replace_whole(path: Path, data: bytes, sync: bool = True) -> None:
    """Replace `path` with `data` (owner-only), whole or not at all: written to a file of its
    own in the same folder (so processes writing the same path at once never mix their
    bytes), synced (unless not `sync`: a caller that writes many syncs them together), and
    renamed over `path`. A reader sees the old file or the new one. Raises OSError."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class Folder:
    """A folder held open, into which many files are replaced whole and unsynced (the
    caller syncs them together), each by its name: `replace_whole` without the folder's
    path looked up again for each file, nor a file object made around its bytes. Where
    names cannot be taken relative to a folder (`os.supports_dir_fd`), each file is
    `replace_whole`'s. Raises OSError."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._count = itertools.count()
        self._fd = (
            os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            if {os.open, os.rename, os.unlink} <= os.supports_dir_fd
            else None
        )

    def replace_whole(self, name: str, data: bytes) -> None:
        """Replace the file `name` in the folder with `data` (owner-only), whole or not at
        all: written to a file of its own beside it, then renamed over it. Raises OSError."""
        if self._fd is None:
            replace_whole(self.path / name, data, sync=False)
            return
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        # A name of this process's own (its id and a count), another at random should a
        # file of that name be left there.
        tmp = f".{name}.{os.getpid()}-{next(self._count)}"
        for _ in range(100):
            try:
                fd = os.open(tmp, flags, 0o600, dir_fd=self._fd)
                break
            except FileExistsError:
                tmp = f".{name}.{secrets.token_hex(8)}"
        else:
            raise FileExistsError(errno.EEXIST, "no free temporary name", str(self.path / name))
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.rename(tmp, name, src_dir_fd=self._fd, dst_dir_fd=self._fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=self._fd)
            raise

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def write_durably(path: Path, text: str) -> None:
    """`replace_whole` with `text`, and on disk before this returns: the folder is synced
    too, so that the rename is kept through a crash. Raises OSError."""
    replace_whole(path, text.encode("utf-8"))
    sync_folder(path.parent)


SLOT_BYTES = 1 << 18
"""The size of each of a SlotFile's two slots: a multiple of any disk's sector and of the
page size, so that writing one slot never rewrites a block of the other."""

_SEQ = struct.Struct(">QI")  # a record's sequence number and its payload's length


def _data_sync(fd: int) -> None:
    # fdatasync skips the file's times, which a slot file's reader does not need; where
    # there is none (macOS), fsync.
    if hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:
        os.fsync(fd)


class NoValidSlot(Exception):
    """A slot file whose two slots are both torn or corrupt: what it kept is lost, and starting
    afresh could forget a promise made on it."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path}: neither of its two slots holds a valid record (torn or corrupt)")
        self.path = path


@dataclass(frozen=True, slots=True)
class _Slot:
    index: int
    seq: int
    payload: bytes


class SlotFile:
    """A small record kept through a crash at the cost of one write and one sync: a file of two
    fixed slots (`SLOT_BYTES` each, made once, owner-only, its folder synced), written in
    place in turns. Each write goes to the slot that does not hold the newest record, with a
    sequence number one above it and a SHA-256 over the slot, then the file is synced
    (`sync`, fdatasync by default: the file's size and blocks never change after it is made).
    A write torn by a crash leaves a slot whose checksum fails, and the other slot's record,
    the one before, is read instead.

    A slot: `tag`, SHA-256 of the rest, the sequence number (8 bytes), the payload's length
    (4 bytes), the payload; all big-endian. `tag` names what the file holds."""

    def __init__(self, path: Path, tag: bytes, sync: Callable[[int], None] | None = None) -> None:
        self.path = path
        self._tag = tag
        self._sync: Callable[[int], None] = sync or _data_sync
        self._fd: int | None = None
        self._newest: _Slot | None = None
        self._head = len(tag) + hashlib.sha256().digest_size + _SEQ.size

    @property
    def capacity(self) -> int:
        """The largest payload a slot holds."""
        return SLOT_BYTES - self._head

    def read(self) -> bytes | None:
        """The newest valid record's payload; None when there is no file. Raises NoValidSlot
        when there is a file but neither slot is valid, OSError."""
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
            except FileNotFoundError:
                return None
        slots = [s for s in (self._read_slot(i) for i in (0, 1)) if s is not None]
        if not slots:
            raise NoValidSlot(self.path)
        self._newest = max(slots, key=lambda s: (s.seq, -s.index))
        return self._newest.payload

    def write(self, payload: bytes) -> None:
        """Keep `payload` as the newest record, on disk before this returns. Raises ValueError
        for a payload larger than `capacity`, NoValidSlot (the file's record is not known, so
        nothing is written over it), OSError."""
        if len(payload) > self.capacity:
            raise ValueError(f"{len(payload)} bytes do not fit a slot of {self.path}")
        if self._fd is None and self.read() is None:
            self._create(payload)
            return
        assert self._fd is not None
        newest = self._newest
        if newest is None:  # the file was read, and failed: both slots torn
            raise NoValidSlot(self.path)
        slot = _Slot(1 - newest.index, newest.seq + 1, payload)
        data = self._encode(slot)
        if os.pwrite(self._fd, data, slot.index * SLOT_BYTES) != len(data):
            raise OSError(errno.EIO, f"a short write to {self.path}")
        self._sync(self._fd)
        self._newest = slot  # only once on disk: a failed write is retried in the same slot

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> SlotFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _encode(self, slot: _Slot) -> bytes:
        body = _SEQ.pack(slot.seq, len(slot.payload)) + slot.payload
        return self._tag + hashlib.sha256(self._tag + body).digest() + body

    def _read_slot(self, index: int) -> _Slot | None:
        """Slot `index`, None when torn or corrupt. Raises OSError."""
        assert self._fd is not None
        data = os.pread(self._fd, SLOT_BYTES, index * SLOT_BYTES)
        tag, digest = data[: len(self._tag)], data[len(self._tag) : self._head - _SEQ.size]
        if len(data) < self._head or tag != self._tag:
            return None
        seq, length = _SEQ.unpack_from(data, self._head - _SEQ.size)
        body = data[self._head - _SEQ.size : self._head + length]
        if self._head + length > len(data) or hashlib.sha256(tag + body).digest() != digest:
            return None
        return _Slot(index, seq, data[self._head : self._head + length])

    def _create(self, payload: bytes) -> None:
        """The file made with `payload` in its first slot and the second one empty, whole or
        not at all (a file of its own, synced, linked in, the folder synced): a file of this
        name always holds a valid record. Raises OSError."""
        first = self._encode(_Slot(0, 1, payload))
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        try:
            # Every block written now, so that a later write changes no metadata and
            # fdatasync has only the slot's own blocks to write.
            os.write(fd, first + bytes(2 * SLOT_BYTES - len(first)))
            os.fsync(fd)
            os.link(tmp, self.path)  # never over a file made meanwhile (FileExistsError)
        except BaseException:
            os.close(fd)
            raise
        finally:
            Path(tmp).unlink(missing_ok=True)
        self._fd = fd
        self._newest = _Slot(0, 1, payload)
        sync_folder(self.path.parent)


def sync_folder(folder: Path) -> None:
    """Sync `folder`, so that a file made or renamed in it is kept through a crash. Raises
    OSError."""
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
