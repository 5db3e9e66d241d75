"""Where OAuth tokens (and pins) live on disk (stdlib only, so ``check`` can show the path without loading the SDK).

Layout: ``<token_store>/tokens/<principal>/<server>.json``; see
:mod:`supervisor.auth.token_store` for what a file holds and how it is written.
Pinned definitions (issue 27) live beside them in ``<token_store>/pins/``.
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


def store_dir(setting: str | None) -> Path:
    """The state directory: the ``token_store`` setting if set, else :func:`default_store_dir`."""
    return Path(setting).expanduser() if setting else default_store_dir()


def principal_dir_name(principal: str) -> str:
    """``principal`` as one safe path component (characters outside ``[A-Za-z0-9_.-]`` become ``_``)."""
    name = _UNSAFE.sub("_", principal) or "_"
    return f"_{name}" if name in (".", "..") else name


def token_file(oauth: OAuthSettings, server: str) -> Path:
    """Where the tokens of ``server`` for ``oauth.principal`` live."""
    return store_dir(oauth.token_store) / "tokens" / principal_dir_name(oauth.principal) / f"{server}.json"


def pin_file(store_dir_setting: str | None, principal: str, server: str) -> Path:
    """Where the pinned definitions of ``server`` for ``principal`` live (issue 27).

    ``<store>/pins/<principal>/<server>.json``, beside the token store; see
    :mod:`supervisor.pins.store` for what a file holds.
    """
    return store_dir(store_dir_setting) / "pins" / principal_dir_name(principal) / f"{server}.json"


def file_signature(path: Path) -> tuple[int, int, int] | None:
    """(inode, size, mtime in ns) of ``path``, or None if it does not exist: a replaced file changes it."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns
