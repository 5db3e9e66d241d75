"""Tokens bound to views (issue 26, item 2): the HTTP guard opens a view's path only to its tokens (I16)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import SecretStr

from supervisor.host.http.link import view_path
from supervisor.ops.http import HttpGuard

PATHS = {view_path(""), view_path("code"), view_path("docs")}


async def _app(scope: Any, receive: Any, send: Any) -> None:  # never reached by _check
    raise AssertionError("the guard's check does not call the app")


def _guard(*, all_views: str | None = "admin") -> HttpGuard:
    return HttpGuard(
        _app,
        token=SecretStr(all_views) if all_views is not None else None,
        scoped_tokens=[
            (SecretStr("code-token"), frozenset({view_path("code")})),
            (SecretStr("docs-token"), frozenset({view_path("docs")})),
        ],
        names={"127.0.0.1"},
        paths=PATHS,
        max_body_bytes=1024,
    )


def _scope(path: str, token: str | None) -> dict[str, Any]:
    headers = [(b"host", b"127.0.0.1:1")]
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    return {"type": "http", "method": "POST", "path": path, "headers": headers}


@pytest.mark.parametrize(
    ("token", "path", "status"),
    [
        ("code-token", "/mcp/code", None),
        ("code-token", "/mcp/docs", 403),
        ("code-token", "/mcp", 403),
        ("code-token", "/mcp/nope", 403),
        ("docs-token", "/mcp/docs", None),
        ("docs-token", "/mcp/code", 403),
        ("admin", "/mcp", None),
        ("admin", "/mcp/code", None),
        ("admin", "/mcp/docs", None),
        ("wrong", "/mcp/code", 401),
        (None, "/mcp/code", 401),
        ("admin", "/mcp/nope", 404),
    ],
)
def test_I16_a_token_opens_only_its_views(token: str | None, path: str, status: int | None) -> None:
    refused = _guard()._check(_scope(path, token))
    assert (refused[0] if refused else None) == status


def test_view_tokens_alone_still_refuse_a_host_without_one() -> None:
    guard = _guard(all_views=None)
    assert guard._check(_scope("/mcp/code", "code-token")) is None
    refused = guard._check(_scope("/mcp/code", None))
    assert refused is not None and refused[0] == 401
    refused = guard._check(_scope("/mcp", "code-token"))
    assert refused is not None and refused[0] == 403


def test_the_guard_reads_the_first_of_each_header_and_keeps_each_hosts_verdict() -> None:
    guard = _guard()
    path = view_path("")
    admin = (b"authorization", b"Bearer admin")

    def status(*headers: tuple[bytes, bytes]) -> int | None:
        refused = guard._check({"type": "http", "method": "POST", "path": path, "headers": list(headers)})
        return None if refused is None else refused[0]

    assert status((b"host", b"127.0.0.1:1"), admin) is None
    assert status((b"host", b"evil.example"), admin) == 421
    assert status((b"host", b"127.0.0.1:1"), admin) is None  # each verdict kept, none mixed up
    assert status((b"host", b"evil.example"), (b"host", b"127.0.0.1:1"), admin) == 421  # the first Host counts
    assert status(admin) == 421  # no Host at all
    assert status((b"host", b"127.0.0.1"), (b"authorization", b"Bearer wrong"), admin) == 401  # the first token
    assert status((b"host", b"127.0.0.1"), (b"origin", b"http://evil.example"), admin) == 403
    assert status((b"host", b"127.0.0.1"), admin, (b"content-length", b"2048")) == 413


@pytest.mark.parametrize(
    ("authorization", "path", "status"),
    [
        (b"Bearer admin", "/mcp", None),
        (b"bearer admin", "/mcp", None),
        (b"BEARER  admin", "/mcp", None),  # 1*SP after the scheme (RFC 9110 11.4)
        (b"bEaReR code-token", "/mcp/code", None),
        (b"bearer code-token", "/mcp/docs", 403),
        (b"bearer Admin", "/mcp", 401),  # the token itself is compared as it is
        (b"bearer", "/mcp", 401),
        (b"Basic admin", "/mcp", 401),
        (b"bearerx admin", "/mcp", 401),
    ],
)
def test_the_bearer_scheme_is_case_insensitive_and_the_token_is_not(
    authorization: bytes, path: str, status: int | None
) -> None:
    headers = [(b"host", b"127.0.0.1:1"), (b"authorization", authorization)]
    refused = _guard()._check({"type": "http", "method": "POST", "path": path, "headers": headers})
    assert (refused[0] if refused else None) == status
