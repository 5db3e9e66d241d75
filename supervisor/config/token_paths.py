"""Where OAuth tokens live on disk (stdlib only, so ``check`` can show the path without loading the SDK).

Layout: ``<token_store>/tokens/<principal>/<server>.json``; see
:mod:`supervisor.auth.token_store` for what a file holds and how it is written.
Pure functions; nothing here awaits.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from supervisor.config.servers import OAuthSettings

STORE_DIR_NAME: Final = "mcp-supervisor"
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_.-]")


def default_store_dir(environ: dict[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/mcp-supervisor``, else ``~/.local/state/mcp-supervisor``."""
    env = os.environ if environ is None else environ
    state_home = env.get("XDG_STATE_HOME")
    base = Path(state_home) if state_home else Path(env.get("HOME") or Path.home()) / ".local" / "state"
    return base / STORE_DIR_NAME


def token_file(oauth: OAuthSettings, server: str) -> Path:
    """Where the tokens of ``server`` for ``oauth.principal`` live."""
    root = Path(oauth.token_store).expanduser() if oauth.token_store else default_store_dir()
    principal = _UNSAFE.sub("_", oauth.principal) or "_"
    if principal in (".", ".."):
        principal = f"_{principal}"
    return root / "tokens" / principal / f"{server}.json"


def file_signature(path: Path) -> tuple[int, int, int] | None:
    """(inode, size, mtime in ns) of ``path``, or None if it does not exist: a replaced file changes it."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns
