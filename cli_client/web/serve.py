"""Run the gateway under uvicorn, writing the bound port once it listens."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from bergen.api.exit_status import ExitStatus
from bergen.api.state import state_dir as default_state_dir
from bergen.cli_client.connect import Endpoint
from bergen.cli_client.usage import fail

from .app import TRANSPORT_EXTENSION
from .computer import MAX_BOTS, ComputerSeats
from .limits import ClientLimits
from .site import create_site

SHUTDOWN_GRACE_S = 2


class _Protocol(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol, handing each request its connection's transport (as the
    scope extension `TRANSPORT_EXTENSION`) so that a match hub writes each burst to every
    caught-up stream itself, framed once, instead of waking a task per stream."""

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope["extensions"] = {TRANSPORT_EXTENSION: self.transport}  # type: ignore[dict-item]


class _Server(uvicorn.Server):
    """uvicorn's server, stopped by SIGTERM or SIGINT with exit status 0 (uvicorn's own
    handlers raise the signal again once it has stopped, which would end the process by it)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    def stop(self) -> None:
        self.should_exit = True


def serve(
    endpoint: Endpoint,
    host: str,
    port: int,
    *,
    port_file: str | None = None,
    max_streams: int = 1000,
    max_matches: int = 12,
    coalesce_s: float = 0.0,
    nice: int = 0,
    client_limits: ClientLimits | None = None,
    max_bots: int = MAX_BOTS,
    state_dir: Path | None = None,
    seal_key_file: str | None = None,
) -> int:
    """Serve the gateway until SIGTERM or SIGINT, each client held to `client_limits`, the
    computer's seats (at most `max_bots`) played from this process and kept in `state_dir`
    (default: the user's state folder) for the next start to play on, and the finished
    matches' analyses kept there too."""
    logging.basicConfig(
        level=os.environ.get("BERGEN_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        return fail("web", f"cannot listen on {host}:{port}: {e.strerror or e}", ExitStatus.ERROR)
    sock.listen(2048)
    bound = sock.getsockname()[1]
    if nice:
        os.nice(nice)  # the game server on the same machine comes first
    try:
        app = create_site(
            endpoint,
            max_streams=max_streams,
            max_matches=max_matches,
            coalesce_s=coalesce_s,
            client_limits=client_limits,
            seal_key_file=seal_key_file,
            analysis_dir=(state_dir or default_state_dir()) / "analyses",
        )
    except (OSError, ValueError) as e:
        return fail("web", f"cannot use the seal key file: {e}", ExitStatus.ERROR)
    # The bots' tokens derive from the seal key, as any gateway holding it derives them.
    keys = app.state.players.sealer.keys
    computer = ComputerSeats(
        endpoint, state_dir or default_state_dir(), max_bots=max_bots, keys=keys
    )
    app.state.computer = computer
    try:
        computer.resume()
    except (OSError, ValueError) as e:
        computer.close()
        return fail("web", f"cannot read the computer's seats: {e}", ExitStatus.ERROR)
    config = uvicorn.Config(
        app,
        http=_Protocol,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
        backlog=2048,
        lifespan="on",
        # uvicorn would believe X-Forwarded-For from 127.0.0.1 by default: whom a request
        # counts against is `--trust-proxy`'s to say (limits.client_of), and no one else's.
        proxy_headers=False,
    )
    server = _Server(config)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, server.stop)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not task.done():
            await asyncio.sleep(0.02)
        if server.started:
            print(f"bergen web: serving http://{host}:{bound}/ from {endpoint}", flush=True)
            if port_file:
                tmp = Path(port_file + ".tmp")
                tmp.write_text(str(bound))
                tmp.replace(port_file)
        await task

    try:
        asyncio.run(main())
    finally:
        computer.close()
    return ExitStatus.SUCCESS
