"""The conformance lane's reference client: what the mcp SDK's public API does with each plan.

``python -m tests.conformance.reference_client URL`` (the suite appends the URL
and sets ``$MCP_CONFORMANCE_SCENARIO``). It follows ``tests.conformance.plans``
with ``mcp.Client`` over ``streamable_http_client`` and the SDK's own OAuth
providers (``OAuthClientProvider``; the client-credentials and
``private_key_jwt`` extensions), configured as their docstrings show. The
person's browser is ``Browser``: it takes the authorization URL and reads the
code off the redirect without following it (nothing listens on the redirect
URI). Exits 0 when every step succeeded, 1 otherwise (the suite judges whether
a failure was the point).

Concurrency: one ``trio.run``; the whole client is bounded by ``CLIENT_BOUND_SEC``.
"""

from __future__ import annotations

import sys
from typing import Final
from urllib.parse import parse_qs, urlsplit

import httpx2
import trio
from mcp import Client
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from mcp_types import Implementation
from pydantic import AnyUrl

from tests.conformance.plans import CIMD_URL, REDIRECT_URI, OutOfReach, Plan, plan_of, scenario_context, steps_of
from tests.conformance.steps import elicit, run_steps

CLIENT_BOUND_SEC: Final = 120.0
"""Longer than the suite's own timeout for a client: the suite kills it first."""
CLIENT_INFO: Final = Implementation(name="conformance-reference-client", version="1.0.0")


class MemoryStorage(TokenStorage):
    """Tokens and the client record, for this one run."""

    def __init__(self, client: OAuthClientInformationFull | None = None) -> None:
        self.tokens: OAuthToken | None = None
        self.client = client

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Browser:
    """The person: opens the authorization URL, and the authorization server's redirect carries the code."""

    def __init__(self) -> None:
        self._result: AuthorizationCodeResult | None = None

    async def open(self, authorization_url: str) -> None:
        async with httpx2.AsyncClient() as http:
            response = await http.get(authorization_url)
        location = response.headers.get("location")
        if not response.is_redirect or location is None:
            raise RuntimeError(f"the authorization endpoint answered {response.status_code}, not a redirect")
        query = parse_qs(urlsplit(location).query)
        if "code" not in query:
            raise RuntimeError(f"the authorization redirect carries no code: {location}")
        self._result = AuthorizationCodeResult(
            code=query["code"][0],
            state=query.get("state", [None])[0],
            iss=query.get("iss", [None])[0],
        )

    async def redirected(self) -> AuthorizationCodeResult:
        if self._result is None:
            raise RuntimeError("no authorization redirect was seen")
        result, self._result = self._result, None
        return result


def auth_of(plan: Plan, url: str) -> httpx2.Auth | None:
    """The SDK provider the plan's login calls for (None: no authorization)."""
    context = scenario_context()
    match plan.login:
        case "none":
            return None
        case "client_credentials_basic":
            return ClientCredentialsOAuthProvider(
                url, MemoryStorage(), context["client_id"], context["client_secret"], "client_secret_basic"
            )
        case "client_credentials_jwt":
            signer = SignedJWTParameters(
                issuer=context["client_id"],
                subject=context["client_id"],
                signing_key=context["private_key_pem"],
                signing_algorithm=context.get("signing_algorithm", "ES256"),
            )
            return PrivateKeyJWTOAuthProvider(
                url, MemoryStorage(), context["client_id"], signer.create_assertion_provider()
            )
        case "person" | "pre_registered":
            stored = None
            if plan.login == "pre_registered":
                stored = OAuthClientInformationFull(
                    client_id=context["client_id"],
                    client_secret=context["client_secret"],
                    redirect_uris=[AnyUrl(REDIRECT_URI)],
                    # The SDK sends a secret only the way the record names; RFC 8414's default.
                    token_endpoint_auth_method="client_secret_basic",
                )
            browser = Browser()
            return OAuthClientProvider(
                server_url=url,
                client_metadata=OAuthClientMetadata(
                    client_name="conformance-reference-client",
                    redirect_uris=[AnyUrl(REDIRECT_URI)],
                    grant_types=["authorization_code", "refresh_token"],
                    response_types=["code"],
                ),
                storage=MemoryStorage(stored),
                redirect_handler=browser.open,
                callback_handler=browser.redirected,
                client_metadata_url=CIMD_URL,
            )


async def main(url: str, scenario: str) -> int:
    plan = plan_of(scenario)
    if isinstance(plan, OutOfReach):
        print(f"out of reach: {plan.why}", file=sys.stderr)
        return 1
    with trio.fail_after(CLIENT_BOUND_SEC):
        async with (
            httpx2.AsyncClient(auth=auth_of(plan, url), timeout=httpx2.Timeout(30.0, read=60.0)) as http,
            Client(
                streamable_http_client(url, http_client=http), client_info=CLIENT_INFO, elicitation_callback=elicit
            ) as client,
        ):
            await run_steps(client, steps_of(plan), public=lambda name: name)
    return 0


if __name__ == "__main__":
    import os

    sys.exit(trio.run(main, sys.argv[-1], os.environ["MCP_CONFORMANCE_SCENARIO"]))
