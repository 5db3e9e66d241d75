"""The one place that reads anyio's private state (STYLE: private names live in one compat module).

* ``receiver_waiting``: whether a task is parked in ``receive`` on an anyio
  memory stream. ``statistics().tasks_waiting_receive`` says the same but builds
  a statistics object per question (~0.7 us), and the pipes ask it four times
  per spliced call (``wire.pipes.DirectWrite``: is the writer task idle?). This
  reads the count that object is made of, ``_state.waiting_receivers``.

``tests/compat/test_anyio.py`` holds the assumption to ``statistics()``.
Synchronous; nothing here awaits.
"""

from __future__ import annotations

from typing import Any


def receiver_waiting(stream: Any) -> bool:
    """Whether a task is parked in ``receive`` on the anyio memory stream ``stream`` (its writer is idle)."""
    return bool(stream._state.waiting_receivers)
