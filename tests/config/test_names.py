"""``[supervisor.names]`` (issue 57, item 3): the form of public names, and a length rule that counts the host's prefix.

End to end, the default form is what Claude Code shows its model
(``tests/hosts/test_claude_code.py``) and what code views name their tools
(``tests/e2e/test_code_mode.py``); the rest of the suite writes ``form = "mcp"``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from supervisor.catalog.naming import NameRule, other_form, public_name
from supervisor.catalog.views import ViewRules
from supervisor.config.loader import load_settings
from supervisor.config.names import NamesSettings
from supervisor.config.views import ViewSettings
from supervisor.errors import ConfigError


def _rule(names: NamesSettings) -> NameRule:
    return NameRule(names.prefix, names.limit)


def test_the_default_is_the_short_form_with_room_for_the_hosts_prefix() -> None:
    names = NamesSettings()
    assert (names.prefix, names.limit) == ("", 48)
    assert public_name("demo", "echo", rule=_rule(names)) == "demo__echo"
    # Claude Code, registered as "sup": mcp__sup__ + ours, within a 64-character model API limit.
    cut = public_name("demo", "x" * 80, rule=_rule(names))
    assert len(cut) == 48 and len("mcp__sup__" + cut) <= 64
    assert cut == public_name("demo", "x" * 80, rule=_rule(names)), "the cut is stable"


def test_the_mcp_form_is_the_earlier_names_and_host_prefix_counts_against_max_length() -> None:
    mcp = NamesSettings(form="mcp")
    assert (mcp.prefix, mcp.limit) == ("mcp__", 64)
    assert public_name("demo", "echo", rule=_rule(mcp)) == "mcp__demo__echo"
    named = NamesSettings(host_prefix="mcp__supervisor__")
    assert named.limit == 64 - len("mcp__supervisor__")


def test_a_names_table_that_leaves_no_room_is_a_config_error_naming_the_keys(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text('[supervisor.names]\nmax_length = 20\nhost_prefix = "mcp__a_long_host__"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape("supervisor.names: max_length = 20 less the host's prefix")):
        load_settings(path, environ={})


def test_globs_and_the_call_command_take_either_spelling() -> None:
    assert other_form("mcp__files__read") == "files__read"
    assert other_form("files__read") == "mcp__files__read"
    rules = ViewRules.of("v", ViewSettings(tools=["mcp__files__*"]), {})
    assert rules.shows_tool("files__read") and rules.shows_tool("mcp__files__read")
    assert not rules.shows_tool("wiki__read")
