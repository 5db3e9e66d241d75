"""The OAuth token store: one file per (principal, server), mode 0600, written atomically (issue 12).

Layout: ``<token_store>/tokens/<principal>/<server>.json`` where ``token_store``
is the setting, else ``$XDG_STATE_HOME/mcp-supervisor``, else
``~/.local/state/mcp-supervisor``. A file holds the server URL it was issued
for, the tokens (with the absolute expiry, so a restart knows how long the
access token has left) and the client registration (dynamic registration's
client id and, if one was issued, secret). A different principal is a
different file: principals never share tokens.

Every write goes to a fresh ``O_EXCL`` file created with mode 0600 in the same
directory, is fsynced and then renamed over the old one, so a reader (the
running sidecar, while ``login`` writes) sees the old file or the new one,
never half of either. A file whose mode lets anyone but its owner read it is
refused (``TokenFileRefused``), never used. The mechanics are shared with the
pin store in :mod:`supervisor.config.private_files`; the words are this
module's.

Wall-clock time (``time.time()``) on purpose: an expiry outlives the process
that wrote it, and the SDK's own expiry checks use the wall clock too.

Concurrency: ``FileTokenStorage`` implements the SDK's ``TokenStorage``
protocol; its methods do small synchronous file I/O (a few hundred bytes)
and then yield once. Nothing here holds a lock or a task.
"""

from __future__ import annotations

import stat
import time
from pathlib import Path
from typing import Any, assert_never

import trio
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from supervisor.config.private_files import (
    PrivateFileRefused,
    Refusal,
    read_private_json,
    write_private_json,
)
from supervisor.config.token_paths import default_store_dir, file_signature, token_file
from supervisor.errors import ConfigError


class TokenFileRefused(ConfigError):
    """A token file exists but must not be used (too wide a mode, or unreadable)."""


class KeyFileRefused(ConfigError):
    """A ``private_key_file`` must not be used: missing, unreadable, or readable by others (issue 13)."""


def read_private_key(path: Path, server: str) -> str:
    """The PEM text of ``oauth.private_key_file``, under the token file's rule: mode 0600 or narrower.

    The message of every refusal names the file and the fix, never a byte of the key.

    Raises:
        KeyFileRefused: The file is missing or unreadable, or its mode is wider than 0600.
    """
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            raise KeyFileRefused(
                f"server {server!r}: the private key file {path} has mode {mode:04o}, wider than 0600, so other "
                f"users may have read it; it is not used. Run `chmod 600 {path}` (and replace the key at the "
                "authorization server if anyone else may have read it)"
            )
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not a PEM text file"
        raise KeyFileRefused(
            f"server {server!r}: cannot read the private key file {path} ({why}); "
            "check oauth.private_key_file (a PEM private key, mode 0600)"
        ) from None


def read_document(path: Path, server: str) -> dict[str, Any] | None:
    """The file's JSON document, None if there is none.

    Raises:
        TokenFileRefused: The mode is wider than 0600, or the file cannot be read or parsed.
    """
    try:
        document = read_private_json(path)
    except PrivateFileRefused as refused:
        raise TokenFileRefused(_refusal_message(refused.refusal, server)) from refused
    return document if isinstance(document, dict) else None


def _refusal_message(refusal: Refusal, server: str) -> str:
    path = refusal.path
    match refusal.reason:
        case "unreadable":
            return f"server {server!r}: cannot read the token file {path} ({refusal.detail})"
        case "too-wide":
            return (
                f"server {server!r}: the token file {path} has mode {refusal.mode or 0:04o}, wider than 0600, so other "
                f"users may have read it; it is not used. Run `mcp-supervisor logout {server}` and "
                f"`mcp-supervisor login {server}` (or `chmod 600 {path}` if you are sure nobody else read it)"
            )
        case "damaged":
            return (
                f"server {server!r}: the token file {path} is unreadable or damaged; "
                f"run `mcp-supervisor login {server}` to replace it"
            )
        case unreachable:
            assert_never(unreachable)


def write_document(path: Path, document: dict[str, Any]) -> None:
    """Replace ``path`` atomically with ``document`` (mode 0600; parent directories 0700)."""
    write_private_json(path, document)


def step_up_file(path: Path) -> Path:
    """Where a pending scope step-up of the token file ``path`` is recorded (issue 13)."""
    return path.with_name(f"{path.stem}.step-up.json")


def forget(path: Path) -> bool:
    """Delete the token file (``logout``) and any step-up record; whether there was a token file."""
    step_up_file(path).unlink(missing_ok=True)
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


class FileTokenStorage:
    """The SDK's ``TokenStorage`` over one token file.

    Args:
        path: The token file (``token_file``).
        server: The server's name (for error messages).
        server_url: The URL the tokens are for; tokens stored for another URL are ignored.
        fixed_client: A pre-registered client (``oauth.client_id``): it is what
            ``get_client_info`` returns, and it is never written to the file.
    """

    def __init__(
        self, path: Path, server: str, server_url: str, fixed_client: OAuthClientInformationFull | None = None
    ) -> None:
        self.path = path
        self._server = server
        self._url = server_url
        self._fixed_client = fixed_client

    def _document(self) -> dict[str, Any]:
        document = read_document(self.path, self._server)
        if document is None or document.get("server_url") != self._url:
            return {"server_url": self._url}
        return document

    def load_tokens(self) -> OAuthToken | None:
        """The stored tokens, ``expires_in`` recomputed as the seconds left now (may be <= 0)."""
        stored = self._document().get("tokens")
        if not isinstance(stored, dict):
            return None
        fields = {k: v for k, v in stored.items() if k != "expires_at"}
        expires_at = stored.get("expires_at")
        if isinstance(expires_at, int | float):
            fields["expires_in"] = int(expires_at - time.time())
        try:
            return OAuthToken.model_validate(fields)
        except ValueError:
            return None

    def has_tokens(self) -> bool:
        """Whether the file holds tokens for this server's URL (raises ``TokenFileRefused`` like ``load_tokens``)."""
        return self.load_tokens() is not None

    def clear_tokens(self, *, keep_client: bool) -> None:
        """Drop the stored tokens (``login`` starts afresh); drop the registration too unless ``keep_client``."""
        document = self._document()
        document.pop("tokens", None)
        if not keep_client:
            document.pop("client_info", None)
        write_document(self.path, document)

    def stored_client(self) -> OAuthClientInformationFull | None:
        stored = self._document().get("client_info")
        if not isinstance(stored, dict):
            return None
        try:
            return OAuthClientInformationFull.model_validate(stored)
        except ValueError:
            return None

    # -- scope step-up (issue 13) --------------------------------------------------------

    # Kept beside the token file, not in it: ``run`` records a step-up, and a
    # change of the token file itself is what wakes a server parked in needs_login.

    def step_up(self) -> tuple[str, int] | None:
        """The scope a step-up asked for and how many logins have asked for it, None if none is pending."""
        document = read_document(step_up_file(self.path), self._server) or {}
        scope, attempts = document.get("scope"), document.get("attempts")
        if document.get("server_url") != self._url or not isinstance(scope, str) or not scope:
            return None
        return scope, attempts if isinstance(attempts, int) else 0

    def set_step_up(self, scope: str, attempts: int) -> None:
        """Record (or, with an empty ``scope``, clear) the step-up ``login`` must ask for."""
        if scope:
            write_document(step_up_file(self.path), {"server_url": self._url, "scope": scope, "attempts": attempts})
        else:
            step_up_file(self.path).unlink(missing_ok=True)

    # -- the SDK's TokenStorage protocol --------------------------------------------------

    async def get_tokens(self) -> OAuthToken | None:
        tokens = self.load_tokens()
        await trio.lowlevel.checkpoint()
        return tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        document = self._document()
        stored: dict[str, Any] = tokens.model_dump(mode="json", exclude_none=True, exclude={"expires_in"})
        if tokens.expires_in is not None:
            stored["expires_at"] = time.time() + int(tokens.expires_in)
        document["tokens"] = stored
        write_document(self.path, document)
        await trio.lowlevel.checkpoint()

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        client = self._fixed_client if self._fixed_client is not None else self.stored_client()
        await trio.lowlevel.checkpoint()
        return client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if self._fixed_client is None:
            document = self._document()
            document["client_info"] = client_info.model_dump(mode="json", exclude_none=True)
            write_document(self.path, document)
        await trio.lowlevel.checkpoint()


class MemoryTokenStorage:
    """``TokenStorage`` in memory: client-credentials tokens, which the machine can always get again."""

    def __init__(self, client: OAuthClientInformationFull | None = None) -> None:
        self._tokens: OAuthToken | None = None
        self._client = client

    async def get_tokens(self) -> OAuthToken | None:
        await trio.lowlevel.checkpoint()
        return self._tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._tokens = tokens
        await trio.lowlevel.checkpoint()

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        await trio.lowlevel.checkpoint()
        return self._client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._client = client_info
        await trio.lowlevel.checkpoint()


__all__ = [
    "FileTokenStorage",
    "KeyFileRefused",
    "MemoryTokenStorage",
    "TokenFileRefused",
    "default_store_dir",
    "file_signature",
    "forget",
    "read_document",
    "read_private_key",
    "token_file",
    "write_document",
]
