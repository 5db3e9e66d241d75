"""The command line (DESIGN §3.1), run as ``python -m supervisor`` subprocesses.

Every run is bounded (``run_cli`` applies ``trio.fail_after``); the upstream
servers are real fixture server processes, or the bundled demo servers.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
import trio

from tests.sidecar import REPO_ROOT, fixture_server, open_host, run_cli, text_of, write_settings

pytestmark = pytest.mark.e2e

BOUND_SEC = 30
SECRET = "s3cr3t-token-value"


def _one_server(tmp_path: Path) -> Path:
    return write_settings(tmp_path, {"a": fixture_server("--tools", "echo,add", env={"API_KEY": SECRET})})


async def test_check_prints_resolved_settings_with_secrets_masked(tmp_path: Path) -> None:
    config = _one_server(tmp_path)
    result = await run_cli("check", "--config", str(config))
    assert result.code == 0, result.stderr
    assert "a" in result.stdout
    assert "API_KEY" in result.stdout
    assert SECRET not in result.stdout + result.stderr
    assert "***" in result.stdout


async def test_check_rejects_a_bad_config_with_exit_2_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[mcp_servers.a]\ncommand = "x"\ncomand_typo = "y"\n', encoding="utf-8")
    result = await run_cli("check", "--config", str(config))
    assert result.code == 2
    assert "comand_typo" in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


async def test_tools_prints_the_namespaced_catalog_as_text_and_json(tmp_path: Path) -> None:
    config = _one_server(tmp_path)
    with trio.fail_after(BOUND_SEC):
        text = await run_cli("tools", "--config", str(config))
        as_json = await run_cli("tools", "--config", str(config), "--json")
    assert text.code == 0, text.stderr
    assert "mcp__a__echo" in text.stdout
    assert "mcp__a__add" in text.stdout
    assert as_json.code == 0, as_json.stderr
    catalog = json.loads(as_json.stdout)
    assert sorted(tool["name"] for tool in catalog["tools"]) == ["mcp__a__add", "mcp__a__echo"]
    assert [(s["name"], s["state"]) for s in catalog["servers"]] == [("a", "ready")]


async def test_call_prints_the_result_and_an_unknown_tool_exits_1(tmp_path: Path) -> None:
    config = _one_server(tmp_path)
    with trio.fail_after(BOUND_SEC):
        ok = await run_cli("call", "mcp__a__echo", '{"text":"hi"}', "--config", str(config))
        unknown = await run_cli("call", "mcp__a__nope", "{}", "--config", str(config))
    assert ok.code == 0, ok.stderr
    result = json.loads(ok.stdout)
    assert result["content"][0]["text"] == "hi"
    assert unknown.code == 1
    assert "mcp__a__nope" in unknown.stderr
    assert "Traceback" not in unknown.stderr


async def test_import_converts_an_mcp_json_into_toml_that_check_accepts(tmp_path: Path) -> None:
    source = tmp_path / ".mcp.json"
    source.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
                    "search": {"type": "http", "url": "https://search.example/mcp"},
                }
            }
        ),
        encoding="utf-8",
    )
    with trio.fail_after(BOUND_SEC):
        imported = await run_cli("import", str(source))
        assert imported.code == 0, imported.stderr
        converted = tmp_path / "imported.toml"
        converted.write_text(imported.stdout, encoding="utf-8")
        assert set(tomllib.loads(imported.stdout)["mcp_servers"]) == {"files", "search"}
        checked = await run_cli("check", "--config", str(converted))
    assert checked.code == 0, checked.stderr
    assert "files" in checked.stdout
    assert "search" in checked.stdout


async def test_run_serves_the_bundled_demo_settings_offline() -> None:
    # The bundled settings set no [supervisor.names]: the default names, <server>__<tool>.
    with trio.fail_after(BOUND_SEC):
        async with open_host(REPO_ROOT / "settings.toml") as host:
            names = await host.wait_tools(lambda names: "demo__echo" in names)
            assert "clock__now" in names
            assert text_of(await host.call("demo__echo", {"text": "offline"})) == "offline"
        assert host.exit_code == 0


# One case per validation gap of issue 9: `check` exits 2 with one message naming the key.
HUGE_NAME = "n" * 100_000
BAD_CONFIGS = {
    "ftp-url": ('[mcp_servers.web]\nurl = "ftp://files.internal/mcp"\n', "mcp_servers.web.url"),
    "not-a-url": ('[mcp_servers.web]\nurl = "not a url"\n', "mcp_servers.web.url"),
    "password-in-url": ('[mcp_servers.web]\nurl = "https://me:hunter2-pw@h/mcp"\n', "bearer_token_env_var"),
    "nested-10000-deep": ("x = " + "[" * 10_000 + "]" * 10_000 + "\n", "nested too deeply"),
    "infinite-grace": ("[supervisor]\nshutdown_grace_sec = inf\n", "supervisor.shutdown_grace_sec"),
    "nan-timeout": ("[defaults]\ntool_timeout_sec = nan\n", "defaults.tool_timeout_sec"),
    "nul-in-args": ('[mcp_servers.a]\ncommand = "x"\nargs = ["a\\u0000b"]\n', "mcp_servers.a.args[0]"),
    "huge-server-name": (f'[mcp_servers."{HUGE_NAME}"]\ncommand = "x"\n', "invalid server name"),
}


@pytest.mark.parametrize(("text", "key"), BAD_CONFIGS.values(), ids=BAD_CONFIGS.keys())
async def test_check_refuses_each_unusable_value_with_one_short_message(tmp_path: Path, text: str, key: str) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(text, encoding="utf-8")
    result = await run_cli("check", "--config", str(config))
    assert result.code == 2, result.stderr[:2000]
    assert result.stdout == ""
    assert key in result.stderr
    assert result.stderr.count("\n") == 1  # one message, one line
    assert result.stderr.startswith("mcp-supervisor: configuration error: ")
    assert len(result.stderr) < 600
    assert "hunter2-pw" not in result.stderr


async def test_check_accepts_a_file_that_starts_with_a_bom(tmp_path: Path) -> None:
    config = tmp_path / "bom.toml"
    config.write_bytes(b'\xef\xbb\xbf[supervisor]\nprincipal = "with-bom"\n')
    result = await run_cli("check", "--config", str(config))
    assert result.code == 0, result.stderr
    assert "principal = with-bom" in result.stdout
