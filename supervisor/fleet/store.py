"""The fleet catalog store's Redis client: scripts, a circuit breaker, masked errors (DESIGN I14).

``FleetStore`` wraps one coredis client (anyio-native, so it runs on trio
without a bridge). Every call is one script or command, bounded by
``operation_timeout_ms`` (``trio.fail_after`` at this boundary), and every
coredis, OS or timeout failure is translated here into ``CatalogStoreUnavailable``.
Blocking commands (BLPOP, WAIT, ...) are never sent: a cancelled one would
leak a pool slot.

**Circuit breaker.** The first failure opens it (state ``down``): from then
on every call fails at once, so no sync keeps paying the timeout. ``run``
owns the only probe: while down it PINGs with exponential backoff and closes
the breaker (state ``up``) on the first answer. Each state change is logged
once (one warning down, one info up) and reported to ``on_state``; a failing
operation never logs by itself.

With telemetry on, each call is a CLIENT span (``telemetry.work.store_span``)
naming the operation only: never the URL, a key or a value.

Concurrency: ``run`` owns the client's pool (its ``async with``) and the
prober; it must be started (``nursery.start``) before any call. State changes
are synchronous. The URL is shown only masked: errors and logs carry
``settings.masked_url``, and the password is scrubbed from any foreign message.
"""

from __future__ import annotations

import logging
import secrets
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

import anyio
import coredis
import coredis.exceptions
import trio
from coredis.retry import NoRetryPolicy

from supervisor.compat.coredis import patch_connection_cleanup
from supervisor.config.models import CatalogStoreSettings
from supervisor.errors import CatalogStoreUnavailable
from supervisor.fleet import scripts
from supervisor.fleet.types import Capture, FleetRead, StoreState, new_origin
from supervisor.telemetry.work import store_span

logger = logging.getLogger(__name__)

T = TypeVar("T")
PROBE_INITIAL_SEC: Final = 0.1
PROBE_MAX_SEC: Final = 5.0
CONNECT_BOUND_SEC: Final = 1.0
"""The first connection may take this long (at least one operation timeout) before the sidecar starts without it."""
INDEX_PX_MS: Final = 86_400_000
STOP_GRACE_SEC: Final = 1.0
"""At a stop, how long the owner may still use the store (to drain its outbox)."""
_FAILURES: Final = (
    coredis.exceptions.RedisError,
    OSError,
    trio.TooSlowError,
    TimeoutError,
    anyio.ClosedResourceError,  # a pooled connection torn down under us
    anyio.BrokenResourceError,
)


class FleetStore:
    """One sidecar's connection to the fleet store."""

    def __init__(
        self,
        settings: CatalogStoreSettings,
        *,
        origin: str,
        on_state: Callable[[StoreState], None] | None = None,
    ) -> None:
        self.settings = settings
        self.origin = origin
        """This sidecar's id in events and locks."""
        self.state: StoreState = "connecting"
        self.reason: str | None = None
        self.timeout_sec = settings.operation_timeout_ms / 1000
        self._on_state = on_state
        self.probe_times: deque[float] = deque(maxlen=16)
        """When the last probes started (``trio.current_time()``): the breaker's backoff, observable."""
        self._run_prefix = ""
        self._broken = trio.Event()
        self._up = trio.Event()
        self._secret = settings.url.get_secret_value()
        patch_connection_cleanup()
        self._client = self._new_client()
        self._prepare = self._client.register_script(scripts.PREPARE)
        self._read = self._client.register_script(scripts.READ)
        self._write = self._client.register_script(scripts.WRITE)
        self._evict = self._client.register_script(scripts.EVICT)
        self._try_lock = self._client.register_script(scripts.TRY_LOCK)

    def _new_client(self) -> coredis.Redis[str]:
        bound_sec = max(self.timeout_sec, CONNECT_BOUND_SEC)
        return coredis.Redis.from_url(
            self._secret,
            decode_responses=True,
            stream_timeout=bound_sec,
            connect_timeout=bound_sec,
            pool_timeout=bound_sec,
            max_connections=16,
            retry_policy=NoRetryPolicy(),
        )

    @property
    def client(self) -> coredis.Redis[str]:
        """The shared client (the subscriber builds its own pub/sub connection from it)."""
        return self._client

    @property
    def prefix(self) -> str:
        return self.settings.key_prefix

    async def run(
        self,
        *,
        before_close: Callable[[], Awaitable[None]] | None = None,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Hold the pool open; connect once (bounded), then probe whenever the breaker is open.

        When cancelled, ``before_close`` runs while the pool is still open, shielded and
        bounded by ``STOP_GRACE_SEC`` (the owner drains its outbox there).
        """
        async with self._client:
            try:
                with trio.move_on_after(max(self.timeout_sec, CONNECT_BOUND_SEC)):
                    await self._probe_once()
                if self.state != "up":
                    self._trip("no answer within the connect bound" if self.reason is None else self.reason)
                task_status.started()
                await self._serve_probes()
            finally:
                if before_close is not None and self.state == "up":
                    await self._run_before_close(before_close)

    async def _run_before_close(self, before_close: Callable[[], Awaitable[None]]) -> None:
        # The pool's connections live in a task group our cancellation has reached, so the
        # last operations go through a client opened here, inside the shield.
        with trio.CancelScope(shield=True), trio.move_on_after(STOP_GRACE_SEC):
            self._client = self._new_client()
            async with self._client:
                await before_close()

    async def _serve_probes(self) -> None:
        delay = PROBE_INITIAL_SEC
        while True:
            if self.state == "up":
                await self._broken.wait()
                delay = PROBE_INITIAL_SEC
            await trio.sleep(delay)
            with trio.move_on_after(max(self.timeout_sec, CONNECT_BOUND_SEC)):
                await self._probe_once()
            if self.state != "up":
                delay = min(delay * 2, PROBE_MAX_SEC)

    async def _probe_once(self) -> None:
        self.probe_times.append(trio.current_time())
        try:
            info: dict[str, Any] = await self._client.info("server")
        except _FAILURES as exc:
            self._trip(self._describe(exc))
            return
        run_id = str(info.get("run_id", ""))
        self._run_prefix = f"{run_id}:"
        self._set_state("up", None)

    async def wait_up(self) -> None:
        """Return once the breaker is closed (at once if it is)."""
        await self._up.wait()

    # -- the breaker ----------------------------------------------------------------------

    def _trip(self, reason: str) -> None:
        if self._broken.is_set() and self.state == "down":
            self.reason = reason
            return
        self._broken.set()
        self._set_state("down", reason)

    def _set_state(self, state: StoreState, reason: str | None) -> None:
        previous = self.state
        self.state, self.reason = state, reason
        if state == "up":
            self._broken = trio.Event()
            self._up.set()
        else:
            self._up = trio.Event()
        if previous == state:
            return
        if state == "down":
            logger.warning(
                "catalog store %s is unavailable (%s); sidecars go on with the local store and retry in the background",
                self.settings.masked_url, reason,
            )  # fmt: skip
        else:
            logger.info("catalog store %s is up", self.settings.masked_url)
        if self._on_state is not None:
            self._on_state(state)

    def _describe(self, exc: BaseException) -> str:
        if isinstance(exc, coredis.exceptions.AuthenticationError | coredis.exceptions.AuthorizationError):
            text = "authentication failed: check the password in supervisor.catalog_store.url"
        elif isinstance(exc, trio.TooSlowError | TimeoutError):
            text = f"no answer within {self.settings.operation_timeout_ms} ms (operation_timeout_ms)"
        else:
            text = f"{type(exc).__name__}: {exc}"
        password = self._password()
        return text.replace(password, scripts_mask()) if password else text

    def _password(self) -> str | None:
        from urllib.parse import urlsplit  # noqa: PLC0415 - only on the error path

        try:
            return urlsplit(self._secret).password
        except ValueError:
            return None

    async def _call(self, operation: Callable[[], Awaitable[T]], name: str = "call") -> T:
        """Run one bounded operation; any failure opens the breaker and raises ``CatalogStoreUnavailable``.

        ``name``: the operation's name on its span (``telemetry.work.store_span``), never its keys or values.
        """
        with store_span(name):
            if self.state != "up":
                await trio.lowlevel.checkpoint()
                raise CatalogStoreUnavailable(self.settings.masked_url, self.reason or self.state)
            try:
                with trio.fail_after(self.timeout_sec):
                    return await operation()
            except _FAILURES as exc:
                reason = self._describe(exc)
                self._trip(reason)
                raise CatalogStoreUnavailable(self.settings.masked_url, reason) from exc

    # -- operations -----------------------------------------------------------------------

    def keys(self, tid: str) -> scripts.TargetKeys:
        return scripts.TargetKeys(self.prefix, tid)

    def _epoch_args(self) -> list[str]:
        return [f"{self._run_prefix}{secrets.token_hex(8)}", self._run_prefix]

    async def prepare(self, tid: str, method: str) -> Capture:
        """The current epoch (made anew after a flush or restart) and generation of (target, method)."""
        keys = self.keys(tid)
        reply: Any = await self._call(
            lambda: self._prepare(
                keys=[keys.epoch, keys.generation(method)], args=self._epoch_args(), client=self._client
            ),
            "prepare",
        )
        epoch, generation = _list(reply, 2)
        return Capture(str(epoch), int(generation))

    async def read(self, tid: str, method: str, arm: str) -> FleetRead:
        """Read one entry with the current epoch and generation of its (target, method)."""
        keys = self.keys(tid)
        reply: Any = await self._call(
            lambda: self._read(
                keys=[keys.epoch, keys.generation(method), keys.entry(method, arm)],
                args=self._epoch_args(),
                client=self._client,
            ),
            "read",
        )
        epoch, generation, value, pttl = _list(reply, 4)
        return FleetRead(Capture(str(epoch), int(generation)), value if isinstance(value, str) else None, int(pttl))

    async def write(self, tid: str, method: str, arm: str, capture: Capture, *, payload: str, px_ms: int) -> bool:
        """Store an entry only if the epoch and generation are still ``capture``'s; return whether it was."""
        keys = self.keys(tid)
        event = scripts.event_prefix("write", tid, method, self.origin)
        reply: Any = await self._call(
            lambda: self._write(
                keys=[keys.epoch, keys.generation(method), keys.entry(method, arm), keys.index(method)],
                args=[
                    capture.epoch,
                    str(capture.generation),
                    payload,
                    str(px_ms),
                    str(INDEX_PX_MS),
                    scripts.channel(self.prefix),
                    event,
                ],
                client=self._client,
            ),
            "write",
        )
        return bool(reply)

    async def evict(self, tid: str, method: str, lock_px_ms: int) -> int:
        """Bump the generation, drop every entry of (target, method), take the re-list lock, publish."""
        keys = self.keys(tid)
        event = scripts.event_prefix("evict", tid, method, self.origin)
        reply: Any = await self._call(
            lambda: self._evict(
                keys=[keys.generation(method), keys.index(method), keys.lock(method)],
                args=[self.origin, str(lock_px_ms), scripts.channel(self.prefix), event],
                client=self._client,
            ),
            "evict",
        )
        return int(reply)

    async def generations(self, tid: str, methods: tuple[str, ...]) -> dict[str, int]:
        """The current generation of each method of one target (one MGET, one slot)."""
        keys = self.keys(tid)
        values = await self._call(lambda: self._client.mget([keys.generation(m) for m in methods]), "generations")
        return {method: int(value or 0) for method, value in zip(methods, values, strict=True)}

    async def try_lock(self, tid: str, method: str, generation: int, px_ms: int) -> bool:
        """Take the re-list lock of (target, method) for ``generation``; True if this sidecar got it.

        One key per (target, method), declared to the script, so Redis Cluster sees every key it touches.
        """
        key = self.keys(tid).lock(method)
        reply: Any = await self._call(
            lambda: self._try_lock(keys=[key], args=[str(generation), self.origin, str(px_ms)], client=self._client),
            "try_lock",
        )
        return bool(reply)

    async def publish_heartbeat(self) -> None:
        """Publish this sidecar's heartbeat; its own subscriber must see it."""
        message = f"heartbeat|-|-|{self.origin}|0"
        await self._call(lambda: self._client.publish(scripts.channel(self.prefix), message), "publish_heartbeat")


def scripts_mask() -> str:
    return "***"


def _list(reply: object, length: int) -> list[Any]:
    if not isinstance(reply, list | tuple) or len(reply) != length:
        raise CatalogStoreUnavailable("", f"unexpected script reply {reply!r}")
    return list(reply)


__all__ = ["Capture", "FleetRead", "FleetStore", "StoreState", "new_origin"]
