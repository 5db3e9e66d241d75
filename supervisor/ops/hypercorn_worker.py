"""The admin endpoint's HTTP server: hypercorn's trio worker, in the caller's task (uvicorn is asyncio-only).

``serve_asgi`` binds with ``ops.listen`` before it reports started (a port in
use is a ``SupervisorError`` naming the settings key), hands the URLs really
bound to ``task_status.started`` and logs them, and ends when cancelled.
The HTTP front has a server of its own (``ops.http1_server``).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, cast

import trio
from hypercorn.config import Config, Sockets
from hypercorn.trio.run import worker_serve
from hypercorn.utils import wrap_app

from supervisor.ops.listen import announce, listening_socket

if TYPE_CHECKING:
    from hypercorn.typing import ASGIFramework
    from starlette.types import ASGIApp


async def serve_asgi(
    app: ASGIApp,
    *,
    host: str,
    port: int,
    settings_key: str,
    url_path: str = "",
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` on ``host:port`` (``0``: a port the OS picks) with hypercorn's trio worker until cancelled.

    Reports started with the URLs it bound (``http://127.0.0.1:PORT`` + ``url_path``),
    after logging each of them (``ops.listen``).

    Raises:
        SupervisorError: The address cannot be bound (in use, not local, no permission).
    """
    config = Config()
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    # Bound here rather than by hypercorn's create_sockets, which leaks the socket when bind fails.
    sock = listening_socket(host, port, settings_key)
    sockets = Sockets(secure_sockets=[], insecure_sockets=[sock], quic_sockets=[])
    # Starlette-style ASGI callables are looser than hypercorn's typed protocol; same callable at runtime.
    wrapped = wrap_app(cast("ASGIFramework", app), config.wsgi_max_body_size, "asgi")
    try:
        async with trio.open_nursery() as nursery:
            # worker_serve reports what it bound as "http://host:port", read back from the sockets.
            binds: list[str] = await nursery.start(partial(worker_serve, wrapped, config, sockets=sockets))
            urls = [bind + url_path for bind in binds]
            announce(settings_key, urls)
            task_status.started(urls)
    finally:
        # trio's listener does not close the socket it was handed: stop listening now, not at GC.
        sock.close()
