"""Profile the sidecar on p2's call path: ``python -m bench.profile_p2 [--seconds S] [--out PREFIX]``.

Starts the p2 sidecar (fixture ``--tools echo``), warms it up, then keeps 32
concurrent callers busy while ``py-spy record`` (installed in this venv) samples
the sidecar process. Writes ``PREFIX.txt`` (py-spy's collapsed stacks) and prints
the calls made, the sidecar's CPU per call over the sampled window (from
``/proc/<pid>/stat``), and the share of samples under a few frames of interest.
Not part of ``python -m bench``: a profile is for choosing what to change.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Final

import trio
from mcp.client.client import ConnectMode

from bench.call_path import CONCURRENCY, _argv, _warm_up
from bench.harness import (
    BENCH_MARK_ENV,
    bench_mark,
    cpu_sec,
    fixture_server,
    open_host,
    reap_marked,
    sidecar_argv,
    summarize_samples,
    write_settings,
)
from tests.sidecar import Host

RATE_HZ: Final = 997
INTEREST: Final = {
    "pydantic validate (any)": ("validate_python", "validate_json", "model_validate"),
    "pydantic dump (any)": ("model_dump", "dump_json", "to_jsonable"),
    "json-rpc framing (wire/frames, pipes, stdio)": ("wire/frames.py", "wire/pipes.py", "wire/stdio.py"),
    "upstream stdio pumps": ("upstream/stdio.py",),
    "sdk server runner": ("runner.py",),
    "sdk dispatcher": ("jsonrpc_dispatcher.py",),
    "sdk client session": ("client/session.py",),
    "otel": ("_otel.py", "opentelemetry"),
    "logging": ("logging/__init__.py",),
    "trio scheduler/io": ("trio/_core/_run.py", "trio/_core/_io_epoll.py"),
    "anyio streams": ("anyio/streams/memory.py",),
    "supervisor front/upstream": (
        "supervisor/host/front.py",
        "supervisor/host/pipeline/driver.py",
        "supervisor/host/pipeline/adapters.py",
        "supervisor/upstream/session.py",
    ),
}


async def sample_under_load(
    host: Host, tool: str, pid: int, *, seconds: float, out: Path, concurrency: int, text: str = "x"
) -> None:
    """Keep ``concurrency`` callers of ``tool`` busy on ``host`` while ``py-spy`` samples ``pid``; print the window."""
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    calls = 0
    stop = trio.Event()

    async def caller() -> None:
        nonlocal calls
        while not stop.is_set():
            await host.session.call_tool(tool, {"text": text})
            calls += 1

    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(caller)
        await trio.sleep(1.0)  # reach a steady state before sampling
        calls_before, cpu_before = calls, cpu_sec(pid)
        spy = await trio.run_process(
            [py_spy, "record", "--pid", str(pid), "--rate", str(RATE_HZ), "--duration", str(int(seconds)),
             "--format", "raw", "--output", str(out), "--nonblocking", "--gil"],
            capture_stdout=True, capture_stderr=True, check=False,
        )  # fmt: skip
        calls_window, cpu_window = calls - calls_before, cpu_sec(pid) - cpu_before
        stop.set()
    if spy.returncode != 0:
        print(spy.stderr.decode(errors="replace"), file=sys.stderr)
    print(f"calls in window {calls_window} ({calls_window / seconds:.0f}/s at c{concurrency})")
    print(f"sidecar CPU per call {cpu_window / max(calls_window, 1) * 1e6:.0f} us")


async def _main(args: argparse.Namespace) -> None:
    mode: ConnectMode = args.mode
    with tempfile.TemporaryDirectory() as tmp:
        argv = _argv("sidecar", Path(tmp), Path(tmp) / "sidecar.jsonl")
        if args.legacy_upstream:  # an era pair of bench.call_pairs: the fixture speaks only the handshake era
            fixture = fixture_server("--tools", "echo", "--legacy-only", env={BENCH_MARK_ENV: bench_mark()})
            config = write_settings(Path(tmp) / "pair.toml", {"fx": fixture}, supervisor={"log_level": "warning"})
            argv = sidecar_argv(config)
        try:
            async with open_host(argv, mode=mode) as host:
                with trio.fail_after(60):
                    await _warm_up(host, "mcp__fx__echo")
                await sample_under_load(
                    host, "mcp__fx__echo", host.process.pid, seconds=args.seconds, out=args.out,
                    concurrency=args.concurrency, text="x" * args.text_bytes,
                )  # fmt: skip
        finally:
            await reap_marked("profile_p2")
    summarize_samples(args.out, INTEREST)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_p2", description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=Path("/tmp/profile_p2.txt"))
    parser.add_argument("--summarize", action="store_true", help="only summarize an existing --out file")
    parser.add_argument("--text-bytes", type=int, default=1, help="size of the echoed text (1 MB: large results)")
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY)
    parser.add_argument("--mode", choices=("auto", "legacy"), default="auto", help="the host's era (legacy: handshake)")
    parser.add_argument("--legacy-upstream", action="store_true", help="the fixture speaks only the handshake era")
    args = parser.parse_args()
    if args.summarize:
        summarize_samples(args.out, INTEREST)
        return
    trio.run(_main, args)


if __name__ == "__main__":
    main()
