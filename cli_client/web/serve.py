"""Run the gateway under uvicorn, writing the bound port once it listens."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import uvicorn

from bergen.api.exit_status import ExitStatus
from bergen.cli_client.connect import Endpoint

from .app import create_app

SHUTDOWN_GRACE_S = 2


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
) -> int:
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
        print(f"bergen web: cannot listen on {host}:{port}: {e.strerror or e}", file=sys.stderr)
        return ExitStatus.ERROR
    sock.listen(2048)
    bound = sock.getsockname()[1]
    app = create_app(endpoint, max_streams=max_streams, max_matches=max_matches)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
        backlog=2048,
        lifespan="on",
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

    asyncio.run(main())
    return ExitStatus.SUCCESS
