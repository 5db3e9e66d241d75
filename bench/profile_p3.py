"""Profile the sidecar's cold start on p3's lite fleet: ``python -m bench.profile_p3 [--servers N] [--out PATH]``.

Starts ``python -m supervisor run`` for N lite servers (``bench.lite_server``,
100 tools each) under ``py-spy record`` (installed in this venv; idle samples
excluded), waits, as p3 does, until the host's ``tools/list`` shows every tool,
then closes the sidecar's stdin so py-spy writes its collapsed stacks. Prints
the ready time, the sidecar's CPU at ready, how many ``tools/list`` the host
made while it waited, and the share of samples under a few frames of interest.
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

from bench.fleet import READY_BOUND_SEC, TOOLS_PER_SERVER, _config
from bench.harness import cpu_sec, open_host, reap_marked, summarize_samples

RATE_HZ: Final = 250
INTEREST: Final = {
    "sdk list_tools (session)": ("list_tools (mcp/client/session.py",),
    "sdk send_request validation": ("validate_server_result", "model_validate (pydantic"),
    "sdk response cache (read/write)": ("mcp/client/caching.py",),
    "deepcopy": ("deepcopy",),
    "model_copy": ("model_copy",),
    "registry swap": ("supervisor/catalog/registry.py",),
    "catalog sync": ("supervisor/catalog_sync.py",),
    "client construction + connect": ("__aenter__ (mcp/client/client.py", "__post_init__ (mcp/client/client.py"),
    "discover / initialize": ("negotiate_auto", "initialize (mcp/client/session.py"),
    "process spawn": ("open_process", "_posixsubprocess", "fork_exec"),
    "logging": ("logging/__init__.py",),
    "front (host answers)": (
        "supervisor/host/front.py",
        "supervisor/catalog/wire_form.py",
        "supervisor/host/stdio/reader.py",
    ),
    "sdk server runner": ("mcp/server/runner.py",),
    "trio scheduler/io": ("trio/_core/_run.py", "trio/_core/_io_epoll.py"),
    "imports": ("_find_and_load",),
}


def _sidecar_cpu_sec(py_spy_pid: int) -> float:
    """The CPU seconds of py-spy's child (the sidecar) so far."""
    children = Path(f"/proc/{py_spy_pid}/task/{py_spy_pid}/children").read_text().split()
    return cpu_sec(int(children[0])) if children else float("nan")


async def _main(servers: int, out: Path) -> None:
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    expected = servers * TOOLS_PER_SERVER
    with tempfile.TemporaryDirectory() as tmp:
        config = _config(Path(tmp), servers, "lite")
        argv = [py_spy, "record", "--rate", str(RATE_HZ), "--format", "raw", "--output", str(out), "--",
                sys.executable, "-m", "supervisor", "run", "--config", str(config)]  # fmt: skip
        lists = 0
        try:
            start = trio.current_time()
            async with open_host(argv, mode="auto") as host:

                def ready(names: list[str]) -> bool:
                    nonlocal lists
                    lists += 1
                    return len(names) >= expected

                await host.wait_tools(ready, bound_sec=READY_BOUND_SEC, poll_sec=0.1)
                ready_sec = trio.current_time() - start
                cpu = _sidecar_cpu_sec(host.process.pid)
        finally:
            await reap_marked("profile_p3")
    print(f"{servers} lite servers ready in {ready_sec:.2f} s (under py-spy); sidecar CPU at ready {cpu:.2f} s")
    print(f"host tools/list calls while waiting: {lists}")
    summarize_samples(out, INTEREST, top=20)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_p3", description=__doc__)
    parser.add_argument("--servers", type=int, default=50)
    parser.add_argument("--out", type=Path, default=Path("/tmp/profile_p3.txt"))
    parser.add_argument("--summarize", action="store_true", help="only summarize an existing --out file")
    args = parser.parse_args()
    if args.summarize:
        summarize_samples(args.out, INTEREST, top=20)
        return
    trio.run(_main, args.servers, args.out)


if __name__ == "__main__":
    main()
