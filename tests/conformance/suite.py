"""The official conformance suite as the lane runs it: which versions, where they live, one scenario at a time.

``tests/conformance/install.sh`` puts both pinned versions of
``@modelcontextprotocol/conformance`` (npm aliases ``conformance-<version>``)
and a Node.js 22 (the suite needs ``fs.globSync``) into
``tests/conformance/node_modules``. ``run_client_scenario`` runs one client
scenario against a command and reads the suite's own verdict: its exit status
(failures, warnings, a timeout, or an unexpected client error fail the
scenario; a scenario about a refusal allows the client's error) and the names
of its failed checks from ``checks.json``.

Concurrency: each run is one ``trio.run_process``, bounded by the caller; the
suite kills a client that outlives ``--timeout`` itself.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import trio

HERE: Final = Path(__file__).resolve().parent
REPO_ROOT: Final = HERE.parents[1]
MODULES: Final = HERE / "node_modules"
VERSIONS: Final = ("0.1.16", "0.2.0-alpha.11")
INSTALL_HINT: Final = "run tests/conformance/install.sh (the suite and Node.js 22 from the npm registry)"


@dataclass(frozen=True, slots=True)
class Suite:
    """One installed version of the suite."""

    version: str
    node: Path
    entry: Path

    def argv(self, *args: str) -> list[str]:
        return [str(self.node), str(self.entry), *args]


def node_binary() -> Path | None:
    """A Node.js >= 22: the one install.sh put in node_modules, else a system ``node`` that is new enough."""
    for candidate in sorted(MODULES.glob("node-linux-*/bin/node")):
        if os.access(candidate, os.X_OK):
            return candidate
    system = shutil.which("node")
    if system is not None:
        done = subprocess.run([system, "--version"], capture_output=True, text=True, check=False)
        match = re.match(r"v(\d+)\.", done.stdout)
        if match and int(match.group(1)) >= 22:
            return Path(system)
    return None


def installed_suite(version: str) -> Suite | None:
    entry = MODULES / f"conformance-{version}" / "dist" / "index.js"
    node = node_binary()
    return Suite(version, node, entry) if node is not None and entry.is_file() else None


def client_scenarios(suite: Suite) -> list[str]:
    """Every client scenario the suite lists (``list --client``), in its order."""
    done = subprocess.run(suite.argv("list", "--client"), capture_output=True, text=True, check=True, cwd=REPO_ROOT)
    return re.findall(r"^\s+- (\S+)", done.stdout, flags=re.MULTILINE)


def server_scenarios(suite: Suite) -> list[str]:
    """The active server scenarios (``list --server``; pending and draft ones are the suite's own to-do)."""
    done = subprocess.run(suite.argv("list", "--server"), capture_output=True, text=True, check=True, cwd=REPO_ROOT)
    return re.findall(r"^\s+- (\S+)", done.stdout, flags=re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Outcome:
    """The suite's verdict on one run: passed, and the checks that failed or warned (``name: message``)."""

    passed: bool
    failed: tuple[str, ...]
    checks: tuple[tuple[str, str], ...] = ()
    """Every check that was judged (``id``, status), for the server role's check-by-check rule."""
    info: frozenset[str] = frozenset()
    """The ids of the INFO records the suite wrote (what it saw, judged neither way)."""


def client_command(module: str) -> str:
    """The ``--command`` the suite runs (it appends the URL): this interpreter on one of the lane's clients."""
    return f"{sys.executable} -m {module}"


async def run_client_scenario(suite: Suite, scenario: str, command: str, out: Path, timeout_ms: int) -> Outcome:
    options = ("--command", command, "--scenario", scenario, "--timeout", f"{timeout_ms}")
    return await _run(suite.argv("client", *options, "-o", str(out)), out)


async def run_server_scenario(suite: Suite, scenario: str, url: str, out: Path) -> Outcome:
    return await _run(suite.argv("server", "--url", url, "--scenario", scenario, "-o", str(out)), out)


async def _run(argv: list[str], out: Path) -> Outcome:
    done = await trio.run_process(
        argv, capture_stdout=True, capture_stderr=True, check=False, cwd=REPO_ROOT, stdin=subprocess.DEVNULL
    )
    return _verdict(out, done.returncode, done.stdout + b"\n" + done.stderr)


def _verdict(out: Path, returncode: int, output: bytes) -> Outcome:
    """The suite's verdict from its exit status and the ``checks.json`` it wrote under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "suite-output.txt").write_bytes(output)
    checks: list[dict[str, object]] = []
    for path in sorted(out.rglob("checks.json")):
        checks.extend(json.loads(path.read_text()))
    failed = tuple(
        f"{check.get('id')}: {check.get('errorMessage') or check.get('description')}"
        for check in checks
        if check.get("status") in ("FAILURE", "WARNING")
    )
    judged = tuple(
        (str(check.get("id")), str(check.get("status")))
        for check in checks
        if check.get("status") in ("SUCCESS", "FAILURE", "WARNING")
    )
    info = frozenset(str(check.get("id")) for check in checks if check.get("status") == "INFO")
    if returncode != 0 and not failed:
        tail = output.decode(errors="replace").strip().splitlines()[-3:]
        failed = ("the client exited with an error, or timed out: " + " / ".join(tail),)
    return Outcome(returncode == 0, failed, judged, info)
