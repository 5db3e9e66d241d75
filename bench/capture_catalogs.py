"""Capture the retrieval set's catalogs: each real server's ``tools/list`` saved to bench/catalogs (issue 48).

``python -m bench.capture_catalogs [--install DIR]``. Run once, by hand, when the
set changes: ``bench p7`` and the tests read the saved JSON files and need none of
these servers. Each file holds the server's short name, package and version, its
``instructions`` and its tools as the wire has them.

Where the servers come from: the ten of ``bench.search.SERVERS`` from
``tests/interop/install.sh``; the others (``EXTRA``, pinned) from
``npm install --ignore-scripts`` into ``DIR`` (no browser or binary is fetched) and,
for the PyPI ones, a venv ``DIR/pyvenv``. Servers that want a credential to start
get a dummy one: listing tools calls no API. A server that fails to start is
named and skipped; its old file stays.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import trio

from bench.harness import open_host, reap_marked
from bench.search import LIST_BOUND_SEC, SERVERS, SETTLE_SEC

CATALOGS: Final = Path(__file__).with_name("catalogs")
DEFAULT_INSTALL: Final = Path(tempfile.gettempdir()) / "mcp-capture"
DUMMY: Final = "dummy-credential-for-listing"


@dataclass(frozen=True, slots=True)
class Extra:
    """A server beyond the interop set: short name, npm or PyPI package at a pinned version, script, env."""

    name: str
    registry: str
    package: str
    version: str
    script: str
    env: tuple[tuple[str, str], ...] = ()
    args: tuple[str, ...] = ()


EXTRA: Final = (
    Extra("gitlab", "npm", "@modelcontextprotocol/server-gitlab", "2025.4.25", "dist/index.js",
          (("GITLAB_PERSONAL_ACCESS_TOKEN", DUMMY),)),
    Extra("slack", "npm", "@modelcontextprotocol/server-slack", "2025.4.25", "dist/index.js",
          (("SLACK_BOT_TOKEN", DUMMY), ("SLACK_TEAM_ID", "T0000"))),
    Extra("puppeteer", "npm", "@modelcontextprotocol/server-puppeteer", "2025.5.12", "dist/index.js"),
    Extra("brave", "npm", "@modelcontextprotocol/server-brave-search", "0.6.2", "dist/index.js",
          (("BRAVE_API_KEY", DUMMY),)),
    Extra("maps", "npm", "@modelcontextprotocol/server-google-maps", "0.6.2", "dist/index.js",
          (("GOOGLE_MAPS_API_KEY", DUMMY),)),
    Extra("mongodb", "npm", "mongodb-mcp-server", "3.0.4", "dist/esm/index.js"),
    Extra("kubernetes", "npm", "mcp-server-kubernetes", "4.1.7", "dist/index.js"),
    Extra("firecrawl", "npm", "firecrawl-mcp", "3.22.2", "dist/index.js", (("FIRECRAWL_API_KEY", DUMMY),)),
    Extra("tavily", "npm", "tavily-mcp", "0.2.22", "build/index.js", (("TAVILY_API_KEY", DUMMY),)),
    Extra("exa", "npm", "exa-mcp-server", "3.4.1", "dist/stdio.cjs", (("EXA_API_KEY", DUMMY),)),
    Extra("neon", "npm", "@neondatabase/mcp-server-neon", "0.3.7", "dist/index.js", args=("start", DUMMY)),
    Extra("sentry", "npm", "@sentry/mcp-server", "0.36.0", "dist/index.js", args=(f"--access-token={DUMMY}",)),
    Extra("commander", "npm", "@wonderwhy-er/desktop-commander", "0.2.52", "dist/index.js"),
    Extra("context7", "npm", "@upstash/context7-mcp", "4.1.1", "dist/index.js"),
    Extra("atlassian", "pypi", "mcp-atlassian", "0.23.1", "mcp-atlassian",
          (("JIRA_URL", "https://example.atlassian.net"), ("JIRA_USERNAME", "a@example.com"),
           ("JIRA_API_TOKEN", DUMMY), ("CONFLUENCE_URL", "https://example.atlassian.net/wiki"),
           ("CONFLUENCE_USERNAME", "a@example.com"), ("CONFLUENCE_API_TOKEN", DUMMY))),
    Extra("sqlite", "pypi", "mcp-server-sqlite", "2025.4.25", "mcp-server-sqlite", args=("--db-path", "{tmp}/x.db")),
)  # fmt: skip


def install(extras: tuple[Extra, ...], into: Path) -> None:
    """npm and pip installs of ``extras`` at their versions (skipped when already there)."""
    into.mkdir(parents=True, exist_ok=True)
    npm = [f"{extra.package}@{extra.version}" for extra in extras if extra.registry == "npm"]
    if npm and not all((into / "node_modules" / extra.package).exists() for extra in extras if extra.registry == "npm"):
        (into / "package.json").write_text('{"name": "capture", "private": true}\n')
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", *npm], cwd=into, check=True)
    pypi = [f"{extra.package}=={extra.version}" for extra in extras if extra.registry == "pypi"]
    if pypi and not (into / "pyvenv").exists():
        subprocess.run([sys.executable, "-m", "venv", str(into / "pyvenv")], check=True)
        subprocess.run([str(into / "pyvenv" / "bin" / "pip"), "install", "-q", *pypi], check=True)


def _argv(extra: Extra, into: Path) -> list[str]:
    if extra.registry == "npm":
        return ["node", str(into / "node_modules" / extra.package / extra.script), *extra.args]
    return [str(into / "pyvenv" / "bin" / extra.script), *extra.args]


async def _capture(  # noqa: PLR0917 - one call site, the fields of one server
    name: str, package: str, argv: list[str], env: dict[str, str], later: bool, tmp: str
) -> None:
    argv = [arg.replace("{tmp}", tmp) for arg in argv]
    try:
        with trio.fail_after(LIST_BOUND_SEC):
            async with open_host(argv, mode="legacy", listen=False, env={"PYTHONPATH": "", **env}) as host:
                if later:
                    with trio.move_on_after(SETTLE_SEC):
                        await host.wait_notice(after=0)
                tools: list[dict[str, Any]] = []
                cursor: str | None = None
                while True:
                    page = await host.session.list_tools(cursor=cursor, cache_mode="bypass")
                    tools.extend(tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
                assert host.client is not None
                info = host.client.server_info
                instructions = host.client.instructions
    except Exception as exc:  # a server that will not start here is named and skipped
        print(f"{name}: failed: {exc!r}", file=sys.stderr)
        return
    saved = {
        "server": name,
        "package": package,
        "version": getattr(info, "version", None),
        "instructions": instructions or "",
        "tools": tools,
    }
    (CATALOGS / f"{name}.json").write_text(json.dumps(saved, indent=1, ensure_ascii=False) + "\n")
    print(f"{name}: {len(tools)} tools", file=sys.stderr)


async def capture(into: Path) -> None:
    CATALOGS.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        async with trio.open_nursery() as nursery:
            for server in SERVERS:
                if server.installed:
                    nursery.start_soon(
                        _capture, server.name, server.package, list(server.argv), {}, server.announces_later, tmp
                    )
            for extra in EXTRA:
                package = f"{extra.registry} {extra.package}=={extra.version}"
                nursery.start_soon(_capture, extra.name, package, _argv(extra, into), dict(extra.env), False, tmp)
    await reap_marked("p7")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--install", type=Path, default=DEFAULT_INSTALL, help="where the extra servers are installed")
    args = parser.parse_args()
    install(EXTRA, args.install)
    trio.run(capture, args.install)


if __name__ == "__main__":
    main()
