"""End to end: a search view over real servers finds the tool for a paraphrase, with and without the extra (issue 48).

The servers are real third-party ones that ``tests/interop/install.sh`` installs: server-filesystem
(node) and mcp-server-git (PyPI). The sidecar is the real ``python -m supervisor run``; the host
calls ``search_tools`` as a model would.

Every wait is for a line of the sidecar's log: both servers ready (each logs it once), then, with
the ``search`` extra (the project's dev install has it), the engine's "semantic index complete"
after the first search asked for the view's vectors: until then the sidecar answers lexically, and
from then on a search is fused. *Without* the extra is
simulated by its settings seam, ``[supervisor.search] semantic = false``: the engine then never
imports the library, exactly as when it is not installed (``tests/catalog/test_semantic.py`` hides the
import itself and checks the message that names the extra).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import pytest
import trio

from tests.interop.test_interop import INSTALL_HINT, INTEROP_DIR
from tests.sidecar import Host, command_server, open_host, scaled, text_of, write_settings

pytestmark = [pytest.mark.e2e]

FS_JS: Final = INTEROP_DIR / "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
GIT_BIN: Final = INTEROP_DIR / ".venv-servers/bin/mcp-server-git"
BOUND_SEC: Final = scaled(60)
PARAPHRASE: Final = "list the files here with how large each one is"
"""Found by words and by meaning: the tool is in the first five either way."""
ONLY_MEANING: Final = "what's in this folder"
"""No word of it is in any tool's text (BM25 finds nothing); the embedding finds the folder's listing."""


def _settings(tmp_path: Path, *, semantic: bool) -> Path:
    for artifact in (FS_JS, GIT_BIN):
        if not artifact.exists():
            pytest.fail(f"{artifact} is missing: {INSTALL_HINT}", pytrace=False)
    servers = {
        "fs": command_server(["node", str(FS_JS), str(tmp_path)], startup_timeout_sec=scaled(30)),
        "git": command_server([str(GIT_BIN)], env={"PYTHONPATH": ""}),
    }
    return write_settings(
        tmp_path,
        servers,
        supervisor={"search": {"semantic": semantic}, "token_store": str(tmp_path / "state")},
        views={"find": {"catalog": "search"}},
    )


async def _search(host: Host, query: str) -> tuple[list[str], str]:
    found = await host.call("search_tools", {"query": query})
    assert not found.is_error, found
    payload: dict[str, Any] = json.loads(text_of(found))
    return [tool["name"] for tool in payload["tools"]], payload["ranking"]


async def _until_both_servers_are_ready(host: Host) -> None:
    for server in ("fs", "git"):
        await host.log.wait_line(rf"server={server} generation=\d+ ready", bound_sec=BOUND_SEC)


async def _until_fused(host: Host) -> None:
    """Ask once, so the engine embeds the view's tools; wait for it to say the index is complete."""
    asked_at = len(host.log.lines)
    assert (await _search(host, PARAPHRASE))[1] == "lexical", "fused before any vector was asked for"
    await host.log.wait_line(r"search: semantic index complete", bound_sec=BOUND_SEC, after=asked_at)


async def test_with_the_extra_a_search_view_finds_a_paraphrase_by_words_and_by_meaning_once_fused(
    tmp_path: Path,
) -> None:
    config = _settings(tmp_path, semantic=True)
    with trio.fail_after(BOUND_SEC):
        async with open_host(config, run_args=["--view", "find"]) as host:
            await _until_both_servers_are_ready(host)
            await _until_fused(host)
            names, ranking = await _search(host, PARAPHRASE)
            assert ranking == "fused"
            assert "mcp__fs__list_directory_with_sizes" in names
            names, _ = await _search(host, ONLY_MEANING)
            assert "mcp__fs__list_directory" in names
    assert list((tmp_path / "state" / "search").glob("*.npz")), "the vectors are kept for the next start"


async def test_without_the_extra_a_search_view_answers_lexically_and_still_finds_the_paraphrase(
    tmp_path: Path,
) -> None:
    config = _settings(tmp_path, semantic=False)
    with trio.fail_after(BOUND_SEC):
        async with open_host(config, run_args=["--view", "find"]) as host:
            await _until_both_servers_are_ready(host)
            names, ranking = await _search(host, PARAPHRASE)
            assert ranking == "lexical"
            assert "mcp__fs__list_directory_with_sizes" in names
            assert (await _search(host, ONLY_MEANING))[0] == [], "words alone find nothing for it"
