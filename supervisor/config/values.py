"""Checks on single setting values, shared by the models and the importer.

Standard library only, so ``import`` (which must not load pydantic) can refuse
the same values ``check`` would. Each function returns what is wrong, as a
phrase that completes "<key> ...", or None; none echoes the value (a URL may
hold a secret).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit, urlunsplit

MASK = "***"
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""An HTTP field name is an RFC 9110 token."""
SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")
"""DESIGN §3.2: what a server table may be called (so that the first ``__`` after ``mcp__`` ends it)."""


def server_name_problem(name: str) -> str | None:
    """Say why ``name`` cannot name a server, or return None when it can."""
    if not SERVER_NAME.fullmatch(name):
        return "use 1 to 32 characters from A-Z, a-z, 0-9, '_' and '-'"
    if "__" in name:
        return "it must not contain '__' (that separates the server from the tool in public names)"
    if name.endswith("_"):
        return "it must not end with '_' (the public name would be ambiguous)"
    return None


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


def header_problem(name: str, value: str) -> str | None:
    """What would let an HTTP header ``name: value`` split or forge a request (CR, LF, NUL), or a bad name."""
    if not _HEADER_NAME.fullmatch(name):
        return f"has a header name {clip(name)!r} that is not an HTTP token (letters, digits and !#$%&'*+.^_`|~-)"
    if any(c in value for c in "\r\n\x00"):
        # The value is not echoed: it may be a secret.
        return f"has a value for header {name!r} with a CR, LF or NUL character, which could forge a request; remove it"
    return None


def url_query_values(url: str) -> list[str]:
    """The non-empty values of ``url``'s query string: a key in a URL (``?key=${API_KEY}``) is a secret."""
    return [value for _, value in parse_qsl(urlsplit(url).query, keep_blank_values=False)]


def redact_url(url: str) -> str:
    """``url`` with every query value replaced by ``***`` and the fragment dropped, for display."""
    parts = urlsplit(url)
    if not parts.query:
        return urlunsplit(parts._replace(fragment=""))
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    masked = "&".join(f"{key}={MASK}" if value else key for key, value in pairs)
    return urlunsplit(parts._replace(query=masked, fragment=""))
