"""``serve`` freezes the start-up heap before anything starts (``supervisor.serve``, issue 11)."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
import trio

from supervisor import serve as serve_module
from supervisor.config.loader import load_settings
from tests.sidecar import fixture_server, write_settings

BOUND_SEC = 10.0


async def test_serve_freezes_the_start_up_heap_before_any_server_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = load_settings(write_settings(tmp_path, {"fx": fixture_server("--tools", "echo")}))
    frozen_at_run: list[int] = []

    async def run_nothing(*args: object, **kwargs: object) -> None:
        frozen_at_run.append(gc.get_freeze_count())
        await trio.lowlevel.checkpoint()

    monkeypatch.setattr(serve_module, "_run", run_nothing)
    gc.unfreeze()
    try:
        with trio.fail_after(BOUND_SEC):
            await serve_module.serve(settings)
    finally:
        gc.unfreeze()  # the rest of the test session collects as usual
    assert frozen_at_run and frozen_at_run[0] > 0, "the heap was not frozen before the servers started"
