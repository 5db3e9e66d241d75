"""The conformance lane's client under test: the sidecar, driven the way a user drives it.

``python -m tests.conformance.sidecar_client URL`` (the suite appends the URL and
sets ``$MCP_CONFORMANCE_SCENARIO``). It writes a ``settings.toml`` with one remote
server, ``conf``, at the suite's URL (its ``oauth`` table as the plan's login
needs: a person with dynamic registration or CIMD, a pre-registered client, or
``client_credentials``), then:

* **through the CLI** (most plans): ``mcp-supervisor login conf`` with ``$BROWSER``
  a script that follows the authorization redirect back to the login's loopback
  listener, as a person's browser does; ``tools --json``; and ``call`` for each
  call of the plan. When a call says that the server wants a scope the tokens
  lack and to run ``login``, the user does so and calls once more;
* **under a stdio host** (plans that ask the user something mid-call):
  ``mcp-supervisor run`` with an ``mcp.Client`` as its host, which answers
  elicitations the way the reference client does (``tests.conformance.steps``).

Exits 0 when every step succeeded, 1 otherwise. Every child process is bounded
(``STEP_BOUND_SEC``) and its output relayed to stderr, where the suite keeps it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any, Final

import httpx2
import trio
from mcp import Client, StdioServerParameters

from supervisor.catalog.naming import NameRule, public_name
from supervisor.config.names import NamesSettings
from tests.conformance.plans import (
    CIMD_URL,
    CallEveryListedTool,
    CallTool,
    EchoListedSchema,
    ListTools,
    OutOfReach,
    Plan,
    ResourcesAndPrompts,
    Step,
    plan_of,
    scenario_context,
    steps_of,
)
from tests.conformance.steps import elicit, run_steps

SERVER: Final = "conf"
STEP_BOUND_SEC: Final = 60.0
SECRET_ENV: Final = "CONFORMANCE_CLIENT_SECRET"
LOGIN_HINT: Final = f"run `mcp-supervisor login {SERVER}`"

BROWSER_SCRIPT: Final = """\
import sys, urllib.request
with urllib.request.urlopen(sys.argv[-1], timeout=30) as response:
    sys.exit(0 if response.status == 200 else 1)
"""
"""The person's browser: GET the authorization URL and follow its redirect to the login's listener."""


class StepFailed(Exception):
    """A CLI command of the plan failed (its output is already on stderr)."""


def _toml_value(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


async def _issuer_of(url: str) -> str:
    """The authorization server the protected resource names: what the user reads in its docs."""
    parts = httpx2.URL(url)
    prm = f"{parts.scheme}://{parts.netloc.decode()}/.well-known/oauth-protected-resource{parts.path}"
    async with httpx2.AsyncClient() as http:
        document = (await http.get(prm)).json()
    return str(document["authorization_servers"][0])


async def write_settings(directory: Path, url: str, plan: Plan) -> Path:
    """The user's ``settings.toml`` for this scenario: one server at ``url``, its login as the plan says."""
    context = scenario_context()
    oauth: dict[str, Any] | None
    match plan.login:
        case "none":
            oauth = None
        case "person":
            oauth = {"client_metadata_url": CIMD_URL}
        case "pre_registered":
            oauth = {"client_id": context["client_id"], "client_secret_env_var": SECRET_ENV}
        case "client_credentials_basic":
            oauth = {
                "grant": "client_credentials",
                "client_id": context["client_id"],
                "client_secret_env_var": SECRET_ENV,
                "issuer": await _issuer_of(url),
            }
        case "client_credentials_jwt":
            key = directory / "client-key.pem"
            key.write_text(context["private_key_pem"])
            key.chmod(0o600)
            oauth = {
                "grant": "client_credentials",
                "client_id": context["client_id"],
                "private_key_file": str(key),
                "signing_algorithm": context.get("signing_algorithm", "ES256"),
                "issuer": await _issuer_of(url),
            }
    lines = [
        "[supervisor]",
        'log_level = "debug"',
        f"token_store = {json.dumps(str(directory / 'tokens'))}",
        "[defaults]",
        "startup_timeout_sec = 30",
        "tool_timeout_sec = 30",
        "[defaults.reconnect]",
        "max_attempts = 1",
        f"[mcp_servers.{SERVER}]",
        f"url = {json.dumps(url)}",
    ]
    if oauth is not None:
        lines += [f"[mcp_servers.{SERVER}.oauth]", *(f"{k} = {_toml_value(v)}" for k, v in oauth.items())]
    path = directory / "settings.toml"
    path.write_text("\n".join(lines) + "\n")
    tomllib.loads(path.read_text())  # the driver's own mistake shows here, not as the sidecar's refusal
    return path


class Cli:
    """``python -m supervisor …`` against one settings file, with the person's browser and secret in its env."""

    def __init__(self, directory: Path, config: Path) -> None:
        browser = directory / "browser.py"
        browser.write_text(f"#!{sys.executable}\n{BROWSER_SCRIPT}")
        browser.chmod(0o755)
        self.config = config
        self.env = {**os.environ, "BROWSER": str(browser)}
        secret = scenario_context().get("client_secret")
        if secret is not None:
            self.env[SECRET_ENV] = str(secret)

    async def run(self, *args: str) -> str:
        """Run one command; its stdout (stderr goes to ours). Raises ``StepFailed`` on a non-zero exit."""
        argv = [sys.executable, "-m", "supervisor", *args, "--config", str(self.config)]
        print(f"$ mcp-supervisor {' '.join(args)}", file=sys.stderr, flush=True)
        with trio.fail_after(STEP_BOUND_SEC):
            done = await trio.run_process(
                argv, env=self.env, capture_stdout=True, capture_stderr=True, check=False, stdin=subprocess.DEVNULL
            )
        sys.stderr.write(done.stderr.decode(errors="replace"))
        if done.returncode != 0:
            sys.stderr.write(done.stdout.decode(errors="replace"))
            raise StepFailed(f"mcp-supervisor {args[0]} exited {done.returncode}", done.stderr.decode())
        return done.stdout.decode()

    async def as_told(self, *args: str) -> str:
        """Run a command; when it says to log in (a scope step-up, a moved authorization server), do so and rerun it."""
        try:
            return await self.run(*args)
        except StepFailed as exc:
            if LOGIN_HINT not in exc.args[1]:
                raise
        await self.run("login", SERVER)
        return await self.run(*args)

    async def call(self, name: str, arguments: dict[str, Any]) -> None:
        await self.as_told("call", name, json.dumps(arguments), "--no-input")


_DEFAULT_NAMES: Final = NamesSettings()
DEFAULT_RULE: Final = NameRule(_DEFAULT_NAMES.prefix, _DEFAULT_NAMES.limit)
"""The names the sidecar gives on this lane's settings (no ``[supervisor.names]``: the defaults)."""


def _public(raw: str) -> str:
    return public_name(SERVER, raw, rule=DEFAULT_RULE)


async def through_the_cli(directory: Path, config: Path, plan: Plan, steps: tuple[Step, ...]) -> None:
    cli = Cli(directory, config)
    if plan.login in ("person", "pre_registered"):
        await cli.run("login", SERVER)
    listed: list[dict[str, Any]] = []
    for step in steps:
        match step:
            case ListTools():
                listed = json.loads(await cli.as_told("tools", "--json"))["tools"]
            case CallTool(name=name, arguments=arguments):
                await cli.call(_public(name), arguments)
            case CallEveryListedTool():
                for tool in listed:
                    await cli.call(str(tool["name"]), {})
            case EchoListedSchema(focal=focal, echo=echo):
                schema = next(tool["inputSchema"] for tool in listed if tool["name"] == _public(focal))
                await cli.call(_public(echo), {"schema": schema})
            case ResourcesAndPrompts():
                raise StepFailed("the CLI reads no resources or prompts: this plan needs a host")


async def under_a_host(config: Path, steps: tuple[Step, ...]) -> None:
    """``run`` under an ``mcp.Client`` host (2026 era); the server's tools are waited for on its change notices.

    The first listing waits a little for the servers' first attempts (docs/operations.md); a remote server
    that takes longer reaches the host as a change on the ``subscriptions/listen`` stream, opened first.
    """
    sidecar = StdioServerParameters(command=sys.executable, args=["-m", "supervisor", "run", "--config", str(config)])
    with trio.fail_after(STEP_BOUND_SEC):
        async with Client(sidecar, elicitation_callback=elicit) as host:
            async with host.listen(tools_list_changed=True) as changes:
                if not (await host.list_tools()).tools:
                    async for _change in changes:
                        if (await host.list_tools()).tools:
                            break
            await run_steps(host, steps, public=_public)


async def main(url: str, scenario: str) -> int:
    plan = plan_of(scenario)
    if isinstance(plan, OutOfReach):
        print(f"out of reach: {plan.why}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="conformance-") as name:
        directory = Path(name)
        config = await write_settings(directory, url, plan)
        try:
            if plan.needs_host:
                await under_a_host(config, steps_of(plan))
            else:
                await through_the_cli(directory, config, plan, steps_of(plan))
        except StepFailed as exc:
            print(f"sidecar client: {exc.args[0]}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(trio.run(main, sys.argv[-1], os.environ["MCP_CONFORMANCE_SCENARIO"]))
