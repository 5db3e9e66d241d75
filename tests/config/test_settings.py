"""Tests for supervisor.config: layering, interpolation, validation messages, masking."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.config.check import describe_settings
from supervisor.config.loader import default_config_path, load_settings
from supervisor.config.models import Settings
from supervisor.config.servers import ServerSettings
from supervisor.errors import ConfigError

FULL = """
[supervisor]
principal = "alice"
log_level = "warning"

[supervisor.front]
token = "${FRONT_TOKEN:-front-secret-default}"

[defaults]
startup_timeout_sec = 11
tool_timeout_sec = 22
[defaults.reconnect]
max_attempts = 4
initial_delay_ms = 100
max_delay_ms = 2000

[mcp_servers.files]
command = "npx"
args = ["-y", "server-filesystem", "/tmp"]
cwd = "."
enabled_tools = ["read_*", "list_*"]
disabled_tools = ["read_secret"]
[mcp_servers.files.env]
API_KEY = "env-secret-value"

[mcp_servers.search]
url = "https://search.internal/mcp"
bearer_token_env_var = "SEARCH_TOKEN"
tool_timeout_sec = 5
http_headers = { "X-Api-Key" = "header-secret-value" }
[mcp_servers.search.reconnect]
catalog_reuse_ttl_ms = 0
max_attempts = 9
"""


def write(tmp_path: Path, text: str, name: str = "settings.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load_text(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> Settings:
    return load_settings(write(tmp_path, text), environ={} if environ is None else environ)


def config_error(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_text(tmp_path, text, environ)
    message = str(info.value)
    assert "settings.toml" in message  # every message names the file
    return message


def server(command: str = "run", **fields: object) -> ServerSettings:
    return ServerSettings.model_validate({"name": "s", "command": command, **fields})


# --- loading and layering -------------------------------------------------


def test_an_unset_log_level_is_quiet_for_the_stdio_fronts_run_and_info_for_the_http_front_and_other_commands(
    tmp_path: Path,
) -> None:
    stdio = load_text(tmp_path, "").supervisor
    assert stdio.log_level_for("run") == "warning"
    assert stdio.log_level_for("tools") == "info"
    http = load_text(tmp_path, '[supervisor.front]\ntransport = "http"\ntoken = "t"\n').supervisor
    assert http.log_level_for("run") == "info"
    chosen = load_text(tmp_path, '[supervisor]\nlog_level = "info"\n').supervisor
    assert chosen.log_level_for("run") == "info"


def test_an_empty_file_gives_the_documented_defaults(tmp_path: Path) -> None:
    settings = load_text(tmp_path, "")
    assert settings.supervisor.principal == "local"
    assert settings.supervisor.log_level is None
    assert settings.supervisor.front.transport == "stdio"
    assert settings.supervisor.shutdown_grace_sec == 5.0
    assert settings.mcp_servers == {}
    assert settings.source_path == tmp_path / "settings.toml"


def test_defaults_are_inherited_by_every_server_and_a_server_table_overrides_them(tmp_path: Path) -> None:
    settings = load_text(tmp_path, FULL)
    files, search = settings.mcp_servers["files"], settings.mcp_servers["search"]
    assert (files.startup_timeout_sec, files.tool_timeout_sec) == (11, 22)
    assert (search.startup_timeout_sec, search.tool_timeout_sec) == (11, 5)
    assert files.reconnect.max_attempts == 4
    assert files.name == "files"


def test_a_server_reconnect_table_overrides_defaults_key_by_key(tmp_path: Path) -> None:
    reconnect = load_text(tmp_path, FULL).mcp_servers["search"].reconnect
    assert reconnect.catalog_reuse_ttl_ms == 0
    assert reconnect.max_attempts == 9
    assert reconnect.initial_delay_ms == 100  # from [defaults.reconnect]
    assert reconnect.max_delay_ms == 2000  # from [defaults.reconnect]
    assert reconnect.jitter == 0.2  # built-in default


def test_environment_overrides_win_over_the_file(tmp_path: Path) -> None:
    environ = {
        "MCP_SUPERVISOR_SUPERVISOR__LOG_LEVEL": "debug",
        "MCP_SUPERVISOR_MCP_SERVERS__FILES__RECONNECT__MAX_ATTEMPTS": "7",
        "MCP_SUPERVISOR_DEFAULTS__TOOL_TIMEOUT_SEC": "33",
    }
    settings = load_text(tmp_path, FULL, environ)
    assert settings.supervisor.log_level == "debug"
    assert settings.supervisor.principal == "alice"
    assert settings.mcp_servers["files"].reconnect.max_attempts == 7
    assert settings.mcp_servers["files"].reconnect.initial_delay_ms == 100
    assert settings.mcp_servers["files"].tool_timeout_sec == 33


def test_a_bad_environment_override_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    message = config_error(tmp_path, FULL, {"MCP_SUPERVISOR_SUPERVISOR__FRONT__PORT": "abc"})
    assert "supervisor.front.port" in message
    assert "valid integer" in message


def test_default_config_path_prefers_the_environment_variable() -> None:
    assert default_config_path({"MCP_SUPERVISOR_CONFIG": "/etc/sup.toml"}) == Path("/etc/sup.toml")
    assert default_config_path({}) == Path("settings.toml")


def test_load_settings_without_a_path_uses_the_config_variable(tmp_path: Path) -> None:
    path = write(tmp_path, '[supervisor]\nprincipal = "bob"\n', "other.toml")
    settings = load_settings(environ={"MCP_SUPERVISOR_CONFIG": str(path)})
    assert settings.supervisor.principal == "bob"


# --- interpolation --------------------------------------------------------


def test_variables_are_expanded_with_defaults_and_double_dollar_is_literal(tmp_path: Path) -> None:
    text = """
[mcp_servers.files]
command = "${TOOL_BIN}/server"
args = ["--root", "${ROOT:-/srv}", "cost=$$5", "$HOME stays"]
env = { TOKEN = "${TOKEN}" }
[mcp_servers.search]
url = "https://${HOST}/mcp"
http_headers = { "X-Team" = "${TEAM:-agents}" }
"""
    settings = load_text(tmp_path, text, {"TOOL_BIN": "/opt/bin", "TOKEN": "t0k", "HOST": "h.example"})
    files, search = settings.mcp_servers["files"], settings.mcp_servers["search"]
    assert files.command == "/opt/bin/server"
    assert files.args == ["--root", "/srv", "cost=$5", "$HOME stays"]
    assert files.env == {"TOKEN": "t0k"}
    assert search.url == "https://h.example/mcp"
    assert search.http_headers == {"X-Team": "agents"}


def test_the_front_token_is_interpolated(tmp_path: Path) -> None:
    settings = load_text(tmp_path, FULL, {"FRONT_TOKEN": "from-env"})
    token = settings.supervisor.front.token
    assert token is not None
    assert token.get_secret_value() == "from-env"


def test_an_unset_variable_without_default_names_the_variable_and_key_path(tmp_path: Path) -> None:
    message = config_error(tmp_path, '[mcp_servers.search]\nurl = "https://${SEARCH_HOST}/mcp"\n')
    assert "SEARCH_HOST" in message
    assert "mcp_servers.search.url" in message
    assert "set it" in message


def test_an_unset_variable_in_args_names_the_list_index(tmp_path: Path) -> None:
    message = config_error(tmp_path, '[mcp_servers.files]\ncommand = "x"\nargs = ["a", "${NOPE}"]\n')
    assert "mcp_servers.files.args[1]" in message
    assert "NOPE" in message


# --- errors ---------------------------------------------------------------


def test_a_missing_file_names_the_file_and_how_to_point_at_another(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(tmp_path / "absent.toml", environ={})
    message = str(info.value)
    assert "absent.toml" in message
    assert "--config" in message
    assert "MCP_SUPERVISOR_CONFIG" in message


def test_invalid_toml_reports_line_and_column(tmp_path: Path) -> None:
    message = config_error(tmp_path, '[supervisor]\nprincipal = "x"\n[mcp_servers.files\n')
    assert "invalid TOML" in message
    assert "line 3" in message
    assert "column" in message


def test_unknown_key_in_server_table_names_the_key_path_and_allowed_keys(tmp_path: Path) -> None:
    message = config_error(tmp_path, '[mcp_servers.files]\ncommand = "x"\ncomand = "y"\n')
    assert "unknown key 'comand' in [mcp_servers.files]" in message
    assert "command, args, env" in message


def test_unknown_key_in_nested_reconnect_table_names_its_section(tmp_path: Path) -> None:
    message = config_error(tmp_path, '[mcp_servers.files]\ncommand = "x"\n[mcp_servers.files.reconnect]\ndelay = 1\n')
    assert "unknown key 'delay' in [mcp_servers.files.reconnect]" in message
    assert "initial_delay_ms" in message


@pytest.mark.parametrize(
    ("text", "section"),
    [
        ("bogus = 1\n", "the top level"),
        ('[supervisor]\nlevel = "x"\n', "[supervisor]"),
        ("[supervisor.front]\ntls = true\n", "[supervisor.front]"),
        ("[defaults]\nretries = 1\n", "[defaults]"),
    ],
)
def test_unknown_keys_are_errors_in_every_section(tmp_path: Path, text: str, section: str) -> None:
    message = config_error(tmp_path, text)
    assert f"in {section}" in message
    assert "use one of:" in message


def test_a_name_key_inside_a_server_table_is_rejected(tmp_path: Path) -> None:
    message = config_error(tmp_path, '[mcp_servers.files]\ncommand = "x"\nname = "other"\n')
    assert "unknown key 'name'" in message


@pytest.mark.parametrize(
    ("name", "why"),
    [("bad name", "1 to 32 characters"), ("a__b", "'__'"), ("trailing_", "end with '_'"), ("x" * 33, "1 to 32")],
)
def test_a_bad_server_name_says_why(tmp_path: Path, name: str, why: str) -> None:
    message = config_error(tmp_path, f'[mcp_servers."{name}"]\ncommand = "x"\n')
    assert repr(name) in message
    assert why in message
    assert "rename" in message


def test_a_server_with_neither_command_nor_url_is_named(tmp_path: Path) -> None:
    message = config_error(tmp_path, '[mcp_servers.files]\nargs = ["x"]\n')
    assert "'files'" in message
    assert "neither 'command'" in message
    assert "set exactly one" in message


def test_a_server_with_both_command_and_url_is_named(tmp_path: Path) -> None:
    message = config_error(tmp_path, '[mcp_servers.files]\ncommand = "x"\nurl = "http://h/mcp"\n')
    assert "'files'" in message
    assert "both 'command' and 'url'" in message


def test_stdio_only_keys_on_an_http_server_are_rejected(tmp_path: Path) -> None:
    message = config_error(tmp_path, '[mcp_servers.web]\nurl = "http://h/mcp"\ncwd = "/tmp"\n')
    assert "'cwd' only applies to stdio" in message


def test_http_only_keys_on_a_stdio_server_are_rejected(tmp_path: Path) -> None:
    message = config_error(tmp_path, '[mcp_servers.files]\ncommand = "x"\nbearer_token_env_var = "T"\n')
    assert "'bearer_token_env_var' only applies to http" in message


def test_a_negative_delay_names_the_key_path(tmp_path: Path) -> None:
    text = '[mcp_servers.files]\ncommand = "x"\n[mcp_servers.files.reconnect]\ninitial_delay_ms = -1\n'
    message = config_error(tmp_path, text)
    assert "mcp_servers.files.reconnect.initial_delay_ms" in message
    assert "greater than or equal to 0" in message


def test_an_initial_delay_above_the_ceiling_says_which_to_fix(tmp_path: Path) -> None:
    text = '[mcp_servers.files]\ncommand = "x"\nreconnect = { initial_delay_ms = 5000, max_delay_ms = 100 }\n'
    message = config_error(tmp_path, text)
    assert "mcp_servers.files.reconnect" in message
    assert "lower initial_delay_ms or raise max_delay_ms" in message


@pytest.mark.parametrize("value", ["2.5", '"3"', "true"])
def test_a_non_integer_max_attempts_is_rejected(tmp_path: Path, value: str) -> None:
    message = config_error(tmp_path, f"[defaults.reconnect]\nmax_attempts = {value}\n")
    assert "defaults.reconnect.max_attempts" in message
    assert "valid integer" in message


def test_a_bad_inherited_default_is_reported_once_at_its_own_path(tmp_path: Path) -> None:
    text = '[defaults]\ntool_timeout_sec = 0\n[mcp_servers.a]\ncommand = "x"\n[mcp_servers.b]\ncommand = "y"\n'
    message = config_error(tmp_path, text)
    assert "defaults.tool_timeout_sec" in message
    assert "mcp_servers" not in message


def test_wrong_types_are_listed_one_per_line(tmp_path: Path) -> None:
    text = '[mcp_servers.files]\ncommand = "x"\nenabled = "yes"\nargs = "a b"\n'
    message = config_error(tmp_path, text)
    assert "2 problems" in message
    assert "\n  mcp_servers.files.enabled: Input should be a valid boolean" in message
    assert "\n  mcp_servers.files.args: Input should be a valid list" in message


def test_the_http_front_requires_a_token(tmp_path: Path) -> None:
    message = config_error(tmp_path, '[supervisor.front]\ntransport = "http"\n')
    assert "settings.toml" in message
    assert "supervisor.front.token is required" in message
    assert "MCP_SUPERVISOR_TOKEN" in message


def test_the_http_front_loads_with_a_token_and_a_body_limit(tmp_path: Path) -> None:
    text = '[supervisor.front]\ntransport = "http"\ntoken = "${T}"\nmax_request_body_bytes = 2048\n'
    front = load_text(tmp_path, text, {"T": "tok"}).supervisor.front
    assert (front.transport, front.host, front.max_request_body_bytes) == ("http", "127.0.0.1", 2048)
    assert front.token is not None
    assert front.token.get_secret_value() == "tok"


def test_the_front_body_limit_defaults_to_one_mebibyte(tmp_path: Path) -> None:
    assert load_text(tmp_path, "").supervisor.front.max_request_body_bytes == 1_048_576


def test_an_admin_endpoint_on_a_reachable_address_without_a_token_is_a_config_error(tmp_path: Path) -> None:
    message = config_error(tmp_path, '[supervisor.admin]\nenabled = true\nhost = "0.0.0.0"\n')
    assert "settings.toml" in message
    assert "supervisor.admin.token is required" in message
    assert '"0.0.0.0"' in message or "'0.0.0.0'" in message


def test_the_admin_endpoint_reuses_the_front_token_and_may_go_without_one_on_loopback(tmp_path: Path) -> None:
    text = '[supervisor.front]\ntoken = "front-tok"\n[supervisor.admin]\nenabled = true\nhost = "0.0.0.0"\n'
    section = load_text(tmp_path, text).supervisor
    assert section.admin_token is not None
    assert section.admin_token.get_secret_value() == "front-tok"
    local = load_text(tmp_path, "[supervisor.admin]\nenabled = true\n").supervisor
    assert (local.admin.host, local.admin.port, local.admin_token) == ("127.0.0.1", 8932, None)


def test_the_admin_token_is_interpolated_and_masked(tmp_path: Path) -> None:
    text = '[supervisor.admin]\nenabled = true\ntoken = "${ADMIN_T}"\n'
    settings = load_text(tmp_path, text, {"ADMIN_T": "admin-secret-value"})
    assert settings.supervisor.admin.token is not None
    assert settings.supervisor.admin.token.get_secret_value() == "admin-secret-value"
    described = describe_settings(settings)
    assert "admin-secret-value" not in described
    assert "admin = enabled (host 127.0.0.1, port 8932, token ***)" in described


def test_a_secret_with_a_wrong_type_is_not_echoed(tmp_path: Path) -> None:
    message = config_error(tmp_path, '[mcp_servers.files]\ncommand = "x"\nenv = { K = ["s3cr3t"] }\n')
    assert "mcp_servers.files.env.K" in message
    assert "s3cr3t" not in message


# --- secrets --------------------------------------------------------------

SECRETS = ("env-secret-value", "header-secret-value", "front-secret-default", "bearer-value")


def test_describe_settings_masks_every_secret_and_shows_resolved_values(tmp_path: Path) -> None:
    text = describe_settings(load_text(tmp_path, FULL, {"SEARCH_TOKEN": "bearer-value"}))
    for secret in SECRETS:
        assert secret not in text
    assert "settings.toml" in text
    assert "principal = alice" in text
    assert "[mcp_servers.files]" in text
    assert "command = npx -y server-filesystem /tmp" in text
    assert "env = API_KEY=***" in text
    assert "url = https://search.internal/mcp" in text
    assert "bearer_token_env_var = SEARCH_TOKEN" in text
    assert "http_headers = X-Api-Key=***" in text
    assert "tool_timeout_sec = 5" in text
    assert "catalog_reuse_ttl_ms 0" in text
    assert "enabled_tools = read_*, list_*" in text
    assert "disabled_tools = read_secret" in text


def test_repr_of_settings_masks_every_secret(tmp_path: Path) -> None:
    settings = load_text(tmp_path, FULL)
    for text in (repr(settings), str(settings), repr(settings.mcp_servers["search"])):
        for secret in SECRETS:
            assert secret not in text


def test_bearer_token_is_read_from_the_environment_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    web = ServerSettings.model_validate({"name": "web", "url": "http://h/mcp", "bearer_token_env_var": "WEB_TOKEN"})
    monkeypatch.delenv("WEB_TOKEN", raising=False)
    with pytest.raises(ConfigError, match=r"'web'.*WEB_TOKEN"):
        web.bearer_token()
    monkeypatch.setenv("WEB_TOKEN", "abc")
    assert web.bearer_token() == "abc"
    assert server().bearer_token() is None


# --- target and tool filters ---------------------------------------------


def test_target_is_stable_for_equal_settings() -> None:
    assert server(args=["a"], env={"K": "v"}).target == server(args=["a"], env={"K": "v"}).target
    assert server(enabled=False, tool_timeout_sec=1).target == server().target


@pytest.mark.parametrize(
    "changed",
    [{"command": "other"}, {"args": ["b"]}, {"env": {"K": "w"}}, {"cwd": "/elsewhere"}],
)
def test_target_changes_when_the_stdio_launch_changes(changed: dict[str, object]) -> None:
    base: dict[str, object] = {"name": "s", "command": "run", "args": ["a"], "env": {"K": "v"}}
    before = ServerSettings.model_validate(base).target
    assert ServerSettings.model_validate({**base, **changed}).target != before


def test_http_target_changes_with_url_headers_and_bearer_variable() -> None:
    def web(url: str, headers: dict[str, str] | None = None, bearer: str | None = None) -> str:
        fields = {"name": "w", "url": url, "http_headers": headers or {}, "bearer_token_env_var": bearer}
        return ServerSettings.model_validate(fields).target

    assert web("https://h/mcp") == web("https://h/mcp")
    assert web("https://h/mcp") != web("https://h/other")
    assert web("https://h/mcp", {"A": "1"}) != web("https://h/mcp", {"A": "2"})
    assert web("https://h/mcp", bearer="T1") != web("https://h/mcp", bearer="T2")
    assert web("https://h/mcp", {"A": "header-secret"}).startswith("https://h/mcp#headers=")
    assert "header-secret" not in web("https://h/mcp", {"A": "header-secret"})


def test_tool_allowed_applies_the_allow_list_then_the_deny_list() -> None:
    filtered = server(enabled_tools=["read_*", "list_*"], disabled_tools=["read_secret"])
    assert filtered.tool_allowed("read_file")
    assert filtered.tool_allowed("list_dir")
    assert not filtered.tool_allowed("write_file")
    assert not filtered.tool_allowed("read_secret")
    assert not filtered.tool_allowed("READ_file")  # case-sensitive globs


def test_tool_allowed_without_an_allow_list_admits_everything_not_denied() -> None:
    assert server().tool_allowed("anything")
    assert not server(disabled_tools=["*_admin"]).tool_allowed("drop_admin")
    assert not server(enabled_tools=[]).tool_allowed("anything")


def test_list_changed_debounce_longer_than_its_maximum_wait_is_rejected_with_both_values(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text(
        '[defaults]\nlist_changed_debounce_ms = 500\nlist_changed_max_wait_ms = 100\n[mcp_servers.a]\ncommand = "x"\n'
    )
    with pytest.raises(ConfigError) as raised:
        load_settings(path, environ={})
    message = str(raised.value)
    assert "list_changed_debounce_ms (500)" in message
    assert "list_changed_max_wait_ms (100)" in message


# --- refused values (issue 9): one message, naming the key ------------------


def one_problem(tmp_path: Path, text: str, key: str, environ: dict[str, str] | None = None) -> str:
    """The load fails with exactly one problem, on one line, naming ``key``."""
    message = config_error(tmp_path, text, environ)
    assert "\n" not in message
    assert key in message
    return message


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://files.internal/mcp", "scheme 'ftp'"),
        ("not a url", "no scheme"),
        ("http://", "with a host"),
        ("https:///mcp", "with a host"),
        ("https://h:99999/mcp", "not a valid URL"),
        ("https://h:port/mcp", "not a valid URL"),
    ],
)
def test_a_url_that_is_not_http_or_https_with_a_host_is_refused(tmp_path: Path, url: str, why: str) -> None:
    message = one_problem(tmp_path, f'[mcp_servers.web]\nurl = "{url}"\n', "mcp_servers.web.url")
    assert why in message
    assert "http:// or https://" in message or "https://host" in message


@pytest.mark.parametrize("url", ["https://user:hunter2-pw@h/mcp", "https://hunter2-pw@h/mcp", "http://:hunter2-pw@h/"])
def test_credentials_in_a_url_are_refused_without_echoing_them(tmp_path: Path, url: str) -> None:
    message = one_problem(tmp_path, f'[mcp_servers.web]\nurl = "{url}"\n', "mcp_servers.web.url")
    assert "bearer_token_env_var" in message
    assert "hunter2-pw" not in message


def test_credentials_that_arrive_through_interpolation_are_refused_too(tmp_path: Path) -> None:
    text = '[mcp_servers.web]\nurl = "https://${CREDS}@h/mcp"\n'
    message = one_problem(tmp_path, text, "mcp_servers.web.url", {"CREDS": "me:hunter2-pw"})
    assert "hunter2-pw" not in message


def test_http_and_https_urls_with_a_host_and_port_are_accepted(tmp_path: Path) -> None:
    text = '[mcp_servers.a]\nurl = "http://127.0.0.1:8080/mcp"\n[mcp_servers.b]\nurl = "https://[::1]/mcp?x=1"\n'
    servers = load_text(tmp_path, text).mcp_servers
    assert (servers["a"].url, servers["b"].url) == ("http://127.0.0.1:8080/mcp", "https://[::1]/mcp?x=1")


@pytest.mark.parametrize(
    "text",
    [
        "x = " + "[" * 5000 + "]" * 5000 + "\n",
        "x = " + "{a = " * 10_000 + "1" + "}" * 10_000 + "\n",
        '[mcp_servers.a]\ncommand = "x"\nargs = ' + "[" * 10_000 + "]" * 10_000 + "\n",
    ],
    ids=["arrays-5000", "inline-tables-10000", "server-args-10000"],
)
def test_absurdly_deep_nesting_is_a_config_error_not_a_crash(tmp_path: Path, text: str) -> None:
    message = config_error(tmp_path, text)
    assert "nested too deeply" in message
    assert "\n" not in message


def test_a_deep_but_parseable_value_is_echoed_shortened(tmp_path: Path) -> None:
    text = '[mcp_servers.a]\ncommand = "x"\nargs = ' + "[" * 300 + "]" * 300 + "\n"
    message = one_problem(tmp_path, text, "mcp_servers.a.args[0]")
    assert len(message) < 200


@pytest.mark.parametrize(
    ("text", "key", "why"),
    [
        ("[supervisor]\nshutdown_grace_sec = inf\n", "supervisor.shutdown_grace_sec", "finite"),
        ("[supervisor]\nshutdown_grace_sec = nan\n", "supervisor.shutdown_grace_sec", "finite"),
        ("[supervisor]\nshutdown_grace_sec = 300.5\n", "supervisor.shutdown_grace_sec", "less than or equal to 300"),
        ("[defaults]\ntool_timeout_sec = inf\n", "defaults.tool_timeout_sec", "finite"),
        ("[defaults]\nstartup_timeout_sec = -inf\n", "defaults.startup_timeout_sec", "finite"),
        ("[defaults]\ntool_timeout_sec = 1e400\n", "defaults.tool_timeout_sec", "finite"),  # overflows to inf
        ('[mcp_servers.a]\ncommand = "x"\nstartup_timeout_sec = nan\n', "mcp_servers.a.startup_timeout_sec", "finite"),
        ("[defaults.reconnect]\njitter = nan\n", "defaults.reconnect.jitter", "finite"),
    ],
)
def test_non_finite_floats_and_an_unbounded_grace_are_refused(tmp_path: Path, text: str, key: str, why: str) -> None:
    assert why in one_problem(tmp_path, text, key)


def test_a_non_finite_float_from_an_environment_override_is_refused(tmp_path: Path) -> None:
    environ = {"MCP_SUPERVISOR_SUPERVISOR__SHUTDOWN_GRACE_SEC": "inf"}
    assert "finite" in one_problem(tmp_path, "", "supervisor.shutdown_grace_sec", environ)


def test_the_largest_grace_is_accepted(tmp_path: Path) -> None:
    assert load_text(tmp_path, "[supervisor]\nshutdown_grace_sec = 300\n").supervisor.shutdown_grace_sec == 300


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ('command = "x\\u0000y"', "mcp_servers.a.command"),
        ('command = "x"\nargs = ["ok", "b\\u0000"]', "mcp_servers.a.args[1]"),
        ('command = "x"\ncwd = "/tmp\\u0000"', "mcp_servers.a.cwd"),
        ('command = "x"\nenv = { K = "v\\u0000" }', "mcp_servers.a.env.K"),
        ('command = "x"\nenv = { "K\\u0000" = "v" }', "mcp_servers.a.env.K\\x00 (the name)"),
    ],
)
def test_a_nul_in_what_reaches_a_child_process_is_refused(tmp_path: Path, table: str, key: str) -> None:
    message = one_problem(tmp_path, f"[mcp_servers.a]\n{table}\n", key)
    assert "NUL" in message
    assert "\x00" not in message  # escaped, so a terminal shows it


@pytest.mark.parametrize("name", ["K=V", ""])
def test_an_environment_name_that_cannot_be_set_is_refused(tmp_path: Path, name: str) -> None:
    message = one_problem(tmp_path, f'[mcp_servers.a]\ncommand = "x"\nenv = {{ "{name}" = "v" }}\n', "(the name)")
    assert "mcp_servers.a.env" in message


def test_a_file_that_starts_with_a_utf8_bom_is_read(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_bytes(b'\xef\xbb\xbf[supervisor]\nprincipal = "bom"\n')
    assert load_settings(path, environ={}).supervisor.principal == "bom"


HUGE = 100_000


@pytest.mark.parametrize(
    "text",
    [
        f'[mcp_servers."{"n" * HUGE}"]\ncommand = "x"\n',
        f'[supervisor]\n"{"k" * HUGE}" = 1\n',
        f'[supervisor]\nlog_level = "{"v" * HUGE}"\n',
        f'[mcp_servers.a]\ncommand = "x"\nargs = [["{"a" * HUGE}"]]\n',
        f'[mcp_servers.a]\ncommand = "x"\nenv = {{ "{"e" * HUGE}" = 1 }}\n',
        f'[mcp_servers.a]\ncommand = "${{{"-" * HUGE}}}"\n',
        f'[mcp_servers.a]\ncommand = "${{{"V" * HUGE}}}"\n',
        f'[supervisor.admin]\nenabled = true\nhost = "{"h" * HUGE}"\n',
        f'[supervisor.front]\ntransport = "http"\nallow_unauthenticated_loopback = true\nhost = "{"h" * HUGE}"\n',
        f"[supervisor]\nspawn_concurrency = {'9' * 4000}\n",
        f"[supervisor]\nspawn_concurrency = {'9' * 5000}\n",
    ],
    ids=[
        "server-name",
        "unknown-key",
        "bad-value",
        "list-item",
        "env-name",
        "malformed-reference",
        "unset-variable",
        "admin-host",
        "front-host",
        "long-integer",
        "integer-beyond-int-max-str-digits",
    ],
)
def test_echoed_input_is_cut_to_about_80_characters(tmp_path: Path, text: str) -> None:
    message = config_error(tmp_path, text)
    assert len(message) < 600, message[:600]
    assert "..." in message


# --- round-2 keys (DESIGN §3.2b) --------------------------------------------


def test_the_round_2_keys_default_to_the_documented_values(tmp_path: Path) -> None:
    settings = load_text(tmp_path, '[mcp_servers.a]\ncommand = "x"\n')
    a = settings.mcp_servers["a"]
    assert (a.protocol, a.namespace, a.max_tools) == ("auto", True, 2000)
    assert (settings.defaults.namespace, settings.defaults.max_tools) == (True, 2000)
    assert settings.supervisor.front.allow_unauthenticated_loopback is False


@pytest.mark.parametrize("protocol", ["auto", "legacy", "2026-07-28"])
def test_protocol_accepts_auto_legacy_and_the_2026_era(tmp_path: Path, protocol: str) -> None:
    text = f'[mcp_servers.a]\ncommand = "x"\nprotocol = "{protocol}"\n'
    assert load_text(tmp_path, text).mcp_servers["a"].protocol == protocol


@pytest.mark.parametrize("value", ['"2025-06-18"', '"AUTO"', "1"])
def test_any_other_protocol_is_refused_naming_the_server_key(tmp_path: Path, value: str) -> None:
    message = one_problem(tmp_path, f'[mcp_servers.a]\ncommand = "x"\nprotocol = {value}\n', "mcp_servers.a.protocol")
    assert "'legacy'" in message


def test_protocol_is_a_server_key_not_a_default(tmp_path: Path) -> None:
    assert "unknown key 'protocol' in [defaults]" in config_error(tmp_path, '[defaults]\nprotocol = "legacy"\n')


def test_namespace_and_max_tools_are_inherited_from_defaults_and_overridable(tmp_path: Path) -> None:
    text = (
        "[defaults]\nnamespace = false\nmax_tools = 10\n"
        '[mcp_servers.a]\ncommand = "x"\n[mcp_servers.b]\ncommand = "y"\nnamespace = true\nmax_tools = 100000\n'
    )
    servers = load_text(tmp_path, text).mcp_servers
    assert (servers["a"].namespace, servers["a"].max_tools) == (False, 10)
    assert (servers["b"].namespace, servers["b"].max_tools) == (True, 100_000)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[mcp_servers.a]\ncommand = "x"\nnamespace = "false"\n', "mcp_servers.a.namespace"),
        ("[defaults]\nnamespace = 0\n", "defaults.namespace"),
        ('[mcp_servers.a]\ncommand = "x"\nmax_tools = 0\n', "mcp_servers.a.max_tools"),
        ('[mcp_servers.a]\ncommand = "x"\nmax_tools = 100001\n', "mcp_servers.a.max_tools"),
        ("[defaults]\nmax_tools = -1\n", "defaults.max_tools"),
        ("[defaults]\nmax_tools = 20.5\n", "defaults.max_tools"),
    ],
)
def test_bad_namespace_or_max_tools_values_are_refused_naming_the_key(tmp_path: Path, text: str, key: str) -> None:
    one_problem(tmp_path, text, key)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_a_loopback_http_front_may_run_without_a_token_when_allowed(tmp_path: Path, host: str) -> None:
    text = f'[supervisor.front]\ntransport = "http"\nhost = "{host}"\nallow_unauthenticated_loopback = true\n'
    front = load_text(tmp_path, text).supervisor.front
    assert (front.host, front.token, front.allow_unauthenticated_loopback) == (host, None, True)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.com"])
def test_a_reachable_http_front_without_a_token_stays_an_error_even_when_allowed(tmp_path: Path, host: str) -> None:
    text = f'[supervisor.front]\ntransport = "http"\nhost = "{host}"\nallow_unauthenticated_loopback = true\n'
    message = one_problem(tmp_path, text, "supervisor.front.allow_unauthenticated_loopback")
    assert repr(host) in message
    assert "token" in message


def test_allow_unauthenticated_loopback_must_be_a_boolean(tmp_path: Path) -> None:
    one_problem(
        tmp_path, '[supervisor.front]\nallow_unauthenticated_loopback = "yes"\n', "front.allow_unauthenticated_loopback"
    )


def test_check_shows_the_round_2_keys(tmp_path: Path) -> None:
    text = (
        '[supervisor.front]\ntransport = "http"\nallow_unauthenticated_loopback = true\n'
        '[mcp_servers.a]\ncommand = "x"\nprotocol = "legacy"\nnamespace = false\nmax_tools = 7\n'
    )
    described = describe_settings(load_text(tmp_path, text))
    assert "token (unset), max_request_body_bytes 1048576, allow_unauthenticated_loopback true)" in described
    assert "\n  protocol = legacy\n  namespace = false\n  max_tools = 7\n" in described
    assert "\n  pin = warn, pin_new_tools = allow\n" in described  # issue 27's keys, with their defaults
    assert "\n  telemetry = disabled (capture_content false;" in described  # issue 28's


# --- secrets in URL query strings and header injection ------------------------


def test_a_key_in_the_url_query_is_masked_by_check_and_kept_out_of_the_cache_target(tmp_path: Path) -> None:
    text = '[mcp_servers.web]\nurl = "https://h/mcp?key=${API_KEY}&region=eu"\n'
    settings = load_text(tmp_path, text, {"API_KEY": "query-secret-value"})
    web = settings.mcp_servers["web"]
    assert web.url == "https://h/mcp?key=query-secret-value&region=eu"
    described = describe_settings(settings)
    assert "query-secret-value" not in described
    assert "url = https://h/mcp?key=***&region=***" in described
    assert "query-secret-value" not in web.target
    assert web.target.startswith("https://h/mcp#headers=")
    other = load_text(tmp_path, text, {"API_KEY": "another-key"}).mcp_servers["web"]
    assert other.target != web.target  # another key is another identity, even though neither is shown
    assert "query-secret-value" in web.secret_values()


@pytest.mark.parametrize("value", ["a\r\nX-Forged: 1", "a\nb", "a\x00b"])
def test_a_header_value_that_could_forge_a_request_is_refused_without_echoing_it(tmp_path: Path, value: str) -> None:
    text = '[mcp_servers.web]\nurl = "https://h/mcp"\nhttp_headers = { X-Key = "${V}" }\n'
    message = one_problem(tmp_path, text, "mcp_servers.web.http_headers", {"V": value})
    assert "CR, LF or NUL" in message
    assert "X-Forged" not in message
    assert "X-Key" in message


def test_a_header_name_that_is_not_an_http_token_is_refused(tmp_path: Path) -> None:
    text = '[mcp_servers.web]\nurl = "https://h/mcp"\nhttp_headers = { "X Key:" = "v" }\n'
    message = one_problem(tmp_path, text, "mcp_servers.web.http_headers")
    assert "not an HTTP token" in message
