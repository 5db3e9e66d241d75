"""What a user does in each client scenario of the official conformance suite: one plan, two clients.

The suite starts a mock server (and for ``auth/*`` an authorization server),
runs the client under test with the server's URL as its last argument and the
scenario's name in ``$MCP_CONFORMANCE_SCENARIO``, then judges what reached the
mock. Both clients of the lane, the sidecar (``tests.conformance.sidecar_client``)
and the reference on the SDK's public API (``tests.conformance.reference_client``),
follow the same plan, so a difference in the table is a difference in the
client, not in what it was asked to do.

A plan is: how the client authenticates (``Login``), then its steps in order. A
step that fails ends the client with a non-zero exit; the suite says whether
that was expected (scenarios that test a refusal allow it).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Final, Literal

LoginKind = Literal["none", "person", "pre_registered", "client_credentials_basic", "client_credentials_jwt"]
CIMD_URL: Final = "https://conformance-test.local/client-metadata.json"
"""The client metadata document both clients present; the suite's servers use it where they support CIMD."""
REDIRECT_URI: Final = "http://localhost:3000/callback"
"""The reference client's redirect (nothing listens: it follows the authorization redirect itself)."""


@dataclass(frozen=True, slots=True)
class ListTools:
    """``tools/list``."""


@dataclass(frozen=True, slots=True)
class CallTool:
    """``tools/call`` of ``name`` (the server's raw name) with ``arguments``."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CallEveryListedTool:
    """Call each tool the client listed, with no arguments (a client that drops invalid tools calls only the valid)."""


@dataclass(frozen=True, slots=True)
class EchoListedSchema:
    """Call ``echo`` with ``{"schema": <the inputSchema the client listed for focal>}`` (schemas kept verbatim)."""

    focal: str
    echo: str


@dataclass(frozen=True, slots=True)
class ResourcesAndPrompts:
    """List resources and read each; list prompts and get each (with no arguments)."""


Step = ListTools | CallTool | CallEveryListedTool | EchoListedSchema | ResourcesAndPrompts


@dataclass(frozen=True, slots=True)
class Plan:
    """How the client authenticates, then what it does."""

    login: LoginKind
    steps: tuple[Step, ...]
    needs_host: bool = False
    """The scenario asks the client something mid-call (elicitation, an input round): the sidecar runs as ``run``."""


@dataclass(frozen=True, slots=True)
class OutOfReach:
    """A scenario neither client is built for: shown in the table, never a failure."""

    why: str


AUTH_STEPS: Final = (ListTools(), CallTool("test-tool"))
PERSON: Final = Plan("person", AUTH_STEPS)

PLANS: Final[dict[str, Plan | OutOfReach]] = {
    "initialize": Plan("none", (ListTools(),)),
    "tools_call": Plan("none", (ListTools(), CallTool("add_numbers", {"a": 5, "b": 3}))),
    "tools-call": Plan("none", (ListTools(), CallTool("add_numbers", {"a": 5, "b": 3}))),
    "sse-retry": Plan("none", (ListTools(), CallTool("test_reconnection"))),
    "elicitation-sep1034-client-defaults": Plan(
        "none", (ListTools(), CallTool("test_client_elicitation_defaults")), needs_host=True
    ),
    "request-metadata": Plan("none", (ListTools(),)),
    "json-schema-ref-no-deref": Plan("none", (ListTools(),)),
    "json-schema-2020-12-preservation": Plan(
        "none", (ListTools(), EchoListedSchema("json_schema_2020_12_tool", "json_schema_echo"))
    ),
    "http-standard-headers": Plan("none", (ListTools(), CallEveryListedTool(), ResourcesAndPrompts()), needs_host=True),
    "http-custom-headers": Plan("none", (ListTools(),)),  # the calls come from the scenario's context
    "http-invalid-tool-headers": Plan("none", (ListTools(), CallEveryListedTool())),
    "sep-2322-client-request-state": Plan(
        "none",
        (
            ListTools(),
            CallTool("test_mrtr_echo_state"),
            CallTool("test_mrtr_unrelated"),
            CallTool("test_mrtr_no_state"),
            CallTool("test_mrtr_no_result_type"),
        ),
        needs_host=True,
    ),
    "auth/pre-registration": Plan("pre_registered", (ListTools(),)),
    "auth/client-credentials-basic": Plan("client_credentials_basic", (ListTools(),)),
    "auth/client-credentials-jwt": Plan("client_credentials_jwt", (ListTools(),)),
    "auth/dpop": OutOfReach("DPoP-bound tokens (SEP-1932): neither client sends DPoP proofs"),
    "auth/dpop-nonce": OutOfReach("DPoP-bound tokens (SEP-1932): neither client sends DPoP proofs"),
    "auth/wif-jwt-bearer": OutOfReach("workload identity (a JWT-bearer assertion grant): no setting for it"),
    "auth/enterprise-managed-authorization": OutOfReach("SEP-990 enterprise-managed authorization (ID-JAG)"),
    "auth/cross-app-access-complete-flow": OutOfReach("SEP-990 cross-app access (ID-JAG)"),
}


def plan_of(scenario: str) -> Plan | OutOfReach:
    """The plan for ``scenario``; every other ``auth/*`` scenario is a person's login, a listing and a call."""
    if scenario in PLANS:
        return PLANS[scenario]
    if scenario.startswith("auth/"):
        return PERSON
    return OutOfReach(f"no plan for {scenario!r} (a new scenario of the suite: add one to tests/conformance/plans.py)")


def context_tool_calls() -> list[CallTool]:
    """The ``toolCalls`` a scenario hands the client in ``$MCP_CONFORMANCE_CONTEXT`` (``http-custom-headers``)."""
    context = scenario_context()
    return [CallTool(str(call["name"]), dict(call.get("arguments", {}))) for call in context.get("toolCalls", [])]


def scenario_context() -> dict[str, Any]:
    """``$MCP_CONFORMANCE_CONTEXT``, parsed (empty when the scenario gives none)."""
    raw = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    return dict(json.loads(raw)) if raw else {}


def steps_of(plan: Plan) -> tuple[Step, ...]:
    """The plan's steps, with the calls the scenario's context names appended."""
    return (*plan.steps, *context_tool_calls())
