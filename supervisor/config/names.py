"""The ``[supervisor.names]`` table: the form of the public tool and prompt names (issue 57, DESIGN §3.3).

Every host we met puts a prefix of its own before an MCP server's tool names:
Claude Code ``mcp__<its name for the sidecar>__``, Codex a namespace
``mcp__<name>``, Gemini CLI ``mcp_<name>_``. With our own ``mcp__`` the model
saw ``mcp__sup__mcp__demo__echo``: ten characters of every name repeated in
every listing, and a whole name over the 64 characters several model APIs
allow once ours was 64 already (Claude Code and Codex do not cut it; Gemini CLI
mangles it with ``...``).

* ``form = "short"`` (the default): ``<server>__<tool>``. The server part stays,
  so names stay unique across servers and the first ``__`` still ends the
  server's name.
* ``form = "mcp"``: today's ``mcp__<server>__<tool>``, for hosts that show
  names as they are (and to keep names other configuration already uses).

The length rule counts what the host puts before our names: ``host_prefix``
(e.g. ``"mcp__sup__"``, what Claude Code adds for a sidecar it calls ``sup``).
Unset, the short form keeps ``DEFAULT_HOST_PREFIX_CHARS`` free for it (room for
a host name of up to 9 characters under Claude Code's rule, the longest of the
three), and the ``mcp`` form none (exactly today's names). A name longer than
``max_length`` minus that is cut and given a short stable hash, as before.

Frozen models, validated once by the loader; nothing here awaits.
"""

from __future__ import annotations

from typing import Final, Literal, Self

from pydantic import BaseModel, Field, model_validator

from supervisor.config.base import STRICT

DEFAULT_HOST_PREFIX_CHARS: Final = 16
"""What the short form keeps free for the host's prefix when ``host_prefix`` is unset: ``mcp__`` + 9 + ``__``."""
MIN_NAME_CHARS: Final = 16
"""The fewest characters a public name may be given (below that, a cut name is mostly its hash)."""
MCP_PREFIX: Final = "mcp__"


class NamesSettings(BaseModel):
    """The ``[supervisor.names]`` table (module docstring)."""

    model_config = STRICT

    form: Literal["short", "mcp"] = "short"
    host_prefix: str | None = Field(default=None, max_length=128)
    """What the host puts before each of our names (counted against ``max_length``); unset: see the module."""
    max_length: int = Field(default=64, ge=MIN_NAME_CHARS, le=256)
    """The longest whole tool name the host's model API takes (the host's prefix and ours together)."""

    @property
    def prefix(self) -> str:
        """What our public names start with before ``<server>__``."""
        return MCP_PREFIX if self.form == "mcp" else ""

    @property
    def limit(self) -> int:
        """The longest public name we make (``max_length`` less what the host puts before it)."""
        reserved = len(self.host_prefix) if self.host_prefix is not None else self._default_reserve
        return self.max_length - reserved

    @property
    def _default_reserve(self) -> int:
        return DEFAULT_HOST_PREFIX_CHARS if self.form == "short" else 0

    @model_validator(mode="after")
    def _room_for_a_name(self) -> Self:
        if self.limit < MIN_NAME_CHARS:
            raise ValueError(
                f"supervisor.names: max_length = {self.max_length} less the host's prefix "
                f"({self.max_length - self.limit} characters) leaves {self.limit} for a public name; "
                f"it needs at least {MIN_NAME_CHARS}: raise max_length or shorten host_prefix"
            )
        return self
