"""The ``[supervisor.code]`` table: the limits of a program a code view runs (issue 58, DESIGN I21).

A view with ``catalog = "code"`` lists ``search_tools`` and ``run_code``; the
program ``run_code`` is given runs in a sandbox (``supervisor.code``), bounded
by these limits. A view may override any of them in its own ``[views.<name>.code]``
table; what it leaves unset comes from here.

The engine is the optional ``code`` extra (``pip install 'trio-mcp-supervisor[code]'``,
pydantic-monty); ``code_engine_problem`` says, without importing it, whether it
is installed, so ``check`` can refuse a code view that cannot run.

Frozen models, validated once by the loader; nothing here awaits.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import Final

from pydantic import BaseModel, Field

from supervisor.config.base import STRICT

CODE_EXTRA: Final = "trio-mcp-supervisor[code]"


class CodeLimits(BaseModel):
    """The limits of one program (module docstring)."""

    model_config = STRICT

    timeout_sec: float = Field(default=30.0, gt=0, le=3600)
    """Wall time of the whole run, the tools' time included (the sandbox's own clock leaves that out)."""
    max_memory_mb: int = Field(default=256, ge=16, le=65536)
    max_recursion: int = Field(default=1000, ge=50, le=100_000)
    max_calls: int = Field(default=500, ge=1, le=100_000)
    """Tool calls one run may make."""
    max_concurrent_calls: int = Field(default=8, ge=1, le=256)
    """Tool calls of one run in flight at once (``asyncio.gather``); the rest wait their turn."""
    max_result_bytes: int = Field(default=256 * 1024, ge=1024, le=64 * 1024 * 1024)
    """The run's value, as JSON; longer is cut, with a note that says so."""
    max_output_bytes: int = Field(default=16 * 1024, ge=256, le=16 * 1024 * 1024)
    """What the program printed; longer is cut, with a note that says so."""
    type_check: bool = True
    """Check the program against the tools' stubs before it runs (a wrong argument costs no tool call)."""


class CodeOverrides(BaseModel):
    """A ``[views.<name>.code]`` table: any of ``CodeLimits``' keys, the rest inherited."""

    model_config = STRICT

    timeout_sec: float | None = Field(default=None, gt=0, le=3600)
    max_memory_mb: int | None = Field(default=None, ge=16, le=65536)
    max_recursion: int | None = Field(default=None, ge=50, le=100_000)
    max_calls: int | None = Field(default=None, ge=1, le=100_000)
    max_concurrent_calls: int | None = Field(default=None, ge=1, le=256)
    max_result_bytes: int | None = Field(default=None, ge=1024, le=64 * 1024 * 1024)
    max_output_bytes: int | None = Field(default=None, ge=256, le=16 * 1024 * 1024)
    type_check: bool | None = None

    def over(self, base: CodeLimits) -> CodeLimits:
        """``base`` with this table's keys in place of its own."""
        return base.model_copy(update=self.model_dump(exclude_none=True))


def code_engine_problem() -> str | None:
    """Why code views cannot run here (the engine is not installed), or None."""
    if find_spec("pydantic_monty") is None:
        return f"the code engine is not installed: pip install '{CODE_EXTRA}'"
    return None
