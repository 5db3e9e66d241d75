"""Run the real Claude Code (pinned in ``tests/hosts/package-lock.json``) against the model stand-in, offline.

``run_claude`` starts ``claude -p PROMPT`` with the sidecar as its one MCP server and waits for it to finish:

* **Isolated.** ``HOME`` and ``CLAUDE_CONFIG_DIR`` are the test's own directory; the sidecar comes from an
  ``--mcp-config`` file the test writes, and ``--strict-mcp-config`` ignores every other MCP configuration.
* **Offline.** The model is ``$ANTHROPIC_BASE_URL`` (the stand-in); ``DISABLE_AUTOUPDATER``,
  ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC``, ``DISABLE_TELEMETRY`` and ``DISABLE_ERROR_REPORTING`` turn off
  what it would otherwise send to api.anthropic.com (five ``CONNECT api.anthropic.com:443`` in a run without
  them). As a tripwire, ``HTTPS_PROXY``/``HTTP_PROXY`` point at the stand-in too, with loopback exempt: any
  request for another host arrives there as a ``CONNECT`` and is refused, and the test can see it.
* **Waiting for the sidecar.** Claude Code 2.1.197 connects ``--mcp-config`` servers in the background and sends
  the first model request without waiting for their tools (it offers ``WaitForMcpServers`` instead). A server
  with ``"alwaysLoad": true`` is awaited (up to ``MCP_CONNECT_TIMEOUT_MS``, 5 s by default), so the sidecar's
  tools are in the first request, as a user who wants them there would configure it.

Every process this starts carries the test's marker (``MCP_SUPERVISOR_TEST_MARK``) in its environment: Claude
Code, the sidecar it spawns and their children, so ``conftest.py``'s orphan check covers them all. The caller
bounds the run (``trio.fail_after``); on cancellation trio kills Claude Code, which stops the sidecar.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest
import trio

from tests.sidecar import MARK_ENV, REPO_ROOT, current_mark

HOSTS_DIR: Final = REPO_ROOT / "tests" / "hosts"
CLAUDE_CODE_VERSION: Final = "2.1.197"
"""The pin in ``tests/hosts/package.json``: what this suite has measured (HOSTS_REPORT, docs)."""
SERVER_NAME: Final = "sup"
"""The name the sidecar is registered under in Claude Code: its tools reach the model as ``mcp__sup__<ours>``."""
INSTALL_HINT: Final = "run tests/interop/install.sh (.ci/run does)"
_CONNECTED: Final = re.compile(
    r'MCP server "(?P<name>[^"]+)": Successfully connected \(transport: \w+\) in (?P<ms>\d+)ms'
)
"""The debug log's line for a server's connection: spawn to ``initialize`` answered."""


def claude_binary() -> Path:
    """The native Claude Code binary of this platform, as ``npm ci --ignore-scripts`` left it; skips if missing.

    The ``@anthropic-ai/claude-code`` package's ``bin/claude.exe`` is a placeholder until its postinstall copies
    the binary over it; ``install.sh`` runs no install scripts, so the binary of the one platform package npm
    installed (``@anthropic-ai/claude-code-<platform>``) is run directly.
    """
    found = sorted((HOSTS_DIR / "node_modules" / "@anthropic-ai").glob("claude-code-*/claude"))
    if not found:
        pytest.skip(f"Claude Code is not installed under {HOSTS_DIR / 'node_modules'}: {INSTALL_HINT}")
    binary = found[0]
    version = json.loads((binary.parent / "package.json").read_text()).get("version")
    if version != CLAUDE_CODE_VERSION:
        pytest.skip(f"Claude Code {version} is installed, these tests pin {CLAUDE_CODE_VERSION}: {INSTALL_HINT}")
    return binary


def sidecar_mcp_config(path: Path, settings: Path, *, run_args: Sequence[str] = (), always_load: bool = True) -> Path:
    """Write an ``--mcp-config`` file that registers the sidecar (``python -m supervisor run``) as ``sup``.

    ``always_load=False`` leaves Claude Code's default: it sends the first model request with whatever servers
    have connected and listed by then, and offers ``WaitForMcpServers`` for the rest.
    """
    server: dict[str, object] = {
        "type": "stdio",
        "command": sys.executable,
        "args": ["-m", "supervisor", "run", "--config", str(settings), *run_args],
        # Claude Code passes its own environment on as well; these are what the sidecar must not lose.
        "env": {MARK_ENV: current_mark(), "XDG_STATE_HOME": os.environ["XDG_STATE_HOME"]},
    }
    if always_load:
        server["alwaysLoad"] = True  # awaited before the first model request (module docstring)
    path.write_text(json.dumps({"mcpServers": {SERVER_NAME: server}}), encoding="utf-8")
    return path


@dataclass(frozen=True)
class ClaudeRun:
    """What one ``claude -p`` run left behind."""

    code: int
    stdout: str
    stderr: str
    started_at: float
    """``trio.current_time()`` just before the spawn (the stand-in stamps its requests on the same clock)."""
    wall_sec: float
    debug_log: Path

    def sidecar_connect_ms(self) -> int | None:
        """How long Claude Code says the sidecar's connection took (spawn to ``initialize`` answered)."""
        text = self.debug_log.read_text(errors="replace") if self.debug_log.exists() else ""
        for match in _CONNECTED.finditer(text):
            if match["name"] == SERVER_NAME:
                return int(match["ms"])
        return None


async def run_claude(
    binary: Path,
    prompt: str,
    *,
    base_url: str,
    mcp_config: Path,
    workdir: Path,
    allowed_tools: Sequence[str] = (f"mcp__{SERVER_NAME}",),
    extra_env: Mapping[str, str] | None = None,
) -> ClaudeRun:
    """Run ``claude -p PROMPT`` to its end (the caller bounds it); its home is ``workdir/home``."""
    home = workdir / "home"
    project = workdir / "project"
    home.mkdir(parents=True, exist_ok=True)
    project.mkdir(parents=True, exist_ok=True)
    debug_log = workdir / "claude-debug.log"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-ant-standin-not-a-key",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "HTTPS_PROXY": base_url,
        "HTTP_PROXY": base_url,
        "NO_PROXY": "127.0.0.1,localhost",
        MARK_ENV: current_mark(),
        "XDG_STATE_HOME": os.environ["XDG_STATE_HOME"],
        **(extra_env or {}),
    }
    argv = [
        str(binary),
        "-p",
        prompt,
        "--mcp-config",
        str(mcp_config),
        "--strict-mcp-config",
        "--allowedTools",
        ",".join(allowed_tools),
        "--no-session-persistence",
        "--debug-file",
        str(debug_log),
    ]
    started_at = trio.current_time()
    done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False, cwd=project, env=env)
    return ClaudeRun(
        code=done.returncode,
        stdout=done.stdout.decode(errors="replace"),
        stderr=done.stderr.decode(errors="replace"),
        started_at=started_at,
        wall_sec=trio.current_time() - started_at,
        debug_log=debug_log,
    )
