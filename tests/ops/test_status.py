"""ServerStatus: typed transitions only; a misspelled field is an error, never a silent new attribute."""

from __future__ import annotations

import pytest

from supervisor.ops.status import ServerStatus


def test_a_misspelled_status_field_is_refused_instead_of_silently_added() -> None:
    status = ServerStatus("srv")
    misspelled = "stat"
    with pytest.raises(AttributeError):
        setattr(status, misspelled, "ready")


def test_the_transitions_write_the_fields_they_name() -> None:
    status = ServerStatus("srv", max_attempts=3)
    status.mark_connected(at=1.0, change_notices=True)
    counts = {"tools": 4, "prompts": 0, "resources": 0, "templates": 0}
    status.record_sync(at=2.0, reason="initial", counts=counts, conflicts=[])
    status.mark_ready(at=2.0, protocol_version="2025-06-18", identity="fake@1.0")
    assert status.describe() == "ready, 4 tools"
    assert (status.connected_at, status.ready_at, status.last_sync_at, status.syncs) == (1.0, 2.0, 2.0, 1)
    status.mark_reconnecting(attempt=1, error="connection lost")
    status.record_error("tools/list timed out")
    assert status.describe() == "reconnecting (attempt 1/3); last error: tools/list timed out"
    status.mark_reconnecting(attempt=3, error="refused")
    status.mark_failed()
    status.mark_withdrawn()
    assert (status.state, status.tool_count) == ("failed", 0)
    assert status.describe() == "failed after 3/3 attempts; last error: refused"
