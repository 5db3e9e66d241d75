"""How one upstream request's failures translate (``upstream.errors``), and a handshake's and a teardown's."""

from __future__ import annotations

from contextlib import AsyncExitStack

import pytest
import trio
from mcp import MCPError
from mcp_types import CONNECTION_CLOSED, INVALID_PARAMS, PARSE_ERROR

from supervisor.errors import UpstreamProtocolError, UpstreamUnavailable
from supervisor.upstream.errors import ErrorTranslator, enter_client, teardown_error
from supervisor.upstream.health import TransportHealth


def _translator(*, passthrough: bool) -> ErrorTranslator:
    return ErrorTranslator("web", "tools/call ndjson", TransportHealth(), passthrough)


def test_a_servers_json_rpc_error_passes_through_where_asked() -> None:
    with pytest.raises(MCPError) as caught, _translator(passthrough=True):
        raise MCPError(INVALID_PARAMS, "Unknown tool: ndjson")
    assert caught.value.code == INVALID_PARAMS


@pytest.mark.parametrize("passthrough", [True, False])
def test_a_parse_error_is_the_servers_protocol_error_never_passed_to_the_host(passthrough: bool) -> None:
    with pytest.raises(UpstreamProtocolError) as caught, _translator(passthrough=passthrough):
        raise MCPError(PARSE_ERROR, "Failed to parse JSON response: trailing characters")
    assert str(caught.value) == (
        "server 'web': tools/call ndjson: the answer could not be parsed "
        "(Failed to parse JSON response: trailing characters)"
    )


class _HandshakeThatFailsWhenStopped:
    """A client whose transport fails (its pipes close) at the moment its handshake is cancelled."""

    async def __aenter__(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep_forever)  # the transport's reader: cancelled too
            try:
                await trio.sleep_forever()  # the handshake, waiting for the server
            finally:
                raise MCPError(CONNECTION_CLOSED, "Connection closed")

    async def __aexit__(self, *exc: object) -> None:
        return None


async def test_a_stop_that_meets_a_failing_handshake_stays_a_stop_and_never_escapes_its_scope() -> None:
    with trio.CancelScope() as scope:
        async with AsyncExitStack() as stack:
            nursery_started = trio.Event()

            async def cancel_soon() -> None:
                await nursery_started.wait()
                scope.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel_soon)
                nursery_started.set()
                await enter_client(stack, _HandshakeThatFailsWhenStopped(), "a", TransportHealth())
    assert scope.cancelled_caught


async def test_a_handshake_that_fails_on_its_own_is_the_servers_unavailability() -> None:
    class Closed:
        async def __aenter__(self) -> None:
            raise MCPError(CONNECTION_CLOSED, "Connection closed")

        async def __aexit__(self, *exc: object) -> None:
            return None

    with pytest.raises(UpstreamUnavailable, match="server 'a' failed during the handshake"):
        async with AsyncExitStack() as stack:
            await enter_client(stack, Closed(), "a", TransportHealth())


async def _raised_in_a_stopped_scope(*failures: Exception, body_failed: bool, health: TransportHealth) -> bool:
    """Leave a generation being stopped whose client raised ``failures`` with the stop; whether its scope took it."""
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            await trio.sleep_forever()
        except trio.Cancelled as cancelled:
            error = teardown_error(BaseExceptionGroup("client exit", [cancelled, *failures]), "a", health, body_failed)
            assert error is not None
            raise error from None
    return scope.cancelled_caught


@pytest.mark.parametrize(
    ("failures", "lost"),
    [
        pytest.param([MCPError(CONNECTION_CLOSED, "Connection closed")], False, id="a failure that is no teardown"),
        pytest.param([OSError("pipe closed")], True, id="a transport failure"),
        pytest.param([OSError("pipe closed"), RuntimeError("and a surprise")], True, id="both"),
    ],
)
async def test_a_stop_that_meets_a_failing_teardown_stays_a_stop_and_never_escapes_its_scope(
    failures: list[Exception], lost: bool
) -> None:
    health = TransportHealth()
    assert await _raised_in_a_stopped_scope(*failures, body_failed=True, health=health)
    assert health.lost.is_set() is lost


def test_a_teardown_that_fails_on_its_own_is_the_transports_failure_only_when_it_cut_the_generation_short() -> None:
    health = TransportHealth()
    cut_short = teardown_error(OSError("pipe closed"), "a", health, body_failed=True)
    assert isinstance(cut_short, UpstreamUnavailable) and str(cut_short) == "server 'a': transport failed: pipe closed"
    assert health.lost.is_set()
    assert teardown_error(OSError("pipe closed"), "a", TransportHealth(), body_failed=False) is None
    surprise = RuntimeError("not a transport's")
    assert teardown_error(surprise, "a", TransportHealth(), body_failed=True) is surprise
