"""The single-value checks and redactions of ``supervisor.config.values`` and the transport's own redaction."""

from __future__ import annotations

import pytest

from supervisor.config.values import header_problem, redact_url, url_query_values
from supervisor.upstream.errors import connect_error
from supervisor.upstream.health import TransportHealth


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://h/mcp", "https://h/mcp"),
        ("https://h/mcp?key=abc", "https://h/mcp?key=***"),
        ("https://h/mcp?key=abc&flag&x=1#frag", "https://h/mcp?key=***&flag&x=***"),
        ("https://h/mcp#frag", "https://h/mcp"),
    ],
)
def test_redact_url_masks_every_query_value_and_drops_the_fragment(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_url_query_values_lists_the_non_empty_values() -> None:
    assert url_query_values("https://h/mcp?key=abc&flag&empty=&x=1") == ["abc", "1"]


def test_header_problem_accepts_an_ordinary_header() -> None:
    assert header_problem("X-Api-Key", "abc def") is None


def test_a_lost_transport_reason_never_shows_a_configured_secret() -> None:
    health = TransportHealth(secrets=("query-secret",))
    health.mark_lost("HTTP transport error: Client error '404' for url 'https://h/mcp?key=query-secret'")
    assert "query-secret" not in health.reason
    assert "key=***" in health.reason


def test_a_failed_handshake_never_shows_a_configured_secret() -> None:
    health = TransportHealth(secrets=("query-secret",))
    error = connect_error("web", health, OSError("cannot reach https://h/mcp?key=query-secret"))
    assert "query-secret" not in str(error)
    assert "server 'web'" in str(error)
