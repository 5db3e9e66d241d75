"""What code mode costs per run and per inner call, beside a host's own call in the same run (issue 58).

``python -m bench.code_run [--rounds N] [--calls N]``. One sidecar (this
checkout's ``run --view code`` over the fixture server's ``echo``; the view is
``catalog = "code"`` with ``always_visible = ["fx__echo"]``, so the host can
call ``echo`` directly too) and one 2026-era host over stdio. Rounds alternate
the variants, so a busy box slows each alike. It prints:

* **run overhead**: the wall time of ``run_code("1")``, type check off and
  on, p50 and p90, beside the same host's direct ``echo`` call (what any
  tools/call costs on this box: the floor a run adds to);
* **a program's calls**: one ``run_code`` whose program makes ``--calls``
  sequential ``await fx.echo(text=...)`` (type check off), against ``--calls``
  direct ``echo`` calls from the host: the sidecar's CPU per call
  (``/proc/<pid>/stat``: user + system, threads included; the monty worker is
  a child of its own and is reported apart) and the wall per call, and the
  difference (the inner call's extra cost over a host's own call);
* the engine alone (``Sandbox.execute("1")`` in this process, no MCP): its p50.

Targets (the issue's): overhead p50 at most 5 ms without the type check, 50 ms
with it; an inner call at most +100 us of sidecar CPU over a host's call.
Numbers only, no assertions: the machines are shared and noisy.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import trio

from bench.harness import child_pids, cpu_sec, fixture_server, open_host, percentile, sidecar_argv, write_settings
from supervisor.code.engine import Sandbox, tools_module
from supervisor.config.code import CodeLimits

ECHO: Final = "fx__echo"
TRIVIAL: Final = "1"


def _settings(directory: Path, calls: int) -> Path:
    return write_settings(
        directory / "settings.toml",
        {"fx": fixture_server("--name", "fx", "--tools", "echo")},
        mcp_names=False,
        supervisor={"log_level": "warning"},
        views={
            "code": {
                "catalog": "code",
                "always_visible": [ECHO],
                "code": {"max_calls": calls + 10, "type_check": False},
            }
        },
    )


def _loop(calls: int) -> str:
    return f"from tools import fx\nfor i in range({calls}):\n    await fx.echo(text='x')\n{calls}"


async def _timed(call: Any) -> float:
    started = time.perf_counter()
    result = await call
    if getattr(result, "is_error", False):
        raise RuntimeError(f"the call failed: {result.content}")
    return (time.perf_counter() - started) * 1000


async def _engine_alone(rounds: int) -> float:
    sandbox = Sandbox(max_workers=1)
    tools = tools_module({})
    limits = CodeLimits(type_check=False)

    async def nothing(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        raise AssertionError(name)

    async with trio.open_nursery() as nursery:
        await nursery.start(sandbox.serve)
        samples = []
        for _ in range(rounds + 5):
            started = time.perf_counter()
            await sandbox.execute(TRIVIAL, tools, nothing, limits)
            samples.append((time.perf_counter() - started) * 1000)
        nursery.cancel_scope.cancel()
    return statistics.median(samples[5:])


async def measure(rounds: int, calls: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="code-run-") as name:
        config = _settings(Path(name), calls)
        async with open_host([*sidecar_argv(config), "--view", "code"]) as host:
            session = host.session
            pid = host.process.pid if host.process is not None else 0
            await session.call_tool("run_code", {"code": TRIVIAL})  # the pool opens, a worker starts
            direct: list[float] = []
            unchecked: list[float] = []
            checked: list[float] = []
            for _ in range(rounds):
                direct.append(await _timed(session.call_tool(ECHO, {"text": "x"})))
                unchecked.append(await _timed(session.call_tool("run_code", {"code": TRIVIAL})))
            # type_check is per view: the checked runs use a program that imports tools (what a real one does)
            checked_program = "from tools import fx\n1"
            host_cpu: list[float] = []
            inner_cpu: list[float] = []
            host_wall: list[float] = []
            inner_wall: list[float] = []
            for _ in range(max(1, rounds // 10)):
                before = cpu_sec(pid)
                started = time.perf_counter()
                for _ in range(calls):
                    await session.call_tool(ECHO, {"text": "x"})
                host_wall.append((time.perf_counter() - started) / calls * 1e6)
                host_cpu.append((cpu_sec(pid) - before) / calls * 1e6)
                workers = child_pids(pid)
                worker_before = sum(cpu_sec(w) for w in workers)
                before = cpu_sec(pid)
                started = time.perf_counter()
                result = await session.call_tool("run_code", {"code": _loop(calls)})
                inner_wall.append((time.perf_counter() - started) / calls * 1e6)
                inner_cpu.append((cpu_sec(pid) - before) / calls * 1e6)
                worker_cpu = (sum(cpu_sec(w) for w in workers) - worker_before) / calls * 1e6
                if result.is_error:
                    raise RuntimeError(f"the loop failed: {result.content}")
        checked = await _checked_runs(rounds, checked_program)
        searched_cpu, searched_wall = await _search_view_calls(max(1, rounds // 10), calls)
    return {
        "search_call_cpu_us": searched_cpu,
        "search_call_wall_us": searched_wall,
        "direct_p50_ms": percentile(direct, 0.5),
        "run_unchecked_p50_ms": percentile(unchecked, 0.5),
        "run_unchecked_p90_ms": percentile(unchecked, 0.9),
        "run_checked_p50_ms": percentile(checked, 0.5),
        "run_checked_p90_ms": percentile(checked, 0.9),
        "host_call_cpu_us": statistics.median(host_cpu),
        "inner_call_cpu_us": statistics.median(inner_cpu),
        "worker_cpu_per_call_us": worker_cpu,
        "host_call_wall_us": statistics.median(host_wall),
        "inner_call_wall_us": statistics.median(inner_wall),
        "engine_alone_p50_ms": await _engine_alone(rounds),
    }


async def _checked_runs(rounds: int, program: str) -> list[float]:
    """``run_code`` with the type check on (the view's default), in a sidecar of its own."""
    with tempfile.TemporaryDirectory(prefix="code-run-checked-") as name:
        directory = Path(name)
        config = write_settings(
            directory / "settings.toml",
            {"fx": fixture_server("--name", "fx", "--tools", "echo")},
            mcp_names=False,
            supervisor={"log_level": "warning"},
            views={"code": {"catalog": "code"}},
        )
        async with open_host([*sidecar_argv(config), "--view", "code"]) as host:
            await host.session.call_tool("run_code", {"code": program})
            return [await _timed(host.session.call_tool("run_code", {"code": program})) for _ in range(rounds)]


async def _search_view_calls(rounds: int, calls: int) -> tuple[float, float]:
    """A search view's ``call_tool(name=fx__echo)``: the same runner and upstream leg as a program's call."""
    with tempfile.TemporaryDirectory(prefix="code-run-search-") as name:
        config = write_settings(
            Path(name) / "settings.toml",
            {"fx": fixture_server("--name", "fx", "--tools", "echo")},
            mcp_names=False,
            supervisor={"log_level": "warning"},
            views={"find": {"catalog": "search"}},
        )
        async with open_host([*sidecar_argv(config), "--view", "find"]) as host:
            pid = host.process.pid if host.process is not None else 0
            arguments = {"name": ECHO, "arguments": {"text": "x"}}
            await host.session.call_tool("call_tool", arguments)
            cpu: list[float] = []
            wall: list[float] = []
            for _ in range(rounds):
                before, started = cpu_sec(pid), time.perf_counter()
                for _ in range(calls):
                    await host.session.call_tool("call_tool", arguments)
                wall.append((time.perf_counter() - started) / calls * 1e6)
                cpu.append((cpu_sec(pid) - before) / calls * 1e6)
            return statistics.median(cpu), statistics.median(wall)


def _print(f: dict[str, float], calls: int) -> None:
    direct = f["direct_p50_ms"]
    unchecked, checked = f["run_unchecked_p50_ms"], f["run_checked_p50_ms"]
    print("code mode's cost, this box (one 2026-era stdio host, this checkout's sidecar)")
    print(f"  a direct echo call through the sidecar   p50 {direct:7.2f} ms")
    print(f"  run_code('1'), no type check             p50 {unchecked:7.2f} ms (p90 {f['run_unchecked_p90_ms']:.2f}; "
          f"{unchecked / direct:.2f}x the direct call; overhead {unchecked - direct:.2f} ms; target 5 ms)")  # fmt: skip
    print(f"  run_code(import tools), type-checked     p50 {checked:7.2f} ms (p90 {f['run_checked_p90_ms']:.2f}; "
          f"overhead {checked - direct:.2f} ms; target 50 ms)")  # fmt: skip
    print(f"  the engine alone, Sandbox.execute('1')   p50 {f['engine_alone_p50_ms']:7.2f} ms")
    host, inner, searched = f["host_call_cpu_us"], f["inner_call_cpu_us"], f["search_call_cpu_us"]
    print(f"per call, {calls} sequential echo calls, the sidecar's CPU:")
    print(f"  a host's direct call {host:6.0f} us; a program's {inner:6.0f} us "
          f"({inner - host:+.0f} us, {inner / host:.2f}x; target +100 us)")  # fmt: skip
    print(f"  a search view's call_tool {searched:6.0f} us (the same runner and upstream leg as a program's call); "
          f"a program's {inner - searched:+.0f} us beside it")  # fmt: skip
    print(f"  the monty worker's own CPU per program call: {f['worker_cpu_per_call_us']:.0f} us")
    wall_host, wall_inner = f["host_call_wall_us"], f["inner_call_wall_us"]
    ratio = wall_inner / wall_host
    print(f"  wall: a host's call {wall_host:6.0f} us, a program's {wall_inner:6.0f} us ({ratio:.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    figures = trio.run(measure, args.rounds, args.calls)
    _print(figures, args.calls)


if __name__ == "__main__":
    main()
