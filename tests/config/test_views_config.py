"""``[views.<name>]``, ``tags`` and ``[[supervisor.front.tokens]]``: what loads, and what is refused naming the key."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from supervisor.config.loader import load_settings
from supervisor.config.models import Settings
from supervisor.errors import ConfigError

SERVERS = """
[mcp_servers.files]
command = "x"
tags = ["code"]
[mcp_servers.wiki]
command = "x"
tags = ["docs"]
"""


def _load(tmp_path: Path, text: str) -> Settings:
    path = tmp_path / "settings.toml"
    path.write_text(SERVERS + text, encoding="utf-8")
    return load_settings(path, environ={})


def test_views_and_view_bound_tokens_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODE_TOKEN", "c0de")
    settings = _load(
        tmp_path,
        """
[supervisor.front]
transport = "http"
[[supervisor.front.tokens]]
token_env_var = "CODE_TOKEN"
views = ["code"]
[views.code]
servers = ["code"]
catalog = "search"
always_visible = ["mcp__files__read_*"]
""",
    )
    assert settings.views["code"].catalog == "search"
    (token,) = settings.supervisor.front.tokens
    assert token.secret.get_secret_value() == "c0de" and token.views == ["code"]
    assert settings.supervisor.front.has_token, "view-bound tokens alone satisfy the HTTP front's token rule"
    assert "c0de" not in repr(settings), "the token never shows"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[views.code]\nservers = ["nope"]\n', "views.code.servers names 'nope', which is neither a server"),
        ('[views."a b"]\n', "a view name becomes the path /mcp/<name>"),
        ('[views.code]\nalways_visible = ["x"]\n', 'views.code.always_visible applies to catalog = "search" or "code"'),
        ('[views.code]\ncatalog = "lots"\n', "views.code.catalog"),
        ("[views.code]\nsearch_limit = 500\n", "views.code.search_limit"),
        (
            '[views.code]\n[supervisor.front]\n[[supervisor.front.tokens]]\ntoken_env_var = "T"\nviews = ["docs"]\n',
            "supervisor.front.tokens[0].views names 'docs', which is not a view",
        ),
        (
            "[views.code]\n[supervisor.front]\n[[supervisor.front.tokens]]\n"
            'token_env_var = "UNSET_TOKEN_X"\nviews = ["code"]\n',
            "token_env_var names UNSET_TOKEN_X, which is not set",
        ),
        ("[mcp_servers.files.tools.read.arguments.path]\nhide = true\n", "arguments.path: hide = true needs a default"),
    ],
)
def test_a_view_token_or_transform_that_cannot_work_is_a_config_error_naming_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, message: str
) -> None:
    monkeypatch.setenv("T", "t")
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(")):
        _load(tmp_path, text)


def test_a_code_view_loads_its_limits_over_the_supervisors(tmp_path: Path) -> None:
    settings = _load(
        tmp_path,
        '[supervisor.code]\ntimeout_sec = 10\nmax_calls = 50\n[views.agent]\ncatalog = "code"\n'
        "[views.agent.code]\nmax_calls = 7\ntype_check = false\n",
    )
    limits = settings.code_limits("agent")
    assert (limits.timeout_sec, limits.max_calls, limits.type_check) == (10, 7, False)
    assert settings.code_limits("other").max_calls == 50


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[views.docs]\n[views.docs.code]\nmax_calls = 3\n", 'views.docs.code applies to catalog = "code" only'),
        ('[views.agent]\ncatalog = "code"\n[views.agent.code]\nmax_calls = 0\n', "views.agent.code.max_calls"),
        ("[supervisor.code]\ntimeout_sec = -1\n", "supervisor.code.timeout_sec"),
        ('[views.agent]\ncatalog = "code"\n[views.agent.code]\nmax_cals = 3\n', "max_cals"),
    ],
)
def test_a_code_limit_that_cannot_work_is_a_config_error_naming_the_key(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, text)


def test_without_the_engine_a_code_view_is_one_config_error_naming_the_view_and_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from supervisor.config import code  # noqa: PLC0415

    real = importlib.util.find_spec
    monkeypatch.setattr(code, "find_spec", lambda name: None if name == "pydantic_monty" else real(name))
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, '[views.agent]\ncatalog = "code"\n')
    assert str(caught.value).count("pip install 'trio-mcp-supervisor[code]'") == 1
    assert 'views.agent: catalog = "code" runs programs' in str(caught.value)
    _load(tmp_path, '[views.docs]\ncatalog = "search"\n')  # other views do not need it


def test_a_code_views_search_limit_defaults_to_its_own(tmp_path: Path) -> None:
    settings = _load(tmp_path, '[views.agent]\ncatalog = "code"\n[views.find]\ncatalog = "search"\n[views.mine]\n'
                     'catalog = "code"\nsearch_limit = 3\n')  # fmt: skip
    limits = {name: view.default_search_limit for name, view in settings.views.items()}
    assert limits == {"agent": 10, "find": 5, "mine": 3}
