"""``host.http.answers`` reads a POST's headers as the SDK would: its Accept rule, its routing headers."""

from __future__ import annotations

import pytest
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.inbound import find_duplicated_routing_header
from starlette.requests import Request

from supervisor.host.http.answers import accepts_json_and_events, post_headers

ACCEPTS = [
    "application/json, text/event-stream",
    "text/event-stream,application/json",
    "application/json;q=0.9 , text/event-stream; q=0.5",
    "APPLICATION/JSON, Text/Event-Stream",
    "*/*",
    "application/*, text/*",
    "application/json",
    "text/event-stream",
    "application/*",
    "text/html, application/json",
    "",
    " , ",
    "application/jsonx, text/event-streamy",
    "*/*;q=0.1",
]


@pytest.mark.parametrize("accept", ACCEPTS)
def test_the_accept_rule_is_the_sdks(accept: str) -> None:
    has_json, has_sse = check_accept_headers(Request({"type": "http", "headers": [(b"accept", accept.encode())]}))
    assert accepts_json_and_events(accept.encode()) == (has_json and has_sse)


def test_a_post_without_accept_or_json_content_is_the_sdks_and_the_first_accept_counts() -> None:
    def scope(*headers: tuple[bytes, bytes]) -> dict[str, object]:
        return {"type": "http", "headers": [(b"content-type", b"application/json"), *headers]}

    assert post_headers(scope()) is None  # no Accept: the SDK answers 406
    both = (b"accept", b"application/json, text/event-stream")
    assert post_headers(scope(both)) is not None
    assert post_headers(scope((b"accept", b"text/html"), both)) is None  # starlette's Headers.get: the first
    assert post_headers({"type": "http", "headers": [both, (b"content-type", b"text/plain")]}) is None
    assert accepts_json_and_events(None) is False


ROUTING_CASES = [
    [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "mcp__fx__echo")],
    [("mcp-method", "tools/call"), ("mcp-method", "tools/list")],  # twice: refused by the SDK
    [("mcp-name", "a"), ("x-other", "b"), ("mcp-name", "a")],  # twice, even with the same value
    [("mcp-protocol-version", "2026-07-28"), ("mcp-param-region", "eu"), ("mcp-session-id", "s")],
    [("mcp-name", "caf\u00e9")],  # latin-1, as starlette decodes it
    [],
]


@pytest.mark.parametrize("headers", ROUTING_CASES)
def test_the_routing_headers_are_what_the_sdks_ladder_reads_and_a_duplicate_is_seen(
    headers: list[tuple[str, str]],
) -> None:
    raw = [(b"content-type", b"application/json"), (b"accept", b"*/*")]
    raw += [(name.encode(), value.encode("latin-1")) for name, value in headers]
    read = post_headers({"type": "http", "headers": raw})
    assert read is not None
    decoded = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in raw]
    assert read.duplicated_routing == (find_duplicated_routing_header(decoded) is not None)
    sdk_view = dict(decoded)  # what ``classify_inbound_request`` is given on the SDK's path
    assert read.routing == {
        key: sdk_view[key] for key in ("mcp-protocol-version", "mcp-method", "mcp-name") if key in sdk_view
    }
