"""Checks on single setting values, shared by the models and the importer.

Standard library only, so ``import`` (which must not load pydantic) can refuse
the same values ``check`` would. Each function returns what is wrong, as a
phrase that completes "<key> ...", or None; none echoes the value (a URL may
hold a secret).
"""

from __future__ import annotations

from urllib.parse import urlsplit


def url_problem(url: str) -> str | None:
    """What an HTTP client cannot use, or must not see, in ``url``."""
    try:
        parts = urlsplit(url)
        _ = parts.port  # parsing the port is the check: out of range or not a number raises
    except ValueError:
        return 'is not a valid URL (bad host or port); write it as "https://host[:port]/path"'
    if parts.username is not None or parts.password is not None:
        return (
            "must not carry credentials (user:password@): they would show up in logs and status; "
            "remove them, put the token in an environment variable and name it with bearer_token_env_var"
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        got = f"scheme {clip(parts.scheme)!r}" if parts.scheme else "no scheme"
        return f'must be an http:// or https:// URL with a host, e.g. "https://search.internal/mcp" (got {got})'
    return None


def exec_problem(value: str) -> str | None:
    """Why ``value`` cannot reach a child process (command, argument, cwd, environment value)."""
    # execve() takes C strings: a NUL would cut the value short, so the OS refuses it.
    if "\x00" in value:
        return "contains a NUL character (\\x00), which no process can receive; remove it"
    return None


def env_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name an environment variable of a child process."""
    if "\x00" in name or not name or "=" in name:
        return "must be a non-empty environment variable name without '=' or NUL; rename it"
    return None


CLIP_CHARS = 80
"""Echoed user input is cut to this many characters: a 100 KB value must not become 100 KB of error."""


def clip(text: str, limit: int = CLIP_CHARS) -> str:
    """``text`` cut to ``limit`` characters (marked ``...``), with unprintable characters escaped."""
    if not text.isprintable():
        text = text.encode("unicode_escape").decode("ascii")
    return text if len(text) <= limit else text[: limit - 3] + "..."
