"""Tests for supervisor.config.importer: host JSON configs become loadable settings.toml text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from supervisor.config.importer import convert_mcp_servers_json
from supervisor.config.loader import load_settings
from supervisor.config.models import Settings
from supervisor.errors import ConfigError


def convert_and_load(tmp_path: Path, document: Any, environ: dict[str, str] | None = None) -> tuple[str, Settings]:
    toml_text = convert_mcp_servers_json(json.dumps(document), source="claude_desktop_config.json")
    path = tmp_path / "settings.toml"
    path.write_text(toml_text, encoding="utf-8")
    return toml_text, load_settings(path, environ={} if environ is None else environ)


def test_mcp_servers_stdio_entries_round_trip_through_load_settings(tmp_path: Path) -> None:
    document = {
        "mcpServers": {
            "files": {
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-filesystem", 'C:\\Users\\me "docs"'],
                "env": {"LOG_LEVEL": "warn", "odd key": "line1\nline2"},
                "cwd": "/work",
            }
        }
    }
    text, settings = convert_and_load(tmp_path, document)
    assert 'from "claude_desktop_config.json"' in text.splitlines()[0]
    files = settings.mcp_servers["files"]
    assert files.transport == "stdio"
    assert files.command == "npx"
    assert files.args == document["mcpServers"]["files"]["args"]
    assert files.env == {"LOG_LEVEL": "warn", "odd key": "line1\nline2"}
    assert files.cwd == "/work"
    assert files.enabled


def test_http_entries_become_url_and_http_headers_and_sse_entries_the_sse_transport(tmp_path: Path) -> None:
    document = {
        "mcpServers": {
            "search": {"type": "http", "url": "https://search.internal/mcp", "headers": {"X-Team": "agents"}},
            "legacy": {"type": "sse", "url": "https://old.internal/sse"},
            "bare": {"url": "https://bare.internal/mcp"},
        }
    }
    text, settings = convert_and_load(tmp_path, document)
    search = settings.mcp_servers["search"]
    assert search.transport == "http"
    assert search.url == "https://search.internal/mcp"
    assert search.http_headers == {"X-Team": "agents"}
    assert settings.mcp_servers["legacy"].url == "https://old.internal/sse"
    assert settings.mcp_servers["legacy"].http_transport == "sse"
    assert search.http_transport == "streamable_http"
    assert settings.mcp_servers["bare"].transport == "http"
    assert 'transport = "sse"' in text


def test_vscode_servers_and_nested_mcp_servers_are_accepted(tmp_path: Path) -> None:
    entry = {"type": "stdio", "command": "uvx", "args": ["mcp-server-git"]}
    _, top = convert_and_load(tmp_path, {"servers": {"git": entry}})
    _, nested = convert_and_load(tmp_path, {"mcp": {"servers": {"git": entry}}})
    assert top.mcp_servers["git"].command == nested.mcp_servers["git"].command == "uvx"


def test_disabled_entries_are_imported_with_enabled_false(tmp_path: Path) -> None:
    _, settings = convert_and_load(tmp_path, {"mcpServers": {"off": {"command": "x", "disabled": True}}})
    assert settings.mcp_servers["off"].enabled is False


def test_bad_names_are_rewritten_with_a_comment_and_collisions_get_a_suffix(tmp_path: Path) -> None:
    document = {
        "mcpServers": {
            "my server!": {"command": "a"},
            "my-server": {"command": "b"},
            "my server?": {"command": "c"},
            "double__under_": {"command": "d"},
            "x" * 40: {"command": "e"},
        }
    }
    text, settings = convert_and_load(tmp_path, document)
    assert settings.mcp_servers["my-server"].command == "b"  # a valid name keeps its own
    assert settings.mcp_servers["my-server-2"].command == "a"
    assert settings.mcp_servers["my-server-3"].command == "c"
    assert settings.mcp_servers["double_under"].command == "d"
    assert settings.mcp_servers["x" * 32].command == "e"
    assert '# imported from "my server!"' in text
    assert '# imported from "double__under_"' in text


def test_unknown_per_server_keys_are_kept_as_comments(tmp_path: Path) -> None:
    document = {"mcpServers": {"files": {"command": "x", "alwaysAllow": ["read"], "envFile": ".env"}}}
    text, settings = convert_and_load(tmp_path, document)
    assert '# not imported (no equivalent): "alwaysAllow" = ["read"]' in text
    assert '"envFile" = ".env"' in text
    assert settings.mcp_servers["files"].command == "x"


def test_variable_references_keep_their_meaning(tmp_path: Path) -> None:
    args = ["${ROOT}", "${env:HOME}", "${input:api-key}", "price $$9", "${MISSING:-fallback}"]
    document = {"mcpServers": {"files": {"command": "x", "args": args}}}
    _, settings = convert_and_load(tmp_path, document, {"ROOT": "/r", "HOME": "/h"})
    assert settings.mcp_servers["files"].args == ["/r", "/h", "${input:api-key}", "price $$9", "fallback"]


def test_an_empty_server_map_gives_a_loadable_file_saying_so(tmp_path: Path) -> None:
    text, settings = convert_and_load(tmp_path, {"mcpServers": {}})
    assert "no servers to import" in text
    assert settings.mcp_servers == {}


def test_invalid_json_is_a_config_error_saying_what_is_expected() -> None:
    with pytest.raises(ConfigError) as info:
        convert_mcp_servers_json('{"mcpServers": {,}}', source="cfg.json")
    message = str(info.value)
    assert "cfg.json" in message
    assert "not valid JSON" in message
    assert "line 1" in message
    assert '"mcpServers"' in message


@pytest.mark.parametrize("document", [{"other": {}}, [], {"mcpServers": []}, {"mcp": {"servers": 3}}])
def test_a_document_without_a_server_map_is_a_config_error(document: Any) -> None:
    with pytest.raises(ConfigError, match=r"cfg\.json: .*mcpServers"):
        convert_mcp_servers_json(json.dumps(document), source="cfg.json")


@pytest.mark.parametrize(
    ("entry", "fix"),
    [({"args": ["x"]}, "needs a string 'command'"), ({"type": "http"}, "needs a string 'url'"), ("npx", "object")],
)
def test_an_unusable_entry_is_a_config_error_naming_it(entry: Any, fix: str) -> None:
    with pytest.raises(ConfigError) as info:
        convert_mcp_servers_json(json.dumps({"mcpServers": {"broken": entry}}), source="cfg.json")
    assert "mcpServers.broken" in str(info.value)
    assert fix in str(info.value)


@pytest.mark.parametrize(
    ("entry", "where", "why"),
    [
        ({"url": "https://me:hunter2-pw@h/mcp"}, "mcpServers.web.url", "bearer_token_env_var"),
        ({"url": "ws://h/mcp"}, "mcpServers.web.url", "scheme 'ws'"),
        ({"command": "npx\u0000"}, "mcpServers.web.command", "NUL"),
        ({"command": "npx", "args": ["-y", "a\u0000"]}, "mcpServers.web.args[1]", "NUL"),
        ({"command": "npx", "cwd": "/t\u0000"}, "mcpServers.web.cwd", "NUL"),
        ({"command": "npx", "env": {"K": "v\u0000"}}, "mcpServers.web.env.K", "NUL"),
        ({"command": "npx", "env": {"A=B": "v"}}, "mcpServers.web.env.A=B (the name)", "'='"),
    ],
)
def test_a_value_check_would_refuse_is_refused_at_import_naming_the_entry(entry: Any, where: str, why: str) -> None:
    with pytest.raises(ConfigError) as info:
        convert_mcp_servers_json(json.dumps({"mcpServers": {"web": entry}}), source="cfg.json")
    message = str(info.value)
    assert f"cfg.json: {where} " in message
    assert why in message
    assert "hunter2-pw" not in message


def test_a_url_built_from_references_is_left_for_check_to_judge(tmp_path: Path) -> None:
    document = {"mcpServers": {"web": {"url": "https://${input:host}/mcp"}, "env": {"url": "${env:SERVER_URL}"}}}
    text = convert_mcp_servers_json(json.dumps(document), source="cfg.json")
    assert 'url = "https://$${input:host}/mcp"' in text
    assert 'url = "${SERVER_URL}"' in text


def test_a_huge_entry_name_is_cut_in_the_error() -> None:
    with pytest.raises(ConfigError) as info:
        convert_mcp_servers_json(json.dumps({"mcpServers": {"n" * 100_000: "npx"}}), source="cfg.json")
    assert len(str(info.value)) < 300
