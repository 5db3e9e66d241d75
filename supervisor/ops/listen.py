"""Where an HTTP listener (the HTTP front, the admin endpoint) listens: one bound socket and its log line.

``listening_socket`` binds and listens before anything is served, so a port in
use is a ``SupervisorError`` naming the settings key; ``0`` lets the OS pick a
port, and ``announce`` logs the URL really bound (``<listener> listening on URL``,
with ``event="listening"``, ``listener`` and ``url`` as structured fields),
which is how a host or a test learns the port. The caller owns the socket and
closes it when it stops serving (so the port is freed at once, not at GC).
"""

from __future__ import annotations

import logging
import socket
from typing import Final

from supervisor.errors import SupervisorError

logger = logging.getLogger(__name__)

BACKLOG: Final = 100
"""Connections the kernel queues before they are accepted (hypercorn's default)."""


def listening_socket(host: str, port: int, settings_key: str) -> socket.socket:
    """A TCP socket bound to ``host:port`` and listening.

    Raises:
        SupervisorError: The address cannot be bound (in use, not local, no permission).
    """
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        raise SupervisorError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}); free the port or change "
            f"{settings_key}.port / {settings_key}.host"
        ) from exc
    return sock


def bound_url(sock: socket.socket) -> str:
    """``http://HOST:PORT`` of a listening socket, the port really bound (IPv6 in brackets)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def announce(settings_key: str, urls: list[str]) -> None:
    """Log each URL the listener ``settings_key`` serves (the ``listening`` event)."""
    listener = settings_key.rpartition(".")[2]
    for url in urls:
        logger.info("%s listening on %s", listener, url, extra={"event": "listening", "listener": listener, "url": url})
