"""`bergen witness` against a real server: it cosigns the growing log and serves the cosigned
checkpoint, a restart goes on from its state, SIGTERM stops it with 0, and a log that comes
back smaller under the same key stops it with exit status 9 and both checkpoints."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc

from bergen.api.checkpoints import (
    COSIGNATURE_V1,
    Checkpoint,
    log_origin,
    parse_verifier_key,
    verify_checkpoint,
    verify_cosignature,
)
from bergen.api.exit_status import ExitStatus
from bergen.v1 import bergen_pb2 as pb

from .client import Client, play_to_end, seat_everyone
from .servers import ServerFarm, ServerProcess, bergen_command

DEADLINE_S = 30.0


def until(check: Callable[[], bool], what: str, log: Callable[[], str] = str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        assert time.monotonic() < deadline, f"not within {DEADLINE_S} s: {what}\n{log()}"
        time.sleep(0.05)


def environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("BERGEN_")}


@dataclass
class WitnessProcess:
    proc: subprocess.Popen[bytes]
    out: Path
    err: Path

    def output(self) -> str:
        return self.out.read_text() + self.err.read_text()

    def line(self, prefix: str) -> str | None:
        for line in self.out.read_text().splitlines():
            if line.startswith(prefix):
                return line[len(prefix) :]
        return None

    def wait_line(self, prefix: str) -> str:
        found: list[str] = []

        def printed() -> bool:
            assert self.proc.poll() is None, f"the witness exited:\n{self.output()}"
            line = self.line(prefix)
            found.extend([] if line is None else [line])
            return bool(found)

        until(printed, f"the witness prints {prefix!r}", self.output)
        return found[0]


@contextmanager
def witness(server: ServerProcess, state: Path, tag: str) -> Iterator[WitnessProcess]:
    out, err = state.parent / f"{tag}.out", state.parent / f"{tag}.err"
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen(
            [
                *bergen_command(),
                "witness",
                "--server",
                server.target,
                "--state",
                str(state),
                "--listen",
                "127.0.0.1:0",
                "--interval",
                "0.2",
            ],
            stdout=o,
            stderr=e,
            env=environment(),
            stdin=subprocess.DEVNULL,
        )
    running = WitnessProcess(proc, out, err)
    try:
        yield running
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def once(server: ServerProcess, state: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*bergen_command(), "witness", "--server", server.target, "--state", str(state), "--once"],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment(),
        stdin=subprocess.DEVNULL,
    )


def served(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            text: str = reply.read().decode()
            return text
    except urllib.error.HTTPError as e:
        assert e.code == 503  # nothing verified yet
        return None


def newest_size(client: Client) -> int:
    return int(client.stub.GetCheckpoint(pb.GetCheckpointRequest()).tree_size)


def play_a_match(client: Client, seed: int, record: Path | None = None) -> int:
    """Play a match to its end; the size of a checkpoint that covers its last event (on
    PostgreSQL an event joins the tree once older transactions of the cluster end)."""
    table = seat_everyone(client, 2)
    play_to_end([client], random.Random(seed), table)
    if record is not None:
        reply = client.stub.GetRecord(pb.GetRecordRequest(match_id=table.match_id))
        record.write_text(reply.record_json)
    events = client.stub.GetAuditLog(pb.GetAuditLogRequest(match_id=table.match_id)).events
    request = pb.GetInclusionProofRequest(position=events[-1].position)
    sizes: list[int] = []

    def proved() -> bool:
        try:
            sizes.append(int(client.stub.GetInclusionProof(request).tree_size))
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.NOT_FOUND, e
        return bool(sizes)

    until(proved, "the match's last event in the log")
    return sizes[0]


def check_cosigned(note: str, log_key: str, vkey: str) -> Checkpoint:
    name, public = parse_verifier_key(vkey, COSIGNATURE_V1)
    assert verify_cosignature(note, name, public) > 0
    return verify_checkpoint(note, log_origin(log_key), bytes.fromhex(log_key))


def test_a_witness_cosigns_a_growing_log_and_resumes_after_a_restart(
    farm: ServerFarm, database: str, tmp_path: Path
) -> None:
    server = farm.start(database)
    state = tmp_path / "witness"
    with Client(server.target) as client:
        log_key = client.stub.GetServerInfo(pb.GetServerInfoRequest()).public_key
        with witness(server, state, "first") as first:
            assert first.wait_line("bergen witness: trusting the server's key ").startswith(log_key)
            vkey = first.wait_line("bergen witness: verifier key ")
            url = first.wait_line("bergen witness: serving ")
            size = play_a_match(client, 1)
            notes: list[str] = []

            def cosigned_past(size: int) -> Callable[[], bool]:
                def check() -> bool:
                    note = served(url)
                    notes.extend([] if note is None else [note])
                    return note is not None and check_cosigned(note, log_key, vkey).size >= size

                return check

            until(cosigned_past(size), f"a checkpoint of {size} cosigned", first.output)
            first.proc.send_signal(signal.SIGTERM)
            assert first.proc.wait(timeout=DEADLINE_S) == ExitStatus.SUCCESS, first.output()
            kept = check_cosigned(notes[-1], log_key, vkey).size

        with witness(server, state, "second") as second:
            assert second.wait_line("bergen witness: verifier key ") == vkey
            assert second.line("bergen witness: trusting") is None  # the key is kept
            url = second.wait_line("bergen witness: serving ")
            note = served(url)  # the one kept, before the first poll or after
            assert note is not None and check_cosigned(note, log_key, vkey).size >= kept
            size = play_a_match(client, 2)
            until(cosigned_past(size), f"a checkpoint of {size} cosigned", second.output)
            assert size > kept
            second.proc.send_signal(signal.SIGTERM)
            assert second.proc.wait(timeout=DEADLINE_S) == ExitStatus.SUCCESS, second.output()
        assert "Traceback" not in second.output()


def test_a_log_that_comes_back_smaller_stops_the_witness_with_both_checkpoints(
    farm: ServerFarm, tmp_path: Path
) -> None:
    # Two databases, one signing key (the farm's): the second is the log as it would be
    # after a restore from an old backup, or a fork shown to someone else.
    first = farm.start(f"sqlite:///{tmp_path / 'first.db'}")
    state = tmp_path / "witness"
    with Client(first.target) as client:
        size = play_a_match(client, 3)
        until(lambda: newest_size(client) >= size, "the match's checkpoint")
    done = once(first, state)
    assert done.returncode == ExitStatus.SUCCESS, done.stderr
    verified = done.stdout
    assert int(verified.splitlines()[1]) >= size
    first.terminate()

    second = farm.start(f"sqlite:///{tmp_path / 'second.db'}")
    with Client(second.target) as client:
        assert newest_size(client) < size
    done = once(second, state)
    assert done.returncode == ExitStatus.INCONSISTENT == 9, done.stderr
    assert "(TREE_SHRANK)" in done.stderr
    assert done.stdout == ""
    body = verified.split("\n\n", 1)[0]
    assert all(f"    {line}\n" in done.stderr for line in body.splitlines())
    assert done.stderr.index("verified before") < done.stderr.index("served now")


def verify(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*bergen_command(), "verify", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment(),
        stdin=subprocess.DEVNULL,
    )


def test_a_record_is_checked_against_a_witnessed_checkpoint(
    farm: ServerFarm, tmp_path: Path
) -> None:
    server = farm.start(f"sqlite:///{tmp_path / 'first.db'}")
    state, record, witnessed = tmp_path / "witness", tmp_path / "record.json", tmp_path / "w.txt"
    with Client(server.target) as client:
        key = client.stub.GetServerInfo(pb.GetServerInfoRequest()).public_key
        size = play_a_match(client, 5, record)
        until(lambda: newest_size(client) >= size, "the record's checkpoint")
        done = once(server, state)
        assert done.returncode == ExitStatus.SUCCESS, done.stderr
        witnessed.write_text(done.stdout)
        vkey = done.stderr.split("bergen witness: verifier key ", 1)[1].split("\n", 1)[0]
        # A later match: the witness cosigns a larger tree, which the record's is proved in.
        size = play_a_match(client, 6)
        until(lambda: newest_size(client) >= size, "the second match's checkpoint")
    later = tmp_path / "later.txt"
    done = once(server, state)
    later.write_text(done.stdout)
    assert int(done.stdout.splitlines()[1]) > int(witnessed.read_text().splitlines()[1])

    held = ("--public-key", key, "--witness-key", vkey, "--witness-checkpoint")
    checked = verify(str(record), *held, str(later), "--server", server.target, "--json")
    assert checked.returncode == ExitStatus.SUCCESS, checked.stdout + checked.stderr
    assert json.loads(checked.stdout)["witnessed"] == "proved"
    # Offline (no server of this log answers): not proved, but not in conflict.
    offline = verify(str(record), *held, str(later), "--server", "127.0.0.1:9", "--json")
    assert offline.returncode == ExitStatus.SUCCESS, offline.stdout + offline.stderr
    assert json.loads(offline.stdout)["witnessed"] == "not_proved"
    # Another witness's key: its cosignature is not there.
    other = tmp_path / "other"
    stranger = once(server, other).stderr.split("verifier key ", 1)[1].split("\n", 1)[0]
    forged = verify(str(record), "--public-key", key, "--witness-key", stranger,
                    "--witness-checkpoint", str(later))  # fmt: skip
    assert forged.returncode == ExitStatus.INVALID, forged.stdout + forged.stderr
    assert "not cosigned" in forged.stdout
    server.terminate()

    # The same key, another history: its record conflicts with what the witness cosigned.
    fork = farm.start(f"sqlite:///{tmp_path / 'fork.db'}")
    forked = tmp_path / "forked.json"
    witnessed_size = int(later.read_text().splitlines()[1])
    with Client(fork.target) as client:
        # Its log past the witnessed tree (deals are the server's, so match lengths vary):
        # then it has signed a tree of that size, and the conflict can be proved.
        seed, size = 7, 0
        while seed < 10 or size <= witnessed_size:
            size = play_a_match(client, seed, forked)
            seed += 1
        until(lambda: newest_size(client) >= size, "the fork's checkpoint")
    done = verify(str(forked), *held, str(later), "--server", fork.target)
    assert done.returncode == ExitStatus.INCONSISTENT, done.stdout + done.stderr
    assert done.stdout.startswith("INCONSISTENT: ")
    assert "the checkpoint the witness cosigned:" in done.stderr
