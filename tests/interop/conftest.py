"""The interop tests' fixture: server-everything's settings table (needs ``tests/interop/install.sh``)."""

from __future__ import annotations

import shutil

import pytest


@pytest.fixture
def everything_server() -> dict[str, object]:
    """server-everything's settings table (a sync fixture, so a missing install fails as one clear line).

    Shared by ``interop/test_interop.py`` and ``interop/test_interop_fidelity.py``.
    """
    from tests.interop.test_interop import EVERYTHING_JS, INTEROP_DIR, NODE_STARTUP_TIMEOUT_SEC, require_installed  # noqa: PLC0415
    from tests.sidecar import command_server  # noqa: PLC0415 - keeps this module's imports light

    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH: server-everything needs Node.js (20+)", pytrace=False)
    require_installed(
        "server-everything",
        EVERYTHING_JS,
        INTEROP_DIR / "node_modules/.interop-stamp",
        INTEROP_DIR / "package-lock.json",
    )
    return command_server([node, str(EVERYTHING_JS), "stdio"], startup_timeout_sec=NODE_STARTUP_TIMEOUT_SEC)
