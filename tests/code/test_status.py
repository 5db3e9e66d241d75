"""Whether code mode can run here, as ``status`` and ``check`` say it (issue 58)."""

from __future__ import annotations

import importlib.util

import pytest

from supervisor.cli import format_status_table
from supervisor.config import code
from supervisor.config.check import describe_settings
from supervisor.config.models import Settings
from supervisor.config.views import ViewSettings
from supervisor.ops.admin import code_mode_status


def _without_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(code, "find_spec", lambda name: None if name == "pydantic_monty" else real(name))


def test_status_says_whether_code_mode_is_available(monkeypatch: pytest.MonkeyPatch) -> None:
    assert code_mode_status() == "available"
    assert "code mode: available" in format_status_table({"code_mode": code_mode_status()})
    _without_the_engine(monkeypatch)
    table = format_status_table({"code_mode": code_mode_status()})
    assert "code mode: unavailable: the code engine is not installed: pip install 'trio-mcp-supervisor[code]'" in table


def test_check_shows_the_code_views_limits_or_why_code_mode_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(views={"agent": ViewSettings(catalog="code")})
    assert "  code = agent; limits: timeout_sec 30.0, max_memory_mb 256" in describe_settings(settings)
    _without_the_engine(monkeypatch)
    assert "  code = code mode unavailable: the code engine is not installed" in describe_settings(Settings())
