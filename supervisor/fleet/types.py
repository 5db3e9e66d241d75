"""What the fleet store's readers share without its Redis client: captures, reads, states, origins.

Kept apart from ``fleet.store`` so that a sidecar whose catalog store is the
local memory store never imports coredis (a fifth of the sidecar's start-up):
``cache`` needs these names on every start, ``fleet.store`` only with Redis.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Literal

StoreState = Literal["connecting", "up", "down"]


@dataclass(frozen=True, slots=True)
class Capture:
    """The epoch and generation of one (target, method), read before a fetch."""

    epoch: str
    generation: int


@dataclass(frozen=True, slots=True)
class FleetRead:
    """One entry read back: the payload is trusted only if its epoch and generation are current."""

    capture: Capture
    payload: str | None
    pttl_ms: int


def new_origin() -> str:
    """A fresh id for this sidecar process."""
    return secrets.token_hex(6)
