"""How one upstream request's failures translate (``upstream.errors.ErrorTranslator``)."""

from __future__ import annotations

import pytest
from mcp import MCPError
from mcp_types import INVALID_PARAMS, PARSE_ERROR

from supervisor.errors import UpstreamProtocolError
from supervisor.upstream.errors import ErrorTranslator
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
