"""The quick commands stay quick: which heavy packages each CLI path imports (issue 8).

``check`` must not import the ``mcp`` SDK or trio (about a second at start-up),
nor pydantic-settings (0.2 s) unless an override variable asks for it;
``--help``, ``--version`` and ``import`` must not even import pydantic. Each
case runs the CLI in a fresh interpreter and reports ``sys.modules``: a test of
what is imported, not of how long it takes (timings belong in reports).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import trio

from tests.sidecar import REPO_ROOT, sidecar_env

pytestmark = pytest.mark.e2e  # every test here starts a process

BOUND_SEC = 30
HEAVY = ("mcp", "mcp_types", "trio", "anyio", "httpx", "pydantic", "pydantic_settings", "hypercorn")
# Runs main(argv) in-process, then prints which HEAVY packages got imported, as the last stdout line.
PROBE = (
    "import json, sys\n"
    "from supervisor.cli import main\n"
    "argv = json.loads(sys.argv[1])\n"
    "code = main(argv)\n"
    f"print(json.dumps({{'code': code, 'imported': [m for m in {HEAVY!r} if m in sys.modules]}}))\n"
)


async def imported_by(*argv: str, env: dict[str, str] | None = None) -> tuple[int, set[str]]:
    with trio.fail_after(BOUND_SEC):
        done = await trio.run_process(
            [sys.executable, "-c", PROBE, json.dumps(argv)],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=str(REPO_ROOT),
            env=sidecar_env(env),
        )
    assert done.returncode == 0, done.stderr.decode()
    report = json.loads(done.stdout.decode().splitlines()[-1])
    return report["code"], set(report["imported"])


async def test_check_imports_neither_the_sdk_nor_trio() -> None:
    # MCP_SUPERVISOR_TOKEN (and the tests' own MCP_SUPERVISOR_TEST_MARK) are not overrides.
    env = {"MCP_SUPERVISOR_TOKEN": "t", "MCP_SUPERVISOR_CONFIG": str(REPO_ROOT / "settings.toml")}
    code, imported = await imported_by("check", env=env)
    assert code == 0
    assert imported == {"pydantic"}


async def test_an_override_variable_brings_in_pydantic_settings_to_read_it() -> None:
    env = {"MCP_SUPERVISOR_SUPERVISOR__LOG_LEVEL": "debug"}
    code, imported = await imported_by("check", "--config", str(REPO_ROOT / "settings.toml"), env=env)
    assert code == 0
    assert imported == {"pydantic", "pydantic_settings"}


async def test_a_refused_config_is_reported_without_importing_the_sdk(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[mcp_servers.web]\nurl = "ftp://h/mcp"\n', encoding="utf-8")
    code, imported = await imported_by("check", "--config", str(config))
    assert code == 2
    assert imported == {"pydantic"}


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["check", "--help"], ["import", "IMPORT_FILE"]])
async def test_help_version_and_import_import_no_heavy_package(tmp_path: Path, argv: list[str]) -> None:
    source = tmp_path / "mcp.json"
    source.write_text('{"mcpServers": {"a": {"command": "x"}}}', encoding="utf-8")
    code, imported = await imported_by(*[str(source) if arg == "IMPORT_FILE" else arg for arg in argv])
    assert code == 0
    assert imported == set()


async def test_status_of_an_unreachable_sidecar_imports_neither_the_sdk_nor_trio() -> None:
    code, imported = await imported_by("status", "--admin-url", "http://127.0.0.1:9")
    assert code == 1
    assert not imported & {"mcp", "mcp_types", "trio", "anyio"}
