"""``mcp-supervisor pins list|diff|approve|reset``: review and approve pinned definitions (issue 27).

``list``, ``diff`` and ``approve`` connect to the servers once, as ``tools``
does, with pinning read-only (``Supervisor(pin_writes=False)``): each server's
``PinGuard`` judges what the server lists *now* against its pins, and nothing
is written but what ``approve`` approves. So what ``diff`` shows is what
``approve`` approves, and both work with no sidecar running. ``reset`` only
deletes the server's pins (the next sync trusts the server on first use
again). A running sidecar sees an approval or a reset within
``pins.watch.PIN_POLL_SEC`` and judges its listing again: withheld tools appear
and its hosts get a change notice.

Names are the server's raw names (``read_file``, not ``mcp__files__read_file``),
as the warnings, ``status`` and a withheld call's error give them.

Concurrency: one nursery holds the Supervisor, cancelled as soon as the answer
is known; the wait for the servers' first attempts is bounded as in ``oneshot``.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import trio

from supervisor.config.models import Settings
from supervisor.errors import EXIT_OK, EXIT_RUNTIME, ConfigError
from supervisor.ops.progress import Progress
from supervisor.pins.diff import render_diff
from supervisor.pins.guard import PinGuard
from supervisor.pins.judge import PinKey, approve, judge, now_iso
from supervisor.pins.watch import PIN_POLL_SEC
from supervisor.root import Supervisor
from supervisor.upstream.spawn import EarlyServers


async def pins(
    settings: Settings, action: str, server: str | None, name: str | None, *, early: EarlyServers | None = None
) -> int:
    """Run one ``pins`` action; the exit code."""
    if server is not None and server not in settings.mcp_servers:
        known = ", ".join(settings.mcp_servers) or "none"
        raise ConfigError(f"pins {action}: no server {server!r} in the settings (servers: {known})")
    if action == "reset":
        assert server is not None
        return await _reset(settings, server)
    names = [server] if server is not None else [n for n, s in settings.mcp_servers.items() if s.enabled]
    async with _judged(settings, names, early) as guards:
        match action:
            case "list":
                return _list(guards)
            case "diff":
                assert server is not None
                return _diff(guards[server], name)
            case "approve":
                assert server is not None
                return await _approve(guards[server], name)
    raise AssertionError(f"unhandled pins action {action!r}")


@asynccontextmanager
async def _judged(
    settings: Settings, names: Sequence[str], early: EarlyServers | None
) -> AsyncIterator[dict[str, PinGuard]]:
    """Connect once, judge every server read-only, and yield each named server's guard.

    Raises:
        ConfigError: A named server is disabled.
    """
    async with trio.open_nursery() as nursery:
        supervisor = Supervisor(
            settings, on_status=Progress(sys.stderr, settings.mcp_servers), early=early, pin_writes=False
        )
        await nursery.start(supervisor.run)
        with trio.move_on_after(supervisor.startup_bound_sec + 1):
            await supervisor.wait_first_attempts()
        guards: dict[str, PinGuard] = {}
        for name in names:
            actor = supervisor.actors.get(name)
            if actor is None or actor.pins is None:
                raise ConfigError(f"server {name!r} is disabled; enable it to review its pins")
            guard = actor.pins
            if guard.judgement is None:
                why = actor.status.last_error or actor.status.state
                print(f"mcp-supervisor: server {name!r} did not list its tools ({why})", file=sys.stderr)
            else:
                await _as_the_sidecar_sees_it(guard)
            guards[name] = guard
        try:
            yield guards
        finally:
            nursery.cancel_scope.cancel()


async def _reset(settings: Settings, server: str) -> int:
    supervisor = Supervisor(settings, pin_writes=False)
    async with trio.open_nursery() as nursery:
        # Only the catalog cache (with the Redis store, the fleet store's client): no server is started.
        await nursery.start(supervisor.cache.run)
        had = await supervisor.pin_store.reset(server)
        nursery.cancel_scope.cancel()
    print(
        f"{server}: pins forgotten; its next sync pins what it lists then (trust on first use)"
        if had
        else f"{server}: had no pins"
    )
    _warn_local_only(supervisor.pin_store)
    return EXIT_OK


def _warn_local_only(store: object) -> None:
    if getattr(store, "local_only", False):
        print(
            "mcp-supervisor: the fleet store was unreachable: this holds on this machine only; "
            "run the command again once the fleet store is back",
            file=sys.stderr,
        )


async def _as_the_sidecar_sees_it(guard: PinGuard) -> None:
    """Judge again with what a running sidecar noted it saw (``PinGuard`` notes it), over this process's listing.

    A server that changed a definition at run time may list the original to this
    fresh connection; the sidecar's note is what it withholds, so that is what is
    shown and approved.
    """
    seen = await guard.store.load_seen(guard.server)
    if not seen or guard.judgement is None:
        return
    guard.current = {**guard.current, **{key: record.definition for key, record in seen.items()}}
    pinned = await guard.store.load(guard.server)
    guard.judgement = judge(pinned, guard.current, guard.policy)


def _list(guards: dict[str, PinGuard]) -> int:
    rows = [("SERVER", "KIND", "NAME", "STATE", "PINNED", "DETAIL")]
    for server, guard in guards.items():
        verdict = guard.judgement
        if verdict is None:
            rows.append((server, "-", "-", "unknown", "-", "the server did not list its tools"))
            continue
        for key in sorted({*verdict.fingerprints, *verdict.pinned}):
            record = guard.pinned.get(key)
            pinned = f"{record.pinned_at} ({record.source})" if record is not None else "-"
            flags = verdict.flagged.get(key, ())
            details = ["hidden characters: " + ", ".join(sorted({c.label for c in flags}))] if flags else []
            state = verdict.state(key)
            if verdict.first_use:
                state = "new"
                details.append("never pinned: a sidecar pins it as it is at its first sync (trust on first use)")
            rows.append((server, key[0], key[1], state, pinned, "; ".join(details)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
        print(f"{cells}  {row[-1]}".rstrip())
    return EXIT_OK


def _keys(guard: PinGuard, name: str | None) -> list[PinKey]:
    """The keys ``name`` means (a tool, a prompt, or both by that name); all that are not as pinned for None.

    Raises:
        ConfigError: ``name`` is neither listed nor pinned.
    """
    verdict = guard.judgement
    if verdict is None:
        raise ConfigError(f"server {guard.server!r} did not list its tools; nothing to review")
    known = {*verdict.fingerprints, *verdict.pinned}
    if name is None:
        return sorted(key for key in verdict.fingerprints if verdict.state(key) not in ("pinned", "unpinned"))
    candidates: list[PinKey] = [("tool", name), ("prompt", name)]
    keys = [key for key in candidates if key in known]
    if not keys:
        listed = ", ".join(sorted(n for _, n in known)) or "none"
        raise ConfigError(f"server {guard.server!r} lists no tool or prompt {name!r} (it has: {listed})")
    return keys


def _diff(guard: PinGuard, name: str | None) -> int:
    keys = _keys(guard, name)
    shown = 0
    for key in keys:
        record = guard.pinned.get(key)
        text = render_diff(key, record.definition if record is not None else None, guard.current.get(key))
        if text:
            print(text)
            shown += 1
    if not shown:
        print(f"{guard.server}: {'nothing differs from its pins' if name is None else f'{name} is as pinned'}")
    return EXIT_OK


async def _approve(guard: PinGuard, name: str | None) -> int:
    keys = [key for key in _keys(guard, name) if key in guard.current]
    if not keys:
        print(f"{guard.server}: nothing to approve (everything it lists is as pinned)")
        return EXIT_OK
    records = approve(guard.current, keys, now=now_iso())
    await guard.store.update(guard.server, records)
    for kind, raw in keys:
        print(f"{guard.server}: approved {kind} {raw}")
    print(f"a running sidecar serves the approved definitions within {PIN_POLL_SEC:g} s, and tells its hosts")
    _warn_local_only(guard.store)
    return EXIT_OK if records else EXIT_RUNTIME
