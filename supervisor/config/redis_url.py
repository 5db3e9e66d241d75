"""The fleet catalog store's Redis URL: what a valid one looks like, and how it is shown.

Pure functions, no I/O. The URL may carry credentials (``redis://user:pass@host``),
so everything that shows it (``check``, status, logs, errors) goes through
``mask_redis_url``: the password (and any query secret) becomes ``***``.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import SplitResult, parse_qsl, urlencode, urlsplit

MASK: Final = "***"
SCHEMES: Final = ("redis", "rediss", "unix")
_SECRET_QUERY_KEYS: Final = frozenset({"password", "pass", "token"})


def _split(url: str) -> SplitResult | None:
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises ValueError on a non-numeric or out-of-range port
    except ValueError:
        return None
    return parts


def redis_url_problem(url: str) -> str | None:
    """Why ``url`` cannot address a Redis server, or None. Never quotes the URL (it may hold a password)."""
    parts = _split(url)
    if parts is None:
        return "is not a valid URL (bad port or brackets)"
    if parts.scheme not in SCHEMES:
        return "must start with redis://, rediss:// or unix:// (e.g. redis://127.0.0.1:6379/0)"
    if parts.scheme == "unix":
        if not parts.path.startswith("/"):
            return "a unix:// URL needs an absolute socket path, e.g. unix:///run/redis.sock"
        return None
    if not parts.hostname:
        return "names no host, e.g. redis://127.0.0.1:6379/0"
    db = parts.path.strip("/")
    if db and not db.isdigit():
        return "the path must be a database number, e.g. /0"
    return None


def mask_redis_url(url: str) -> str:
    """``url`` with its password (and password-like query values) replaced by ``***``."""
    parts = _split(url)
    if parts is None:
        return MASK
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user, has_password, _password = userinfo.partition(":")
        netloc = f"{user}:{MASK}@{hostport}" if has_password else f"{MASK}@{hostport}"
    query = parts.query
    if query:
        pairs = [
            (k, MASK if k.lower() in _SECRET_QUERY_KEYS else v) for k, v in parse_qsl(query, keep_blank_values=True)
        ]
        query = urlencode(pairs, safe="*")
    # Assembled by hand: urlunsplit drops the empty authority of unix:///path.
    return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
