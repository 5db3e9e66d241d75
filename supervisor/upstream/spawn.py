"""How a stdio server's process is started, and the early start that overlaps it with the sidecar's own.

``spawn_stdio_server`` is the one place a stdio child is started: in a new
session (its own process group, DESIGN §7), with the minimal environment of
``child_environment``, its three standard streams piped to us.

The early start (issue 11, cold start; ``run``, ``tools`` and ``call``). ``python -m supervisor run`` spends
~0.65 s of one core importing the ``mcp`` SDK before it can connect anything,
and only then started its stdio servers, so a server's own start-up (a few ms
for a stdlib script, ~0.5 s for a Python SDK server, 1-2 s for ``npx``) came
after it. ``early_servers`` starts every stdio server the first generation will
connect *before* that import; the first connection attempt of each takes its
process (``EarlyServers.take``) instead of spawning one, so the two start-ups
overlap. Measured (``bench``'s fleet, 12 rounds interleaved, 2 cores): one SDK
server ready 1.83 -> 0.94 s; 50 lite servers 1.59 -> 1.34 s.

While the import runs, the early children may use every CPU but the one the
importing thread is on (``sched_setaffinity``; Linux, and only with 2 CPUs or
more): 50 children starting at once would otherwise take that CPU too (each
runnable task gets a fair share), stretching the import, which is on the
critical path, by most of their start-up. ``release_cpus`` gives each child back
the CPUs it was started with once the import is done; a child that changed its
own affinity meanwhile is left as it set it. Without the restriction the early
start gained nothing at 50 servers (1.59 -> 1.55 s) and one SDK server less
(1.16 s).

Not started early: servers over HTTP, disabled servers, and every server when
``spawn_concurrency`` limits start-ups (the limit decides who starts when).

Ownership: a taken process belongs to its transport (``upstream.stdio``),
which reaps it like one it spawned. Whatever is not taken by the time the first
attempts are made (say, a reload removed the server) is terminated and reaped
by ``discard_untaken``, and at the latest when ``early_servers`` exits, so an
early child never outlives the sidecar's start (no orphans, I11).

Concurrency: everything runs in the sidecar's one trio thread; ``take`` and
``release_cpus`` are synchronous, so no two tasks can claim one process.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Final

import trio

from supervisor.upstream.process_group import terminate_group

if TYPE_CHECKING:
    from supervisor.config.models import Settings
    from supervisor.config.servers import ServerSettings

logger = logging.getLogger(__name__)

_INHERITED_ENV: Final = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "TZ", "LANG", "LANGUAGE",
        "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
        "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
        "PIP_CERT", "PIP_INDEX_URL", "NPM_CONFIG_REGISTRY", "npm_config_cache",
    }
)  # fmt: skip


def child_environment(configured: Mapping[str, str], parent: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a stdio child gets: the safe inherited subset plus ``configured``."""
    source = os.environ if parent is None else parent
    env = {
        key: value
        for key, value in source.items()
        if (key in _INHERITED_ENV or key.startswith("LC_")) and not value.startswith("()")
    }
    env.update(configured)
    return env


async def spawn_stdio_server(settings: ServerSettings, parent_env: Mapping[str, str] | None = None) -> trio.Process:
    """Start ``settings.command`` in a new session with piped stdin, stdout and stderr.

    Raises:
        OSError: The command could not be started (not found, not executable, bad cwd).
    """
    assert settings.command is not None, "a stdio server needs a command"
    proc = await trio.lowlevel.open_process(
        [settings.command, *settings.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=settings.cwd,
        env=child_environment(settings.env, parent_env),
        start_new_session=True,
    )
    logger.debug("server=%s pid=%d started", settings.name, proc.pid)
    return proc


def _current_cpu() -> int | None:
    """The CPU the calling thread last ran on (``/proc/thread-self/stat``, field 39), or None off Linux."""
    try:
        stat = Path("/proc/thread-self/stat").read_text()
        return int(stat[stat.rfind(")") + 2 :].split()[36])
    except (OSError, ValueError, IndexError):
        return None


class EarlyServers:
    """Stdio servers started before the SDK import, each waiting for its first connection attempt."""

    def __init__(self) -> None:
        self._waiting: dict[str, tuple[ServerSettings, trio.Process]] = {}
        self._restricted: list[trio.Process] = []
        """Children kept off the importing thread's CPU until ``release_cpus``."""
        self._cpus: tuple[frozenset[int], frozenset[int]] | None = None
        """The CPUs the children were started with, and the ones they are restricted to meanwhile."""

    @property
    def waiting(self) -> dict[str, trio.Process]:
        """The processes not taken yet, by server name (a copy: tests read it)."""
        return {name: proc for name, (_, proc) in self._waiting.items()}

    async def start(self, settings: Settings) -> None:
        """Start every enabled stdio server (none when ``spawn_concurrency`` limits start-ups).

        A server whose command cannot be started is left to its first attempt,
        which fails the same way and reports it as usual.
        """
        if settings.supervisor.spawn_concurrency:
            return
        allowed = _affinity()
        current = _current_cpu()
        elsewhere = allowed - {current} if allowed is not None and current in allowed else frozenset()
        for server in settings.mcp_servers.values():
            if not server.enabled or server.transport != "stdio":
                continue
            try:
                proc = await spawn_stdio_server(server)
            except OSError:
                continue
            self._waiting[server.name] = (server, proc)
            if elsewhere and _set_affinity(proc.pid, elsewhere):
                self._restricted.append(proc)
        if self._restricted:
            assert allowed is not None
            self._cpus = (allowed, elsewhere)

    def take(self, settings: ServerSettings) -> trio.Process | None:
        """The early process of ``settings``' server, once; None if there is none or it was started otherwise.

        "Otherwise": with settings a reload has changed since (the process is
        then discarded with the rest).
        """
        waiting = self._waiting.get(settings.name)
        if waiting is None or waiting[0] != settings:
            return None
        del self._waiting[settings.name]
        logger.debug(
            "server=%s: its first generation takes the process started early, pid=%d", settings.name, waiting[1].pid
        )
        return waiting[1]

    def release_cpus(self) -> None:
        """Give every child back the CPUs it was started with (the import is done); idempotent."""
        cpus, self._cpus = self._cpus, None
        restricted, self._restricted = self._restricted, []
        if cpus is None:
            return
        allowed, elsewhere = cpus
        for proc in restricted:
            with suppress(OSError):  # it exited meanwhile
                if frozenset(os.sched_getaffinity(proc.pid)) == elsewhere:  # else: it set its own since
                    _set_affinity(proc.pid, allowed)

    async def discard_untaken(self) -> None:
        """Terminate and reap every process nobody took, all at once; shielded and bounded (``terminate_group``)."""
        waiting, self._waiting = self._waiting, {}
        with trio.CancelScope(shield=True):
            async with trio.open_nursery() as nursery:
                for name, (_, proc) in waiting.items():
                    logger.debug("server=%s: its early process was not taken; terminating it", name)
                    nursery.start_soon(terminate_group, name, proc)


def _affinity() -> frozenset[int] | None:
    """This process's CPUs, or None where affinity cannot be read (off Linux) or there is only one."""
    getter = getattr(os, "sched_getaffinity", None)
    if getter is None:
        return None
    cpus = frozenset(getter(0))
    return cpus if len(cpus) > 1 else None


def _set_affinity(pid: int, cpus: frozenset[int]) -> bool:
    with suppress(OSError):  # it exited meanwhile, or we may not
        os.sched_setaffinity(pid, cpus)
        return True
    return False


@asynccontextmanager
async def early_servers(settings: Settings) -> AsyncIterator[EarlyServers]:
    """Start the stdio servers early (``EarlyServers.start``); on exit, terminate whatever nobody took."""
    early = EarlyServers()
    try:
        await early.start(settings)
        yield early
    finally:
        early.release_cpus()
        await early.discard_untaken()
