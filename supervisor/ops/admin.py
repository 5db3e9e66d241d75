"""The admin endpoint: ``/healthz``, ``/readyz``, ``/status`` and ``/metrics`` over HTTP for operators.

Enabled by ``[supervisor.admin] enabled = true``; its own host and port
(loopback by default). Requests pass the same ``HttpGuard`` as the HTTP front:
rebinding protection, and the bearer token (``supervisor.admin.token``, else the
front's; a loopback admin endpoint may run without one, a reachable one may
not, which settings enforce).

* ``GET /healthz``: 200 while the process serves at all.
* ``GET /readyz``: 200 once every enabled server has finished its first
  attempt (successful or not), else 503 naming the servers still pending.
* ``GET /status``: JSON, one entry per configured server (see ``status_document``),
  plus ``catalog_store``: the backend, its state, fleet vs local hits, outbox depth.
* ``GET /metrics``: Prometheus text from the Supervisor's own registry.

Concurrency: ``AdminEndpoint.run`` serves in the caller's task until cancelled
(the root nursery's cancellation at stop). Handlers only read the Supervisor
(plain data, no ``await`` while reading), so they need no lock.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sized
from typing import Any, Final, Protocol

import trio
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import Receive, Scope, Send

from supervisor._version import __version__
from supervisor.catalog.cache import CatalogCache
from supervisor.config.code import code_engine_problem
from supervisor.config.models import SupervisorSection
from supervisor.ops.http import HttpGuard, allowed_names
from supervisor.ops.hypercorn_worker import serve_asgi
from supervisor.ops.metrics import CONTENT_TYPE, Metrics
from supervisor.ops.status import ServerStatus

logger = logging.getLogger(__name__)

PATHS: Final = frozenset({"/healthz", "/readyz", "/status", "/metrics"})


class Observed(Protocol):
    """What the endpoint reads of the sidecar (``root.Supervisor``): plain data, read without awaiting."""

    @property
    def registry(self) -> Sized: ...

    @property
    def cache(self) -> CatalogCache: ...

    @property
    def metrics(self) -> Metrics: ...

    def pending_first_attempts(self) -> list[str]: ...

    def statuses(self) -> list[ServerStatus]: ...

    def search_status(self) -> str: ...


class AdminEndpoint:
    """The admin HTTP server of one Supervisor."""

    def __init__(self, supervisor: Observed, settings: SupervisorSection) -> None:
        self._supervisor = supervisor
        self._settings = settings.admin
        if settings.admin_token is None:
            logger.warning("admin endpoint on %s has no token: anyone on this machine can read it", settings.admin.host)
        self.app = HttpGuard(
            self._route,
            token=settings.admin_token,
            names=allowed_names(settings.admin.host),
            paths=PATHS,
            max_body_bytes=64 * 1024,
        )

    async def run(self, *, task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; report started with the base URLs really bound (``port = 0`` works)."""
        await serve_asgi(
            self.app,
            host=self._settings.host,
            port=self._settings.port,
            settings_key="supervisor.admin",
            task_status=task_status,
        )

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = self._respond(scope["method"], scope["path"])
        await response(scope, receive, send)

    def _respond(self, method: str, path: str) -> Response:
        if method not in ("GET", "HEAD"):
            return PlainTextResponse("Method not allowed; use GET", status_code=405, headers={"Allow": "GET"})
        match path:
            case "/healthz":
                return PlainTextResponse("ok\n")
            case "/readyz":
                pending = self._supervisor.pending_first_attempts()
                if pending:
                    return JSONResponse({"ready": False, "pending": pending}, status_code=503)
                return JSONResponse({"ready": True, "pending": []})
            case "/status":
                return Response(json.dumps(status_document(self._supervisor), indent=2), media_type="application/json")
            case _:  # /metrics; the guard let only PATHS through
                return Response(self._supervisor.metrics.render(), media_type=CONTENT_TYPE)


def code_mode_status() -> str:
    """Whether code views can run here: ``available``, or why not (the extra to install)."""
    problem = code_engine_problem()
    return "available" if problem is None else f"unavailable: {problem}"


def status_document(supervisor: Observed) -> dict[str, Any]:
    """What ``/status`` serves: the sidecar, then one object per configured server, in config order."""
    now = trio.current_time()
    pending = set(supervisor.pending_first_attempts())
    servers: list[dict[str, Any]] = []
    for status in supervisor.statuses():
        cache = supervisor.cache.describe(status.name) if status.state != "disabled" else None
        era = None
        if status.protocol_version is not None:
            era = "2026" if status.protocol_version in MODERN_PROTOCOL_VERSIONS else "handshake"
        servers.append(
            {
                "name": status.name,
                "state": status.state,
                "first_attempt_done": status.name not in pending,
                "generation": status.generation,
                "protocol_version": status.protocol_version,
                "era": era,
                "identity": status.identity,
                "tools": status.tool_count,
                "attempt": status.attempt,
                "max_attempts": status.max_attempts,
                "last_error": status.last_error,
                "last_sync_age_sec": None if status.last_sync_at is None else round(now - status.last_sync_at, 3),
                "last_sync_reason": status.last_sync_reason,
                "syncs": status.syncs,
                "conflicts": list(status.conflicts),
                "failed_kinds": dict(status.failed_kinds),
                "transform_warnings": list(status.transform_warnings),
                "pins": {state: list(keys) for state, keys in status.pins.items()},
                "catalog_cache": None if cache is None else {"entries": cache["entries"], "hits": cache["hits"],
                                                             "misses": cache["misses"]},
            }
        )  # fmt: skip
    return {
        "version": __version__,
        "ready": not pending,
        "catalog_tools": len(supervisor.registry),
        "catalog_store": supervisor.cache.store_status(),
        "search": supervisor.search_status(),
        "code_mode": code_mode_status(),
        "servers": servers,
    }
