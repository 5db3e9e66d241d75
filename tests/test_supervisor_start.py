"""How the Supervisor starts its actors: all scheduled at once, so the host link is not kept waiting (issue 11)."""

from __future__ import annotations

import trio

from supervisor.root import Supervisor
from tests.fakes import FakeServer, tool
from tests.sidecar import scaled
from tests.test_reload import Fleet, _server, _settings, running

SERVERS = 40


async def test_the_supervisor_reports_started_in_a_few_scheduling_rounds_however_many_servers_it_starts() -> None:
    """The host link starts right after the Supervisor, so the host's handshake waits for no server's start.

    Starting actors one ``nursery.start`` at a time took a scheduling round per
    actor, in which every earlier actor spawned and handshook: the host link
    came after all of them. A task that counts rounds shows how many passed.
    """
    names = [f"s{i:02d}" for i in range(SERVERS)]
    fleet = Fleet(**{name: FakeServer([tool("t")], name=name) for name in names})
    supervisor = Supervisor(_settings(*(_server(name) for name in names)), connector=fleet.connect)
    rounds = 0

    async def count_rounds() -> None:
        nonlocal rounds
        while True:
            rounds += 1
            await trio.lowlevel.checkpoint()

    with trio.fail_after(scaled(5)):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(count_rounds)
            await trio.lowlevel.checkpoint()
            before = rounds
            await nursery.start(supervisor.run)
            assert rounds - before <= 10, f"{rounds - before} scheduling rounds before the Supervisor reported started"
            await supervisor.wait_first_attempts()
            assert sorted(entry.owner for entry in supervisor.registry.tool_entries()) == names
            nursery.cancel_scope.cancel()


async def test_the_search_index_reads_what_each_server_said_it_does_when_its_generation_connected() -> None:
    """Issue 48: a server's own line is known before its first sync, so its tools' texts carry it from the start."""
    files = FakeServer([tool("read")], name="files")
    files.about = "Files on this machine."
    quiet = FakeServer([tool("read")], name="quiet")
    supervisor = Supervisor(
        _settings(_server("files"), _server("quiet")), connector=Fleet(files=files, quiet=quiet).connect
    )
    with trio.fail_after(scaled(5)):
        async with running(supervisor):
            await supervisor.wait_first_attempts()
            assert dict(supervisor.semantic.about) == {"files": "Files on this machine."}
            assert supervisor.statuses()[0].about == "Files on this machine."
