"""The JSON log format: every ``extra=`` field is a queryable key (STYLE "Logs are data")."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

from supervisor.cli import JsonFormatter


def record(message: str = "synced %d tools", *args: object, **extra: Any) -> logging.LogRecord:
    logger = logging.getLogger("supervisor.server_actor")
    return logger.makeRecord(logger.name, logging.INFO, __file__, 1, message, args or (3,), None, extra=extra)


def formatted(rec: logging.LogRecord) -> dict[str, Any]:
    line = JsonFormatter().format(rec)
    assert "\n" not in line
    entry = json.loads(line)
    assert isinstance(entry, dict)
    return entry


def test_every_extra_field_becomes_a_json_key() -> None:
    entry = formatted(record(server="files", generation=4, tool="read_file", event="synced", duration_ms=1.5))
    assert entry["message"] == "synced 3 tools"
    assert (entry["level"], entry["logger"]) == ("info", "supervisor.server_actor")
    assert {k: entry[k] for k in ("server", "generation", "tool", "event", "duration_ms")} == {
        "server": "files",
        "generation": 4,
        "tool": "read_file",
        "event": "synced",
        "duration_ms": 1.5,
    }


def test_standard_record_attributes_stay_out_of_the_entry() -> None:
    entry = formatted(record())
    assert set(entry) == {"ts", "level", "logger", "message"}


def test_an_extra_named_like_a_core_key_does_not_replace_it() -> None:
    entry = formatted(record(level="custom", logger="other", ts=0, exc="x"))
    assert (entry["level"], entry["logger"]) == ("info", "supervisor.server_actor")
    assert entry["ts"] > 0
    assert (entry["extra_level"], entry["extra_logger"], entry["extra_ts"], entry["extra_exc"]) == (
        "custom",
        "other",
        0,
        "x",
    )


def test_a_structured_extra_stays_structured_with_its_odd_leaves_as_text() -> None:
    entry = formatted(record(labels={"root": Path("/srv/x"), "ids": [1, 2]}))
    assert entry["labels"] == {"root": "/srv/x", "ids": [1, 2]}


def test_values_json_cannot_hold_are_written_as_text() -> None:
    entry = formatted(record(path=Path("/srv/x"), names={"b"}, ratio=float("nan")))
    assert entry["path"] == "/srv/x"
    assert entry["names"] == "{'b'}"
    assert entry["ratio"] == "nan"
    assert isinstance(entry["ts"], float)  # the fallback keeps finite floats as numbers


def test_non_string_keys_inside_an_extra_fall_back_to_text() -> None:
    entry = formatted(record(by_pair={("a", 1): 2}))
    assert entry["by_pair"] == "{('a', 1): 2}"


def test_an_exception_and_a_stack_are_included() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        rec = logging.getLogger("t").makeRecord("t", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    rec.stack_info = "Stack (most recent call last):\n  here"
    entry = formatted(rec)
    assert "ValueError: boom" in entry["exc"]
    assert "here" in entry["stack"]
