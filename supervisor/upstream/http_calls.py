"""The fast path's own POST to a 2026-era streamable-HTTP upstream: one request out, its answer back (issue 29).

A 2026-07-28 request over streamable HTTP is a self-contained POST (no
session, no server→client requests: those are input rounds), answered by one
``application/json`` body, or by an event stream of the request's own notices
ending with its response. So a host's ``tools/call`` on the fast path needs
neither the SDK's transport (a task and two memory channels per request, a
pydantic model of each message) nor its dispatcher (a future per request):
``HttpCalls.request`` POSTs the request and reads the answer in the calling
task: on kept-alive connections of its own (``upstream.http1``) where httpx
would add nothing, else on the generation's own httpx client (its headers,
bearer token or OAuth flow, TLS and connection pool, so nothing about
authentication differs). Both answers are read by the same code.

Everything the SDK's transport does for such a request is kept: the session's
stamp writes the ``_meta`` envelope and the routing headers (``Mcp-Method``,
``Mcp-Name``, ``Mcp-Param-*``, ``MCP-Protocol-Version``); redirects are
followed only within the endpoint's origin; a JSON-RPC error answered at a
non-2xx status is that error; a 404 without one is ``METHOD_NOT_FOUND``, any
other failed status ``INTERNAL_ERROR``; a ``202`` or an event stream that ends
without the response is a request that will never be answered. The request's
notices on its event stream go to ``notice`` in wire order, before the result.
Each line is proven JSON before it is used (DESIGN I12).

Failures are raised as the SDK path's are, for ``upstream.errors.ErrorTranslator``:
``MCPError`` for an error answer (``PARSE_ERROR`` for a body that is not one
JSON-RPC message), ``httpx2.TransportError`` when the connection fails (the
generation is then lost, as when the SDK's transport fails). Anything else
(the OAuth flow's failure) ends the generation as the SDK transport's failure
would: ``UpstreamNeedsLogin`` when only a person can help (the actor parks),
else ``UpstreamUnavailable``. Cancelling the
caller closes the response stream: the 2026 wire's cancellation.

Concurrency: ``request`` runs in the caller's task and owns nothing else;
calls share the client's connection pool and nothing of this object but its
id counter.
"""

from __future__ import annotations

import itertools
import json
import logging
import ssl
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from typing import Any, Final, Protocol, cast

import httpx2
from mcp import MCPError
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR

from supervisor.compat.sdk import MAX_SSE_EVENT_SIZE, stream_within_origin
from supervisor.errors import UpstreamNeedsLogin, UpstreamUnavailable
from supervisor.telemetry.spans import TELEMETRY, traced_request
from supervisor.upstream.health import TransportHealth
from supervisor.upstream.http1 import Http1Pool
from supervisor.upstream.http1_answer import Answer
from supervisor.wire.codec import to_json
from supervisor.wire.event_stream import EventStreamDecoder, EventTooLarge

logger = logging.getLogger(__name__)

ID_PREFIX: Final = "mcp-supervisor/http/"
"""Our ids for these requests (each POST is its own exchange: they only need to tell answers apart in logs)."""
BASE_HEADERS: Final = {"accept": "application/json, text/event-stream", "content-type": "application/json"}

Notice = Callable[[str, dict[str, Any]], Awaitable[None]]
"""Takes one notification of the request's event stream (method, params), awaited in the calling task."""


class HttpCalls:
    """The raw request path of one 2026-era streamable-HTTP generation (``upstream.connect`` makes it).

    Args:
        server: The server's name (for error texts).
        url: The endpoint.
        health: The generation's; a request that fails past the transport marks it lost.
    """

    def __init__(self, server: str, url: str, health: TransportHealth) -> None:
        self.server = server
        self.url = url
        self._health = health
        self._client: httpx2.AsyncClient | None = None
        self._pool: Http1Pool | None = None
        self._ids = itertools.count(1)
        self.needs_login: Callable[[], UpstreamNeedsLogin | None] | None = None
        """Set for an OAuth server (``upstream.http``): says when only a person can help now."""

    def bind(self, client: httpx2.AsyncClient, tls: ssl.SSLContext | None = None) -> None:
        """The generation's httpx client (``upstream.http`` opens it): configured headers, auth, pool.

        ``tls``: the TLS context the generation built the client with
        (``compat.sdk.create_http_client``). Where httpx would do nothing more
        than send the POST, ``upstream.http1`` sends it instead, on connections
        of its own (``Http1Pool.for_client``). None: a client built elsewhere,
        which sends every POST.
        """
        self._client = client
        self._pool = Http1Pool.for_client(client, self.url, tls) if tls is not None else None

    def close(self) -> None:
        """The generation is over: close the raw connections (httpx closes its own)."""
        if self._pool is not None:
            self._pool.close()

    @property
    def pool(self) -> Http1Pool | None:
        """The raw connections' pool, if the POSTs go that way (tests read it)."""
        return self._pool

    @property
    def ready(self) -> bool:
        return self._client is not None

    async def request(
        self, method: str, params: dict[str, Any], headers: dict[str, str], notice: Notice | None = None
    ) -> dict[str, Any]:
        """POST ``method`` with ``params`` (already stamped) and ``headers`` (the stamp's); the result object.

        Raises:
            MCPError: The server answered with an error, or could not be understood.
            httpx2.TransportError: The connection failed.
            UpstreamUnavailable: Anything else failed the request (the auth flow, say): the generation is lost.
            UpstreamNeedsLogin: The OAuth flow found that only a person can help (the actor parks).
        """
        try:
            return await self._post(method, params, headers, notice)
        except (MCPError, httpx2.TransportError):
            raise
        except Exception as exc:  # as when the SDK's transport fails: the generation ends, and says why
            raise self._lost(method, exc) from exc

    def _lost(self, method: str, exc: Exception) -> UpstreamUnavailable:
        needs_login = self.needs_login() if self.needs_login is not None else None
        if needs_login is not None:
            self._health.mark_needs_login(needs_login)
            return needs_login
        reason = self._health.redact(f"{type(exc).__name__}: {exc}")
        self._health.mark_lost(f"HTTP request failed: {reason}")
        return UpstreamUnavailable(self.server, f"server {self.server!r}: transport failed during {method}: {reason}")

    async def _post(
        self, method: str, params: dict[str, Any], headers: dict[str, str], notice: Notice | None
    ) -> dict[str, Any]:
        assert self._client is not None
        request_id = f"{ID_PREFIX}{next(self._ids)}"
        all_headers = {**BASE_HEADERS, **headers}
        if (
            TELEMETRY.on
        ):  # the current span is the call's CLIENT span (``host.pipeline.stages.TaskTrace``): its context goes on
            params = {**params, "_meta": dict(params.get("_meta") or {})}
            traced_request(params["_meta"], all_headers, request_id)
        body = to_json({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        if self._pool is not None:
            async with self._pool.post(body, all_headers) as answer:
                if answer is not None and not answer.redirected:
                    return await _result(answer, answer.content_type, request_id, _events_of(answer), notice)
            if answer is not None and answer.redirected:  # not processed: httpx sends it, and the next ones
                self._pool.close()
                self._pool = None
        # Not sendable on the raw path (a header it cannot write as is), or redirected: httpx sends it.
        async with stream_within_origin(self._client, "POST", self.url, content=body, headers=all_headers) as response:
            if response.next_request is not None:
                raise MCPError(INVALID_REQUEST, f"redirect to {response.next_request.url} not followed")
            content_type = response.headers.get("content-type", "").lower()
            return await _result(response, content_type, request_id, _httpx_events(response), notice)


class _Reply(Protocol):
    """What ``_result`` reads of an answer: an ``httpx2.Response`` or an ``http1.Answer``."""

    @property
    def status_code(self) -> int: ...

    async def aread(self) -> bytes: ...


Events = AsyncGenerator[tuple[str, str]]
"""An event stream's events (type, data), in order."""


async def _result(
    reply: _Reply, content_type: str, request_id: str, events: Events, notice: Notice | None
) -> dict[str, Any]:
    """The result of the answer to ``request_id``, whichever client read its head."""
    async with aclosing(events):
        status = reply.status_code
        if status == 202:
            raise MCPError(INVALID_REQUEST, "server answered a request with 202 Accepted")
        if status >= 400:
            raise await _failed_status(reply, content_type)
        if content_type.startswith("application/json"):
            return _result_of(await reply.aread(), request_id)
        if content_type.startswith("text/event-stream"):
            return await _result_of_events(events, request_id, notice)
        raise MCPError(INVALID_REQUEST, f"Unexpected content type: {content_type}")


async def _failed_status(response: _Reply, content_type: str) -> MCPError:
    """The error a failed status stands for: the JSON-RPC error in its body, else one its status names."""
    if content_type.startswith("application/json"):
        try:
            message = json.loads(await response.aread())
        except (ValueError, httpx2.StreamError):
            message = None
        error = _error_in(message)
        if error is not None:
            return error
    if response.status_code == 404:
        return MCPError(METHOD_NOT_FOUND, "Not Found")
    return MCPError(INTERNAL_ERROR, "Server returned an error response")


def _result_of(text: bytes | str, request_id: str) -> dict[str, Any]:
    """The result of the response ``text`` to ``request_id``; ``MCPError`` for an error or anything else."""
    try:
        message = json.loads(text)
    except ValueError as exc:
        raise MCPError(PARSE_ERROR, f"Failed to parse JSON response: {exc}") from None
    answer = _answer_in(message, request_id)
    if answer is None:
        raise MCPError(PARSE_ERROR, "Failed to parse JSON response: not the response to this request")
    return answer


def _answer_in(message: Any, request_id: str) -> dict[str, Any] | None:
    """``message``'s result if it answers ``request_id``; ``MCPError`` if it is its error; None: not its answer."""
    if not isinstance(message, dict) or "method" in message or message.get("id") != request_id:
        return None
    error = _error_in(message)
    if error is not None:
        raise error
    result = message.get("result")
    if not isinstance(result, dict):
        raise MCPError(PARSE_ERROR, "Failed to parse JSON response: neither a result nor an error")
    return result


def _error_in(message: Any) -> MCPError | None:
    """The JSON-RPC error ``message`` carries (a code and a message at least), as the ``MCPError`` it stands for."""
    error = message.get("error") if isinstance(message, dict) else None
    if isinstance(error, dict) and isinstance(error.get("code"), int) and isinstance(error.get("message"), str):
        return MCPError(error["code"], error["message"], error.get("data"))
    return None


async def _httpx_events(response: httpx2.Response) -> Events:
    """The events of an httpx response's stream (httpx's ``EventSource``, bounded as the SDK bounds it)."""
    events = cast(
        AsyncGenerator[httpx2.ServerSentEvent], aiter(httpx2.EventSource(response, max_event_size=MAX_SSE_EVENT_SIZE))
    )
    # Closed at once when the answer came (httpx's own iterators beneath it are left to the
    # collector, as the SDK's transport leaves them: the response itself is closed by the caller).
    async with aclosing(events):
        try:
            async for event in events:
                yield event.event, event.data
        except httpx2.SSEError as exc:
            raise MCPError(CONNECTION_CLOSED, f"SSE stream failed: {exc}") from None


async def _events_of(answer: Answer) -> Events:
    """The events of a raw answer's stream (``wire.event_stream``, bounded as the SDK bounds it)."""
    decoder = EventStreamDecoder(MAX_SSE_EVENT_SIZE)
    try:
        while chunk := await answer.next_chunk():
            for event in decoder.feed(chunk):
                yield event
    except EventTooLarge as exc:
        raise MCPError(CONNECTION_CLOSED, f"SSE stream failed: {exc}") from None


async def _result_of_events(events: Events, request_id: str, notice: Notice | None) -> dict[str, Any]:
    """Read the request's event stream: its notices to ``notice``, in order, then its response."""
    async for event, data in events:
        if event != "message" or not data:
            continue  # a priming event (an id to resume from) or another kind of event
        try:
            message = json.loads(data)
        except ValueError as exc:
            raise MCPError(PARSE_ERROR, f"Failed to parse SSE message: {exc}") from None
        if isinstance(message, dict) and isinstance(method := message.get("method"), str):
            params = message.get("params")
            if "id" in message:
                logger.debug("a 2026 request's stream carried a request (%s): ignored", method)
            elif notice is not None and isinstance(params, dict):
                await notice(method, params)
            continue
        answer = _answer_in(message, request_id)
        if answer is not None:
            return answer
    raise MCPError(CONNECTION_CLOSED, "SSE stream ended without a response")
