"""The estimator behind ``tools --tokens``: the JSON a host of each era receives, in bytes / 4."""

from __future__ import annotations

import json

import mcp_types as types

from supervisor.catalog.token_estimate import BYTES_PER_TOKEN, estimate_tokens, listing_json

TOOL = types.Tool(
    name="read",
    description="Read a file.",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
    execution=types.ToolExecution(task_support="optional"),
)


def test_a_2026_host_gets_no_execution_and_a_handshake_host_does_so_their_estimates_differ() -> None:
    modern = json.loads(listing_json([TOOL]))["tools"][0]
    handshake = json.loads(listing_json([TOOL], "2025-11-25"))["tools"][0]
    assert "execution" not in modern
    assert handshake["execution"] == {"taskSupport": "optional"}
    assert estimate_tokens([TOOL], "2025-11-25") > estimate_tokens([TOOL])


def test_the_estimate_is_the_compact_json_in_utf8_bytes_over_four_rounded_up() -> None:
    text = listing_json([TOOL])
    assert " " not in text.replace("Read a file.", "")
    assert estimate_tokens([TOOL]) == -(-len(text.encode()) // int(BYTES_PER_TOKEN))
