"""A separate process using the store, driven by the tests through its stdin and stdout.

python store_worker.py URL race STREAM    # reads "append V" lines, answers "won"/"lost";
                                          # "open URL": the same on another file, "ready"
python store_worker.py URL churn STREAM   # appends batches of 3 forever, printing each ack
"""

from __future__ import annotations

import os
import sys
import uuid

from bergen.domain.errors import ConcurrencyConflict
from bergen.server.store import Append, NewEvent, open_store

BATCH = 3


def race(url: str, stream: str) -> None:
    store = open_store(url)
    print("ready", flush=True)
    for line in sys.stdin:
        command, argument = line.split()
        if command == "open":  # a store of its own on another database, unused so far
            store.close()
            store = open_store(argument)
            print("ready", flush=True)
            continue
        version = int(argument)
        try:
            store.append(Append(stream, version, [NewEvent("Raced", 1, {"pid": os.getpid()})]))
        except ConcurrencyConflict:
            print("lost", flush=True)
        else:
            print("won", flush=True)
    store.close()


def churn(url: str, stream: str) -> None:
    store = open_store(url)
    version = store.stream_version(stream)
    while True:
        command_id = uuid.uuid4().hex
        batch = [NewEvent("Churned", 1, {"i": i, "pad": "x" * 2000}) for i in range(BATCH)]
        try:
            result = store.append(Append(stream, version, batch, command_id=command_id))
        except ConcurrencyConflict:
            version = store.stream_version(stream)
            continue
        version = result.last_seq
        print(f"acked {version} {command_id}", flush=True)


if __name__ == "__main__":
    {"race": race, "churn": churn}[sys.argv[2]](sys.argv[1], sys.argv[3])
