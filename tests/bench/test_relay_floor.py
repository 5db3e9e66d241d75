"""The relays that are p2's floors (``bench.relay_floor``, issue 11): what each lets through, and in what shape.

The figures of ``bench.large_ratio`` mean something only if the relays do what
they say: the bare one copies bytes, the checked one drops a line that is not
JSON before any of it goes on, the one ahead ends such a line so no parser
takes it, and all of them carry a real MCP exchange.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import trio

from bench.call_path import LARGE_TEXT, RELAY_MODES, _argv, tool_of
from bench.harness import open_host
from bench.relay_floor import UNPARSEABLE_END
from tests.sidecar import REPO_ROOT, scaled, text_of

BOUND_SEC = scaled(30.0)
GOOD = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"%s"}}'
BAD = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"\xff"}}'
"""Not UTF-8 in a string: what a proof must refuse."""

pytestmark = pytest.mark.e2e


def _relayed(mode: list[str], upstream_writes: bytes, tmp_path: Path) -> bytes:
    """What a host reads through the relay in ``mode`` from a child that writes ``upstream_writes`` and waits."""
    writes = tmp_path / "writes"
    writes.write_bytes(upstream_writes)
    child = f"import sys; sys.stdout.buffer.write(open({str(writes)!r}, 'rb').read()); sys.stdout.flush(); input()"
    done = subprocess.run(
        [sys.executable, "-m", "bench.relay_floor", *mode, "--", sys.executable, "-c", child],
        input=b"\n",
        capture_output=True,
        cwd=REPO_ROOT,
        timeout=BOUND_SEC,
        check=True,
    )
    return done.stdout


@pytest.mark.parametrize("big", [False, True], ids=["small", "1MB"])
def test_the_checked_relay_drops_a_line_that_is_not_json_and_passes_the_rest_whole(big: bool, tmp_path: Path) -> None:
    good = GOOD % (b"x" * (1_000_000 if big else 1))
    relayed = _relayed(["--check"], good + b"\n" + BAD + b"\n" + good + b"\n", tmp_path)
    assert relayed == good + b"\n" + good + b"\n"
    assert _relayed(["--check"], BAD + b"\n", tmp_path) == b""


def test_the_bare_relay_copies_every_byte(tmp_path: Path) -> None:
    writes = GOOD % b"x" + b"\n" + BAD + b"\n" + b"no newline yet"
    assert _relayed([], writes, tmp_path) == writes


def test_the_relay_ahead_ends_a_line_it_could_not_prove_with_a_byte_no_parser_takes(tmp_path: Path) -> None:
    good = GOOD % b"x"
    assert _relayed(["--ahead"], good + b"\n", tmp_path) == good + b"\n"
    assert _relayed(["--ahead"], BAD + b"\n", tmp_path) == BAD + UNPARSEABLE_END


async def test_each_relay_carries_a_1mb_echo_call_between_a_real_client_and_the_fixture(tmp_path: Path) -> None:
    echoed: dict[str, str] = {}

    async def call_through(variant: str) -> None:
        async with open_host(_argv(variant, tmp_path, tmp_path / f"{variant}.jsonl"), mode="auto") as host:
            echoed[variant] = text_of(await host.session.call_tool(tool_of(variant), {"text": LARGE_TEXT}))

    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            for variant in RELAY_MODES:
                nursery.start_soon(call_through, variant)
    assert echoed == dict.fromkeys(RELAY_MODES, LARGE_TEXT)
