"""Prometheus metrics of one Supervisor, on its own ``CollectorRegistry`` (never the global one).

The Front and the ServerActors report through small synchronous hooks
(``call_finished``, ``sync_finished``, ``upstream_listed``,
``generation_ended``); values that are cheaper to read than to track (catalog
size, servers by state, child processes alive) are computed when ``/metrics``
is scraped. Nothing here awaits: under trio every hook is atomic, and
prometheus-client's own locks are never contended across tasks.

Exported (all prefixed ``mcp_supervisor_``):

* ``tool_calls_total{server, outcome}``: host calls routed upstream; outcome is
  ``ok``, ``tool_error`` (``isError`` result), ``rpc_error`` (JSON-RPC error),
  ``unavailable``, ``timeout`` or ``cancelled``.
* ``tool_call_duration_seconds{server}``: latency of those calls (histogram).
  These two move on every call, so they are plain numbers exposed at scrape
  time (``_CallCollector``, single-threaded like every hook), without the
  ``_created`` samples prometheus-client adds.
* ``syncs_total{server, reason, outcome}``: catalog syncs, ``ok`` or ``failed``.
* ``reconnects_total{server}``, ``give_ups_total{server}``.
* ``upstream_tools_list_total{server}``: syncs whose ``tools/list`` went to the
  server (a paginated listing counts once; a catalog-reuse hit does not count).
* ``catalog_tools``, ``server_tools{server}``, ``servers{state}``, ``child_processes``.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import TYPE_CHECKING, Final, get_args

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from supervisor.calls.results import CallOutcome
from supervisor.ops.status import ServerState
from supervisor.upstream.process_group import live_children

if TYPE_CHECKING:
    from supervisor.ops.status import ServerStatus

PREFIX: Final = "mcp_supervisor"
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
_LATENCY_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_LATENCY_LE: Final = (*(repr(bound) for bound in _LATENCY_BUCKETS), "+Inf")
"""The buckets' ``le`` labels, spelled as prometheus-client spells them (``floatToGoString``)."""


class Metrics:
    """The metric families of one Supervisor and the hooks that move them."""

    def __init__(
        self,
        *,
        statuses: Callable[[], Sequence[ServerStatus]],
        catalog_size: Callable[[], int],
        store_status: Callable[[], Mapping[str, object]] | None = None,
    ) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        if store_status is not None:
            r.register(_CatalogStoreCollector(store_status))
        self._calls = _CallCollector()
        r.register(self._calls)
        self._syncs = Counter(
            f"{PREFIX}_syncs", "Catalog syncs (fetch + swap), by reason and outcome.", ["server", "reason", "outcome"],
            registry=r,
        )  # fmt: skip
        self._reconnects = Counter(
            f"{PREFIX}_reconnects", "Generations that ended and were retried.", ["server"], registry=r
        )
        self._give_ups = Counter(f"{PREFIX}_give_ups", "Servers given up after max_attempts.", ["server"], registry=r)
        self._listed = Counter(
            f"{PREFIX}_upstream_tools_list",
            "Syncs whose tools/list went to the server (not served by catalog reuse).",
            ["server"],
            registry=r,
        )
        r.register(_ScrapeTimeCollector(statuses, catalog_size))

    # -- hooks (synchronous, never raise) -------------------------------------------------

    def call_finished(self, server: str, outcome: CallOutcome, seconds: float) -> None:
        self._calls.add(server, outcome, seconds)

    def sync_finished(self, server: str, reason: str, ok: bool) -> None:
        self._syncs.labels(server, reason, "ok" if ok else "failed").inc()

    def upstream_listed(self, server: str) -> None:
        self._listed.labels(server).inc()

    def generation_ended(self, server: str, *, gave_up: bool) -> None:
        (self._give_ups if gave_up else self._reconnects).labels(server).inc()

    # -- exposition -----------------------------------------------------------------------

    def render(self) -> bytes:
        """The Prometheus text exposition of every family."""
        return generate_latest(self.registry)


class _CallCollector(Collector):
    """``tool_calls_total`` and ``tool_call_duration_seconds``, kept as plain numbers and exposed at scrape time.

    They move on every call: prometheus-client's ``labels()`` lookup and its
    locked ``inc``/``observe`` (a linear bucket scan) were about 5% of the
    splice's CPU per call; here a call is a dict lookup, a bisect and three
    additions, under trio's one thread.
    """

    def __init__(self) -> None:
        self._counts: dict[tuple[str, CallOutcome], int] = {}
        self._latency: dict[str, _Latency] = {}

    def add(self, server: str, outcome: CallOutcome, seconds: float) -> None:
        key = (server, outcome)
        self._counts[key] = self._counts.get(key, 0) + 1
        latency = self._latency.get(server)
        if latency is None:
            latency = self._latency[server] = _Latency()
        latency.buckets[bisect_left(_LATENCY_BUCKETS, seconds)] += 1
        latency.total += seconds

    def collect(self) -> Iterable[Metric]:
        calls = CounterMetricFamily(
            f"{PREFIX}_tool_calls", "Host tool calls routed upstream, by outcome.", labels=["server", "outcome"]
        )
        for (server, outcome), count in self._counts.items():
            calls.add_metric([server, outcome], count)
        yield calls
        latency = HistogramMetricFamily(
            f"{PREFIX}_tool_call_duration_seconds", "Latency of host tool calls routed upstream.", labels=["server"]
        )
        for server, figures in self._latency.items():
            buckets = list(zip(_LATENCY_LE, accumulate(figures.buckets), strict=True))
            latency.add_metric([server], buckets, figures.total)
        yield latency


@dataclass(slots=True)
class _Latency:
    buckets: list[int] = field(default_factory=lambda: [0] * (len(_LATENCY_BUCKETS) + 1))
    """Per bucket (the last one: above every bound), not cumulative."""
    total: float = 0.0


PIN_STATES: Final = ("changed", "new", "withheld", "flagged")
"""The states of ``ServerStatus.pins`` (``pins.guard.SUMMARY_STATES``), each a label value of its gauge."""


class _ScrapeTimeCollector(Collector):
    """Gauges read at scrape time instead of being tracked."""

    def __init__(self, statuses: Callable[[], Sequence[ServerStatus]], catalog_size: Callable[[], int]) -> None:
        self._statuses = statuses
        self._catalog_size = catalog_size

    def collect(self) -> Iterable[Metric]:
        statuses = self._statuses()
        yield GaugeMetricFamily(f"{PREFIX}_catalog_tools", "Tools the host sees now.", value=self._catalog_size())
        per_server = GaugeMetricFamily(f"{PREFIX}_server_tools", "Tools registered per server.", labels=["server"])
        states = GaugeMetricFamily(f"{PREFIX}_servers", "Configured servers by state.", labels=["state"])
        pins = GaugeMetricFamily(
            f"{PREFIX}_pinned_definitions",
            "Tools and prompts not served as pinned, per server, by state (changed, new, withheld, flagged).",
            labels=["server", "state"],
        )
        counts = dict.fromkeys(get_args(ServerState), 0)  # every state, so a new one never raises here
        for status in statuses:
            per_server.add_metric([status.name], status.tool_count)
            counts[status.state] += 1
            for pin_state in PIN_STATES:
                pins.add_metric([status.name, pin_state], len(status.pins.get(pin_state, ())))
        for state, count in counts.items():
            states.add_metric([state], count)
        yield per_server
        yield states
        yield pins
        yield GaugeMetricFamily(
            f"{PREFIX}_child_processes", "Live child processes of the sidecar (stdio servers).", value=live_children()
        )


class _CatalogStoreCollector(Collector):
    """The catalog store's figures (DESIGN I14), read at scrape time from ``CatalogCache.store_status``."""

    _STATES: Final = ("local", "connecting", "up", "down")

    def __init__(self, store_status: Callable[[], Mapping[str, object]]) -> None:
        self._store_status = store_status

    def collect(self) -> Iterable[Metric]:
        status = self._store_status()
        state = GaugeMetricFamily(
            f"{PREFIX}_catalog_store_state", "1 for the catalog store's current state.", labels=["backend", "state"]
        )
        for name in self._STATES:
            state.add_metric([str(status.get("backend")), name], 1.0 if status.get("state") == name else 0.0)
        yield state
        hits = CounterMetricFamily(
            f"{PREFIX}_catalog_hits", "Catalog listings served without an upstream round trip.", labels=["source"]
        )
        hits.add_metric(["local"], _number(status.get("local_hits")))
        hits.add_metric(["fleet"], _number(status.get("fleet_hits")))
        yield hits
        yield GaugeMetricFamily(
            f"{PREFIX}_catalog_store_outbox", "Fleet store operations waiting to be sent.",
            value=_number(status.get("outbox_depth")),
        )  # fmt: skip


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0
