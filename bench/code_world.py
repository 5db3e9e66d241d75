"""p10's world in processes: the servers' settings tables, the memory graph put in, the site served.

``serving_site`` owns one child, ``python -m http.server`` on loopback port 0 (its
port read from the line it prints, bounded by ``START_BOUND_SEC``), killed on exit;
``fill_memory`` one host of the memory server (``harness.open_host``). Every
process carries the bench run's marker.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import trio

from bench.code_tasks.fixture import ENTITIES, RELATIONS, Fixture
from bench.harness import BENCH_MARK_ENV, bench_mark, marked_env, open_host
from bench.search import SERVERS as REAL_SERVERS

SERVER_OF: Final = {"files": "fs", "git": "git", "memory": "memory", "everything": "everything", "time": "time"}
"""Our server names -> ``bench.search.SERVERS``' (where their commands are); ``fetch`` is ``fetch`` there too."""
START_BOUND_SEC: Final = 90.0


def server_tables(fixture: Fixture) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The settings tables of the servers that are installed; and the names of those that are not."""
    real = {server.name: server for server in REAL_SERVERS}
    mark = {BENCH_MARK_ENV: bench_mark()}
    extra: dict[str, tuple[list[str], dict[str, str]]] = {
        "files": ([str(fixture.root)], {}),
        "git": ([], {}),
        "memory": ([], {"MEMORY_FILE_PATH": str(fixture.memory_file)}),
        "everything": ([], {}),
        "time": (["--local-timezone", "UTC"], {"PYTHONPATH": ""}),
        "fetch": (["--ignore-robots-txt", "--allow-private-ips"], {}),
    }
    tables, missing = {}, []
    for name, (args, env) in extra.items():
        server = real[SERVER_OF.get(name, name)]
        if not server.installed:
            missing.append(name)
            continue
        argv = [arg for arg in server.argv if arg != "{tmp}"]
        tables[name] = {"command": argv[0], "args": [*argv[1:], *args], "cwd": str(fixture.base), "env": mark | env}
    return tables, missing


async def fill_memory(fixture: Fixture, table: Mapping[str, Any]) -> None:
    """Put ``ENTITIES`` and ``RELATIONS`` into the memory server's file, by calls to the server itself."""
    argv = [table["command"], *table["args"]]
    async with open_host(argv, env={"MEMORY_FILE_PATH": str(fixture.memory_file)}, listen=False) as host:
        for tool, arguments in (
            ("create_entities", {"entities": ENTITIES}),
            ("create_relations", {"relations": RELATIONS}),
        ):
            result = await host.session.call_tool(tool, {key: list(value) for key, value in arguments.items()})
            if result.is_error:
                raise RuntimeError(f"memory {tool}: {result.content}")


@asynccontextmanager
async def serving_site(site: Path) -> AsyncIterator[str]:
    """Serve ``site`` over loopback HTTP (``python -m http.server``, port 0); yield its URL, ending with ``/``."""
    argv = [sys.executable, "-u", "-m", "http.server", "--bind", "127.0.0.1", "0", "--directory", str(site)]
    proc = await trio.lowlevel.open_process(
        argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=marked_env(), start_new_session=True
    )
    try:
        assert proc.stdout is not None
        seen = b""
        with trio.fail_after(START_BOUND_SEC):
            while b"\n" not in seen:
                seen += await proc.stdout.receive_some(4096)
        match = re.search(rb"port (\d+)", seen)
        if match is None:
            raise RuntimeError(f"http.server said {seen!r}")
        yield f"http://127.0.0.1:{int(match.group(1))}/"
    finally:
        with trio.CancelScope(shield=True):
            proc.kill()
            await proc.wait()
