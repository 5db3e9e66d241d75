"""The conformance lane: the official MCP conformance suite, both pinned versions, both roles (issue 46).

``pytest -m conformance`` (``.ci/run`` runs it after the main suite; the README's
test command leaves it out: ``tests/conftest.py`` deselects it unless ``-m``
names it). Needs ``tests/conformance/install.sh``.

* **Client role.** Every client scenario the suite lists, once with the sidecar
  as the client (``tests.conformance.sidecar_client``: ``login``, ``tools``,
  ``call``, or ``run`` under a stdio host) and once with the reference client on
  the SDK's public API (``tests.conformance.reference_client``), in the same
  run. The rule: **a scenario the reference passes and the sidecar does not
  fails the lane**, naming the scenario and its failed checks. Scenarios
  neither client is built for (``plans.OutOfReach``) are shown, not judged.
* **Server role.** Every active server scenario against the conformance
  fixture server alone (``tests/fixtures/conformance_server.py``, over
  streamable HTTP) and against the sidecar's HTTP front with that server
  behind it. The rule: **a check the server alone passes and the sidecar does
  not fails the lane.**

Each test prints its table (scenario x reference x sidecar) and writes it to
``tests/conformance/results/``.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Final

import pytest
import trio

from tests.conformance.plans import OutOfReach, plan_of
from tests.conformance.rules import BEHIND, Row, check_table, client_table
from tests.conformance.suite import (
    HERE,
    INSTALL_HINT,
    VERSIONS,
    Outcome,
    Suite,
    client_command,
    client_scenarios,
    installed_suite,
    run_client_scenario,
    run_server_scenario,
    server_scenarios,
)
from tests.sidecar import command_server, open_http_fixture, open_http_sidecar, scaled, write_settings

pytestmark = [pytest.mark.e2e, pytest.mark.conformance]

LANE_BOUND_SEC: Final = scaled(1500)
CLIENT_TIMEOUT_MS: Final = round(scaled(60) * 1000)
"""The suite's ``--timeout`` for one client run: the sidecar's CLI starts up to four Python processes."""
PARALLEL_RUNS: Final = 3
RESULTS: Final = HERE / "results"


def _suite(version: str) -> Suite:
    suite = installed_suite(version)
    if suite is None:
        pytest.fail(f"conformance suite {version} is not installed: {INSTALL_HINT}", pytrace=False)
    return suite


def report(name: str, text: str, capsys: pytest.CaptureFixture[str]) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.md").write_text(text)
    with capsys.disabled():
        print(f"\n{text}")


async def run_all(jobs: list[Callable[[], Awaitable[None]]]) -> None:
    limiter = trio.CapacityLimiter(PARALLEL_RUNS)

    async def one(job: Callable[[], Awaitable[None]]) -> None:
        async with limiter:
            await job()

    async with trio.open_nursery() as nursery:
        for job in jobs:
            nursery.start_soon(one, job)


@pytest.mark.parametrize("version", VERSIONS)
async def test_the_sidecar_passes_every_client_scenario_the_reference_client_passes(
    version: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = _suite(version)
    rows = [Row(scenario) for scenario in client_scenarios(suite)]
    jobs: list[Callable[[], Awaitable[None]]] = []
    for row in rows:
        plan = plan_of(row.scenario)
        if isinstance(plan, OutOfReach):
            row.out_of_reach = plan.why
        for client in ("reference", "sidecar"):

            async def job(row: Row = row, client: str = client) -> None:
                out = tmp_path / client / row.scenario.replace("/", "_")
                command = client_command(f"tests.conformance.{client}_client")
                outcome = await run_client_scenario(suite, row.scenario, command, out, CLIENT_TIMEOUT_MS)
                setattr(row, client, outcome)

            jobs.append(job)
    with trio.fail_after(LANE_BOUND_SEC):
        await run_all(jobs)
        for row in (row for row in rows if row.regression()):  # once more, alone: a failure twice is the verdict
            row.first_sidecar = row.sidecar
            out = tmp_path / "sidecar-again" / row.scenario.replace("/", "_")
            command = client_command("tests.conformance.sidecar_client")
            row.sidecar = await run_client_scenario(suite, row.scenario, command, out, CLIENT_TIMEOUT_MS)
    report(f"client-{version}", client_table(f"Client role, suite {version}", rows, ("reference", "sidecar")), capsys)
    regressions = {row.scenario: row.sidecar.failed[:3] for row in rows if row.regression() and row.sidecar}
    assert not regressions, f"the sidecar fails where the reference client passes (suite {version}): {regressions}"


# -- the server role ----------------------------------------------------------------------------

SERVER_MODULE: Final = "tests.fixtures.conformance_server"


def _sidecar_settings(tmp_path: Path, upstream: Mapping[str, Any], name: str) -> Path:
    """A sidecar whose HTTP front (port 0, loopback, no token: the suite sends none) serves ``upstream`` raw-named."""
    front = {"transport": "http", "port": 0, "allow_unauthenticated_loopback": True}
    return write_settings(
        tmp_path,
        {"conf": {**upstream, "namespace": False}},
        supervisor={"log_level": "info", "shutdown_grace_sec": scaled(2), "front": front},
        name=name,
    )


@pytest.mark.parametrize("version", VERSIONS)
async def test_the_sidecar_passes_every_server_check_the_server_alone_passes(
    version: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = _suite(version)
    scenarios = server_scenarios(suite)
    outcomes: dict[str, dict[str, Outcome]] = {column: {} for column in ("alone", *BEHIND)}
    with trio.fail_after(LANE_BOUND_SEC):
        async with AsyncExitStack() as stack:
            alone = await stack.enter_async_context(open_http_fixture(module=SERVER_MODULE))
            behind_http = await stack.enter_async_context(open_http_fixture(module=SERVER_MODULE))
            stdio = command_server([sys.executable, "-m", SERVER_MODULE, "--stdio"])
            urls = {"alone": alone.url}
            for behind, upstream in (("stdio", stdio), ("http", {"url": behind_http.url})):
                config = _sidecar_settings(tmp_path, upstream, f"settings-{behind}.toml")
                urls[behind] = (await stack.enter_async_context(open_http_sidecar(config))).url
            jobs: list[Callable[[], Awaitable[None]]] = []
            for column, url in urls.items():
                # One scenario at a time per server: each models one host. On a stdio upstream every host's
                # calls share one pipe, where a log message names no request, so while two hosts' calls are in
                # flight the sidecar withholds their log messages rather than guess whose they are (I13).

                async def job(column: str = column, url: str = url) -> None:
                    for scenario in scenarios:
                        out = tmp_path / column / scenario
                        outcomes[column][scenario] = await run_server_scenario(suite, scenario, url, out)

                jobs.append(job)
            await run_all(jobs)
            _, lost = check_table("", scenarios, outcomes)
            again = sorted({loss.partition(":")[0] for loss in lost})
            for scenario in again:  # once more in every column, one at a time: judged on this second run
                for column, url in urls.items():
                    out = tmp_path / f"{column}-again" / scenario
                    outcomes[column][scenario] = await run_server_scenario(suite, scenario, url, out)
    text, lost = check_table(f"Server role, suite {version}", scenarios, outcomes)
    if again:
        text += f"\nRun a second time after a lost check (judged on that run): {', '.join(again)}\n"
    report(f"server-{version}", text, capsys)
    assert not lost, f"checks the conformance server alone passes and the sidecar does not (suite {version}): {lost}"
