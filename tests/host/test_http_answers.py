"""``host.http_answers.accepts_json_and_events`` is the SDK's ``check_accept_headers`` rule on the raw value."""

from __future__ import annotations

import pytest
from mcp.server.streamable_http import check_accept_headers
from starlette.requests import Request

from supervisor.host.http_answers import accepts_json_and_events, post_headers

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
