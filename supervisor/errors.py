"""The supervisor's one exception hierarchy.

Foreign exceptions (SDK, trio, OS, pydantic) are translated once, at the seam
where they enter, with ``raise ... from exc``::

    SupervisorError
    ├── ConfigError                 bad settings file, key, value or variable (exit 2)
    ├── UpstreamError               something about one upstream server went wrong
    │   ├── UpstreamUnavailable     not connected: connecting, reconnecting, stopping or failed
    │   │   └── UpstreamNeedsLogin  an OAuth server has no usable tokens: a person must run `login`
    │   ├── UpstreamTimeout         connect, list or call exceeded its bound
    │   └── UpstreamProtocolError   the server answered with something unusable
    ├── RegistryConflict            a public tool name is already owned by someone else
    └── CatalogStoreUnavailable     the fleet catalog store (Redis) is down, slow or refused us

The CLI's exit codes (DESIGN §3.1) live here too, beside the errors they stand
for, so every command module can return them without importing the CLI.
"""

from __future__ import annotations

from typing import Final

EXIT_OK: Final = 0
EXIT_RUNTIME: Final = 1
"""A runtime failure: a server, the network, the sidecar itself."""
EXIT_CONFIG: Final = 2
"""Bad configuration or usage (a ``ConfigError``, a bad argument)."""


class SupervisorError(Exception):
    """Root of every error the supervisor raises on purpose."""


class ConfigError(SupervisorError):
    """The configuration cannot be used; the message names the file, key and fix."""


class UpstreamError(SupervisorError):
    """A failure that belongs to one upstream server.

    Attributes:
        server: The configured server name.
    """

    def __init__(self, server: str, message: str) -> None:
        super().__init__(message)
        self.server = server


class UpstreamUnavailable(UpstreamError):
    """The server has no live generation to take the request."""


class UpstreamNeedsLogin(UpstreamUnavailable):
    """An ``authorization_code`` server has no tokens, or its refresh failed: only ``login`` can fix it.

    The message says so and names the command; it never carries a token.

    Attributes:
        token_file: Where ``login`` will store the new tokens (the actor watches it).
        seen: That file's signature when the failed attempt read it (a login changes it).
    """

    def __init__(
        self, server: str, message: str, token_file: str | None = None, seen: tuple[int, int, int] | None = None
    ) -> None:
        super().__init__(server, message)
        self.token_file = token_file
        self.seen = seen


class UpstreamTimeout(UpstreamError):
    """The server did not answer within its configured bound."""


class UpstreamProtocolError(UpstreamError):
    """The server answered with something the supervisor cannot use."""


class RegistryConflict(SupervisorError):
    """A public tool name is already owned by another owner.

    Attributes:
        name: The contested public name.
        owner: Who holds it.
        claimant: Who tried to take it.
    """

    def __init__(self, name: str, owner: str, claimant: str) -> None:
        super().__init__(f"tool name {name!r} is already owned by {owner!r}; {claimant!r} cannot register it")
        self.name = name
        self.owner = owner
        self.claimant = claimant


class CatalogStoreUnavailable(SupervisorError):
    """The fleet catalog store did not serve one operation; callers fall back to the local store.

    Attributes:
        url: The store's URL, password masked.
        reason: What went wrong (never the password).
    """

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"catalog store {url}: {reason}")
        self.url = url
        self.reason = reason


def first_leaf(exc: BaseException) -> BaseException:
    """The first non-group exception inside ``exc`` (trio and the SDK nest them in groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
