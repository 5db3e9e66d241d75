"""The fast path's POST to an HTTP upstream, by httpx and by ``upstream.http1``: ``python -m bench.http_client``.

One fixture server over streamable HTTP (``--tools echo``, 2026-07-28); in this
process, one ``HttpCalls`` on a plain httpx client (the raw pool, as the
sidecar uses it) and one whose pool is taken away (httpx sends each POST, as
before ``upstream.http1``), plus the SDK's own client (``Client.call_tool``)
for scale. Rounds of ``--calls`` sequential echo calls alternate between them,
who goes first rotating; each round prints calls/s, and the end the median
p50 latency and this process's CPU per call of each. The CPU is the client's
own (the server is another process). Not part of ``python -m bench``.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import httpx2
import trio

from bench.harness import median
from supervisor.compat.sdk import stamp_request
from supervisor.upstream.health import TransportHealth
from supervisor.upstream.http_calls import HttpCalls
from tests.sidecar import MARK_ENV, open_http_fixture, open_http_host


def _cpu_sec() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _main(rounds: int, calls: int) -> None:
    os.environ.setdefault(MARK_ENV, "bench-http-client")
    async with AsyncExitStack() as stack:
        fixture = await stack.enter_async_context(open_http_fixture("--tools", "echo"))
        host = await stack.enter_async_context(open_http_host(fixture.url, "", "auto"))
        params: dict[str, Any] = {"name": "echo", "arguments": {"text": "x"}}
        headers = stamp_request(host.session.session, "tools/call", params)
        client = await stack.enter_async_context(httpx2.AsyncClient())
        raw, plain = (
            HttpCalls("fixture", fixture.url, TransportHealth()),
            HttpCalls("fixture", fixture.url, TransportHealth()),
        )
        raw.bind(client)
        plain.bind(client)
        plain.close()
        plain._pool = None  # httpx sends each POST, as before upstream.http1
        assert raw.pool is not None

        async def sdk() -> None:
            await host.session.call_tool("echo", {"text": "x"})

        variants: dict[str, Callable[[], Awaitable[Any]]] = {
            "http1": lambda: raw.request("tools/call", dict(params), headers),
            "httpx": lambda: plain.request("tools/call", dict(params), headers),
            "sdk client": sdk,
        }
        p50: dict[str, list[float]] = {name: [] for name in variants}
        cpu: dict[str, float] = dict.fromkeys(variants, 0.0)
        for variant in variants.values():
            for _ in range(20):
                await variant()
        names = list(variants)
        for index in range(rounds):
            line = f"  round {index + 1}:"
            for name in names[index % len(names) :] + names[: index % len(names)]:
                latencies = []
                before = _cpu_sec()
                for _ in range(calls):
                    start = time.perf_counter()
                    await variants[name]()
                    latencies.append(time.perf_counter() - start)
                cpu[name] += _cpu_sec() - before
                latencies.sort()
                p50[name].append(latencies[len(latencies) // 2])
                line += f" {name} {calls / sum(latencies):7.1f}/s"
            print(line, flush=True)
        raw.close()
    for name in names:
        print(
            f"{name}: p50 {median(p50[name]) * 1e3:.3f} ms"
            f" ({median(p50[name]) / median(p50['httpx']):.2f} of httpx's),"
            f" client CPU per call {cpu[name] / (rounds * calls) * 1e6:.0f} us"
            f" ({cpu[name] / cpu['httpx']:.2f} of httpx's)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.http_client", description=__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    trio.run(_main, args.rounds, args.calls)


if __name__ == "__main__":
    main()
