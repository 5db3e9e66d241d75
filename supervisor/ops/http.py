"""What the HTTP front and the admin endpoint share: a guarding ASGI middleware and hypercorn-on-trio serving.

``HttpGuard`` wraps an ASGI app and answers, before the app sees a byte of
the body, in this order:

1. ``503`` once ``refuse_new`` was called (graceful stop: no new requests);
2. ``421`` / ``403`` for a ``Host`` / ``Origin`` that is not an allowed name
   (DNS-rebinding protection; local names always, plus the bound host);
3. ``401`` without a matching ``Authorization: Bearer`` token (compared with
   ``hmac.compare_digest``; the scheme in any case, as RFC 9110 11.1 has it);
   the body says nothing about the catalog.
   ``token`` opens every path; each of ``scoped_tokens`` opens only its own
   paths (a view's), and gets ``403`` on any other, whether it exists or not;
4. ``404`` outside the app's paths;
5. ``413`` when ``Content-Length`` exceeds the limit. A body without a length
   is limited by the wrapped app as it streams (the SDK's
   ``RequestBodyLimitMiddleware`` stops reading at the limit).

It also counts the POSTs in flight, so a graceful stop can wait (bounded, by
its caller) until every answer has been written: ``wait_idle``. A POST whose
answer the app detached (``ops.http1_exchange.DETACH``) is in flight until
that answer ends.

The servers under it: ``ops.http1_server`` for the HTTP front, hypercorn's
trio worker (``ops.hypercorn_worker``) for the admin endpoint.
Concurrency: the guard's counters change without ``await`` in between, so
they need no lock.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

import trio
from pydantic import SecretStr
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from supervisor.ops.http1_exchange import DETACH

if TYPE_CHECKING:
    from supervisor.ops.http1_exchange import SendNow, Watcher

LOCAL_NAMES: Final = frozenset({"127.0.0.1", "localhost", "::1"})
MAX_HOSTS_SEEN: Final = 64
"""``Host`` values whose verdict ``HttpGuard`` keeps."""
_WILDCARD_BINDS: Final = frozenset({"0.0.0.0", "::", ""})


def allowed_names(bind_host: str) -> frozenset[str]:
    """Host names a request may carry in ``Host``/``Origin``: the local names and the bound host."""
    return LOCAL_NAMES if bind_host in _WILDCARD_BINDS else LOCAL_NAMES | {bind_host.strip("[]").lower()}


def _hostname(value: str) -> str | None:
    """The host part of a ``Host`` header (``name``, ``name:port``, ``[v6]:port``), lower-cased."""
    try:
        return urlsplit(f"//{value}").hostname
    except ValueError:
        return None


class HttpGuard:
    """ASGI middleware: stop gate, rebinding protection, bearer auth, paths, declared body size."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: SecretStr | None,
        names: Collection[str],
        paths: Collection[str],
        max_body_bytes: int,
        scoped_tokens: Collection[tuple[SecretStr, frozenset[str]]] = (),
    ) -> None:
        self._app = app
        self._expected = None if token is None or not token.get_secret_value() else _bearer(token)
        self._scoped = [(_bearer(secret), opens) for secret, opens in scoped_tokens]
        self._names = frozenset(names)
        self._paths = frozenset(paths)
        self._max_body_bytes = max_body_bytes
        self._refusing = False
        self._hosts_seen: dict[bytes, bool] = {}
        self._posts_in_flight = 0
        self._idle = trio.Event()
        self._idle.set()

    def refuse_new(self) -> None:
        """Answer every request that arrives from now on with 503."""
        self._refusing = True

    async def wait_idle(self) -> None:
        """Return once no POST is being served (every answer written)."""
        await self._idle.wait()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _serve_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # no websockets here
        problem = self._check(scope)
        if problem is not None:
            status, text = problem
            headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
            await PlainTextResponse(text, status_code=status, headers=headers)(scope, receive, send)
            return
        if scope["method"] != "POST":
            await self._app(scope, receive, send)
            return
        self._posts_in_flight += 1
        self._idle = trio.Event() if self._posts_in_flight == 1 else self._idle
        extensions = scope.get("extensions")
        detach = extensions.get(DETACH) if extensions is not None else None
        post = _DetachablePost(self, detach) if detach is not None else None
        if post is not None:
            extensions[DETACH] = post.detach  # type: ignore[index]
        try:
            await self._app(scope, receive, send)
        finally:
            if post is None or not post.detached:
                self.post_done()

    def post_done(self) -> None:
        """One POST fewer in flight: its answer is written (or its client gone)."""
        self._posts_in_flight -= 1
        if not self._posts_in_flight:
            self._idle.set()

    def _check(self, scope: Scope) -> tuple[int, str] | None:
        """The refusal for this request, or None to let it through (synchronous: no body is read)."""
        if self._refusing:
            return 503, "mcp-supervisor is shutting down"
        host = origin = authorization = declared = None
        for name, value in scope["headers"]:  # lower-case names (ASGI); the first of each, as ``Headers.get``
            if name == b"host":
                host = value if host is None else host
            elif name == b"origin":
                origin = value if origin is None else origin
            elif name == b"authorization":
                authorization = value if authorization is None else authorization
            elif name == b"content-length":
                declared = value if declared is None else declared
        if not self._host_allowed(host or b""):
            return 421, "Invalid Host header"
        if origin is not None and (urlsplit(origin.decode("latin-1")).hostname or "") not in self._names:
            return 403, "Invalid Origin header"
        refused = self._authorize(_as_bearer(authorization or b""), scope["path"])
        if refused is not None:
            return refused
        if scope["path"] not in self._paths:
            return 404, "Not found"
        if declared is not None and declared.isdigit() and int(declared) > self._max_body_bytes:
            return 413, f"Request body too large (limit {self._max_body_bytes} bytes)"
        return None

    def _host_allowed(self, value: bytes) -> bool:
        """Whether a ``Host`` value names an allowed host; kept per value (a host sends the same one each time)."""
        allowed = self._hosts_seen.get(value)
        if allowed is None:
            if len(self._hosts_seen) >= MAX_HOSTS_SEEN:  # a few names in use, not a stream of new ones: bounded
                self._hosts_seen.clear()
            allowed = self._hosts_seen[value] = _hostname(value.decode("latin-1")) in self._names
        return allowed

    def _authorize(self, presented: bytes, path: str) -> tuple[int, str] | None:
        """401 for no known token, 403 for a view-bound token on another path, else None (let through)."""
        if self._expected is None and not self._scoped:
            return None
        # Every comparison is made, whichever matches: the time taken says nothing about which token it was.
        opens_all = self._expected is not None and hmac.compare_digest(presented, self._expected)
        opened: frozenset[str] | None = None
        for expected, paths in self._scoped:
            if hmac.compare_digest(presented, expected):
                opened = paths
        if opens_all:
            return None
        if opened is None:
            return 401, "Unauthorized: send the sidecar's token as 'Authorization: Bearer <token>'"
        if path not in opened:
            return 403, "Forbidden: this token does not open this path"
        return None


class _DetachablePost:
    """A POST whose answer the app may detach (``ops.http1_exchange.DETACH``): in flight until that answer ends.

    It stands between the server and the app's watcher, and counts the POST done at the watcher's ``ended``.
    """

    __slots__ = ("_detach", "_guard", "_watcher", "detached")

    def __init__(self, guard: HttpGuard, detach: Callable[[Watcher, float], SendNow]) -> None:
        self._guard = guard
        self._detach = detach
        self._watcher: Watcher | None = None
        self.detached = False

    def detach(self, watcher: Watcher, silent_sec: float) -> SendNow:
        send_now = self._detach(self, silent_sec)
        self._watcher, self.detached = watcher, True
        return send_now

    def silent(self) -> None:
        assert self._watcher is not None
        self._watcher.silent()

    def hung_up(self) -> None:
        assert self._watcher is not None
        self._watcher.hung_up()

    def ended(self) -> None:
        assert self._watcher is not None
        try:
            self._watcher.ended()
        finally:
            self._guard.post_done()


def _bearer(token: SecretStr) -> bytes:
    return f"Bearer {token.get_secret_value()}".encode()


def _as_bearer(authorization: bytes) -> bytes:
    """``authorization`` spelled as ``_bearer`` spells it: its scheme is case-insensitive (RFC 9110 11.1)."""
    scheme, space, credentials = authorization.partition(b" ")
    return b"Bearer " + credentials.lstrip(b" ") if space and scheme.lower() == b"bearer" else authorization


async def _serve_lifespan(receive: Receive, send: Send) -> None:
    """The owner runs what needs a lifespan (the SDK's session manager) itself; just acknowledge."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
