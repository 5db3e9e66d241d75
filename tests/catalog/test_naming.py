"""Public tool names (DESIGN §3.3) and server-name validation."""

from __future__ import annotations

import re

import pytest

from supervisor.catalog.naming import MAX_NAME_LEN, public_tool_name
from supervisor.config.values import server_name_problem

_HASHED = re.compile(r"^mcp__srv__[A-Za-z0-9_-]*_[0-9a-f]{8}$")


def test_a_simple_name_is_prefixed_and_namespaced_unchanged() -> None:
    assert public_tool_name("files", "read_file") == "mcp__files__read_file"
    assert public_tool_name("my-srv", "list-dir") == "mcp__my-srv__list-dir"


def test_characters_outside_the_safe_set_become_underscores_and_a_hash_is_appended() -> None:
    name = public_tool_name("srv", "get.weather/now")
    assert name.startswith("mcp__srv__get_weather_now_")
    assert _HASHED.fullmatch(name)
    assert len(name) <= MAX_NAME_LEN


def test_a_name_of_exactly_64_characters_is_kept_and_one_more_is_cut_with_a_hash() -> None:
    fits = "t" * (MAX_NAME_LEN - len("mcp__srv__"))
    assert public_tool_name("srv", fits) == f"mcp__srv__{fits}"

    long_name = public_tool_name("srv", fits + "t")
    assert len(long_name) == MAX_NAME_LEN
    assert _HASHED.fullmatch(long_name)
    assert long_name.startswith("mcp__srv__ttt")


def test_very_long_unsafe_names_are_at_most_64_characters() -> None:
    name = public_tool_name("a" * 32, "ü" * 500)
    assert len(name) == MAX_NAME_LEN
    assert re.fullmatch(r"[A-Za-z0-9_-]+", name)


def test_public_names_are_deterministic() -> None:
    assert public_tool_name("srv", "a.b") == public_tool_name("srv", "a.b")
    assert public_tool_name("srv", "x" * 80) == public_tool_name("srv", "x" * 80)


def test_raw_names_that_sanitize_alike_get_distinct_public_names() -> None:
    names = {public_tool_name("srv", raw) for raw in ("a_b", "a.b", "a b", "a/b")}
    assert len(names) == 4
    assert "mcp__srv__a_b" in names


def test_long_names_that_share_a_prefix_get_distinct_public_names() -> None:
    assert public_tool_name("srv", "p" * 70 + "1") != public_tool_name("srv", "p" * 70 + "2")


def test_the_hash_depends_on_the_server_as_well_as_the_tool() -> None:
    a, b = public_tool_name("ab", "c.d"), public_tool_name("ab", "c,d")
    assert a != b
    assert public_tool_name("srv1", "c.d")[-8:] != public_tool_name("srv2", "c.d")[-8:]


@pytest.mark.parametrize("name", ["files", "a", "A-b_9", "x" * 32, "_lead", "trail-"])
def test_valid_server_names_have_no_problem(name: str) -> None:
    assert server_name_problem(name) is None


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("", "1 to 32 characters"),
        ("x" * 33, "1 to 32 characters"),
        ("my server", "1 to 32 characters"),
        ("srv.prod", "1 to 32 characters"),
        ("ünï", "1 to 32 characters"),
        ("a__b", "'__'"),
        ("__", "'__'"),
        ("files_", "end with '_'"),
    ],
)
def test_invalid_server_names_say_why(name: str, says: str) -> None:
    problem = server_name_problem(name)
    assert problem is not None
    assert says in problem
