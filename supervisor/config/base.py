"""What every settings table shares: the pydantic config that makes unknown keys errors."""

from __future__ import annotations

from typing import Final

from pydantic import ConfigDict

# allow_inf_nan=False: TOML has `inf` and `nan` literals, and an infinite grace
# or timeout would make a stop or a call unbounded.
STRICT: Final = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)
"""The model config every settings table shares: unknown keys are errors, values keep their TOML types."""
