"""Start-up imports: what a sidecar without a Redis store never loads."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e


def test_a_sidecar_without_a_redis_store_never_imports_coredis() -> None:
    # coredis is a fifth of the sidecar's start-up; only ``FleetLink`` (a Redis store) loads it.
    probe = "import sys, supervisor.cli, supervisor.serve, supervisor.catalog.cache; print('coredis' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout == "False\n"


def test_a_sidecar_with_a_stdio_front_and_no_admin_endpoint_never_imports_the_http_server() -> None:
    # The HTTP servers and their guard are ~60 ms of the start-up; only the HTTP front and admin load them.
    probe = (
        "import sys, supervisor.cli, supervisor.serve, supervisor.upstream.spawn;"
        " print(sorted(m for m in ('hypercorn', 'supervisor.ops.http') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout == "[]\n"


def test_an_http_front_without_an_admin_endpoint_never_imports_hypercorn() -> None:
    # The front has its own server (ops.http1_server); hypercorn serves the admin endpoint only.
    probe = "import sys, supervisor.host.http.link as h; print('hypercorn' in sys.modules, h.serve_http1.__module__)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout == "False supervisor.ops.http1_server\n"
