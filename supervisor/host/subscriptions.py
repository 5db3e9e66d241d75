"""Resource subscriptions of every host, reference-counted per (host, URI) (DESIGN I13).

A host is a handshake-era ``Connection`` (``resources/subscribe``) or one
2026-era ``subscriptions/listen`` stream (its URI filter). Each (host, URI)
counts once however often it is asked for. A server is subscribed upstream to
a URI while at least one host holds it; ``on_change(server, uris)`` is called
with the server's new URI set whenever it changes (the ServerActor applies it
to every generation, so subscriptions survive reconnects). A host that leaves
releases everything it held.

Concurrency: synchronous bookkeeping only; ``on_change`` must not block.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable


class Subscriptions:
    """(host, URI) → the server that serves the URI."""

    def __init__(self) -> None:
        self._by_host: dict[Hashable, dict[str, str]] = {}
        self._on_change: Callable[[str, frozenset[str]], None] | None = None

    def on_change(self, callback: Callable[[str, frozenset[str]], None]) -> None:
        self._on_change = callback

    def subscribe(self, host: Hashable, uri: str, server: str) -> None:
        held = self._by_host.setdefault(host, {})
        previous = held.get(uri)
        held[uri] = server
        if previous != server:
            self._changed({server} | ({previous} if previous is not None else set()))

    def unsubscribe(self, host: Hashable, uri: str) -> None:
        held = self._by_host.get(host, {})
        server = held.pop(uri, None)
        if not held:
            self._by_host.pop(host, None)
        if server is not None:
            self._changed({server})

    def release(self, host: Hashable) -> None:
        """Forget everything ``host`` held (it left)."""
        held = self._by_host.pop(host, {})
        self._changed(set(held.values()))

    def hosts_of(self, server: str, uri: str) -> list[Hashable]:
        """Every host subscribed to ``uri`` of ``server``."""
        return [host for host, held in self._by_host.items() if held.get(uri) == server]

    def uris_of(self, server: str) -> frozenset[str]:
        """Every URI of ``server`` some host is subscribed to."""
        return frozenset(uri for held in self._by_host.values() for uri, owner in held.items() if owner == server)

    def _changed(self, servers: set[str]) -> None:
        if self._on_change is None:
            return
        for server in sorted(servers):
            self._on_change(server, self.uris_of(server))
