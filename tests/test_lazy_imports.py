"""Start-up imports: what a sidecar without a Redis store never loads."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e


def test_a_sidecar_without_a_redis_store_never_imports_coredis() -> None:
    # coredis is a fifth of the sidecar's start-up; only ``FleetLink`` (a Redis store) loads it.
    probe = "import sys, supervisor.cli, supervisor.serve, supervisor.cache; print('coredis' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout == "False\n"
