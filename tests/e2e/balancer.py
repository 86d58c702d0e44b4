"""A TCP front for several replicas, as a load balancer or a DNS name with several servers is:
each new connection goes to the first replica that accepts it, in the order given; the
bytes of a connection are relayed both ways in one thread. A replica that dies closes the
connections relayed to it, so its clients connect again and reach the next one."""

from __future__ import annotations

import selectors
import socket
import threading
from collections.abc import Sequence
from contextlib import suppress


class Balancer:
    """Listens on 127.0.0.1:`port`; `backends` are (host, port) in order of preference, each
    given `connect_timeout` seconds to accept (None: as long as the system waits)."""

    def __init__(
        self, backends: Sequence[tuple[str, int]], connect_timeout: float | None = 2.0
    ) -> None:
        self.backends = list(backends)
        self.connect_timeout = connect_timeout
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.accepted: list[tuple[str, int]] = []
        """The backend each connection went to, in order."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="balancer", daemon=True)
        self._thread.start()

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _connect(self) -> socket.socket | None:
        for backend in self.backends:
            try:
                server = socket.create_connection(backend, timeout=self.connect_timeout)
            except OSError:
                continue
            server.settimeout(None)
            self.accepted.append(backend)
            return server
        return None

    def _serve(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self._listener, selectors.EVENT_READ, None)
        while not self._stop.is_set():
            for key, _ in sel.select(timeout=0.2):
                if key.data is None:
                    client, _ = self._listener.accept()
                    server = self._connect()
                    if server is None:
                        client.close()  # no replica answers: the client sees UNAVAILABLE
                        continue
                    sel.register(client, selectors.EVENT_READ, server)
                    sel.register(server, selectors.EVENT_READ, client)
                    continue
                src, dst = key.fileobj, key.data
                assert isinstance(src, socket.socket)
                try:
                    data = src.recv(65536)
                except OSError:
                    data = b""
                if data:
                    with suppress(OSError):
                        dst.sendall(data)
                    continue
                for s in (src, dst):
                    with suppress(KeyError, ValueError):
                        sel.unregister(s)
                    s.close()
        for key in list(sel.get_map().values()):
            with suppress(OSError):
                key.fileobj.close()  # type: ignore[union-attr]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


__all__ = ["Balancer"]
