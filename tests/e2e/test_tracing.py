"""OpenTelemetry tracing (the `tracing` extra): a server made by `create_server` with a tracer
exporting to the SDK's in-memory exporter, called over real gRPC, makes a SERVER span per call
with the store's work in it as child spans; `bergen serve --trace` without the SDK refuses to
start, saying what to install."""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from bergen.api.exit_status import ExitStatus
from bergen.server.bootstrap import Secrets, create_server
from bergen.server.config import Config
from bergen.server.keys import LogKeys
from bergen.server.lifecycle import Running

from .client import Client, bearer, play_random_move, seat_everyone

pytestmark = pytest.mark.timeout(120)

SERVICE = "bergen.v1.BergenService"


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[tuple[Running, Any]]:
    pytest.importorskip("opentelemetry.sdk", reason="needs the tracing extra (bergen[tracing])")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    running = create_server(
        Config(listen="127.0.0.1:0", database_url=f"sqlite:///{tmp_path / 'bergen.db'}"),
        Secrets(LogKeys.load_or_create(tmp_path / "log-keys")),
        tracer=provider.get_tracer("test"),
    )
    try:
        yield running, exporter
    finally:
        running.stop(0)
        provider.shutdown()


def test_a_span_per_call_with_the_store_under_it(traced: tuple[Running, Any]) -> None:
    from opentelemetry.trace import SpanKind, StatusCode

    running, exporter = traced
    with Client(f"127.0.0.1:{running.port}") as client:
        table = seat_everyone(client, 2)
        move = play_random_move([client], random.Random("trace"), table, table.version)
        public = client.view(table.match_id)
        wrong = (public.turn + 1) % 2
        tile = client.view(table.match_id, table.tokens[wrong]).my_tiles[0]
        with pytest.raises(grpc.RpcError):
            client.stub.Play(
                type(move.request)(match_id=table.match_id, tile=tile, end=1),
                metadata=bearer(table.tokens[wrong]),
                timeout=20,
            )
    spans = exporter.get_finished_spans()
    calls = [s for s in spans if s.kind is SpanKind.SERVER]
    plays = [s for s in calls if s.name == f"{SERVICE}/Play"]
    assert len(plays) == 2, [s.name for s in calls]
    ok, refused = plays
    assert ok.attributes["rpc.method"] == "Play"
    assert ok.attributes["bergen.match_id"] == table.match_id
    assert ok.attributes["bergen.seat"] == move.seat
    assert ok.attributes["rpc.grpc.status_code"] == 0
    assert ok.status.status_code is not StatusCode.ERROR

    def children(parent: Any) -> list[str]:
        return [
            s.name
            for s in spans
            if s.parent is not None
            and s.parent.span_id == parent.context.span_id
            and s.context.trace_id == parent.context.trace_id
        ]

    # The play was decided on the cached match and appended: one append under its span.
    assert children(ok) == ["bergen.store.append"]
    # The refused play was read afresh before it was refused; nothing was appended.
    assert children(refused) == ["bergen.store.read_rows"]
    assert refused.status.status_code is StatusCode.ERROR
    assert refused.attributes["bergen.reason"] == "NOT_YOUR_TURN"
    creates = [s for s in calls if s.name == f"{SERVICE}/CreateMatch"]
    assert len(creates) == 1 and children(creates[0]) == ["bergen.store.append"]
    # The feed's and the clock keeper's own reads are no call's: they make no span.
    assert all(s.kind is SpanKind.SERVER or s.parent is not None for s in spans)


def test_trace_without_the_sdk_says_what_to_install(tmp_path: Path) -> None:
    # The SDK hidden from the server as if the extra were not installed.
    hide = (
        "import sys; sys.modules['opentelemetry.sdk'] = None; "
        "from bergen.cli_client.main import main; sys.exit(main())"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            hide,
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database",
            f"sqlite:///{tmp_path / 'bergen.db'}",
            "--trace",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == ExitStatus.USAGE, done.stderr
    assert "pip install 'bergen[tracing]'" in done.stderr
