"""``${VAR}`` / ``${VAR:-default}`` expansion for settings values (DESIGN §3.2).

Pure functions, no I/O: the caller passes the environment mapping, so tests
inject one and the loader decides which keys are expanded. ``$$`` is a literal
``$``; a ``$`` followed by anything else is left alone (no ``$VAR`` form, so
shell-looking arguments pass through untouched).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from supervisor.config.values import clip

_REFERENCE: Final = re.compile(r"\$(\$|\{[^}]*\}|\{)")
_BODY: Final = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?", re.DOTALL)


class InterpolationError(ValueError):
    """A reference could not be expanded; the message says which and why."""


def expand(text: str, environ: Mapping[str, str]) -> str:
    """Return ``text`` with every ``${VAR}`` and ``${VAR:-default}`` replaced.

    ``${VAR:-default}`` uses ``default`` when ``VAR`` is unset or empty, as the
    shell does; ``${VAR}`` set to the empty string expands to the empty string.

    Raises:
        InterpolationError: ``VAR`` is unset and has no default, or a
            reference is malformed (unclosed brace, bad variable name).
    """

    def replace(match: re.Match[str]) -> str:
        token = match.group(1)
        if token == "$":
            return "$"
        if token == "{":
            raise InterpolationError("unclosed '${' reference; close it with '}' or write '$$' for a literal '$'")
        body = _BODY.fullmatch(token[1:-1])
        if body is None:
            raise InterpolationError(
                f"malformed reference '{clip(token)}'; use ${{NAME}} or ${{NAME:-default}} "
                "(NAME is letters, digits and '_'), or write '$$' for a literal '$'"
            )
        name, default = body.group(1), body.group(2)
        value = environ.get(name)
        if default is not None:
            return value if value else default
        if value is None:
            name = clip(name)
            raise InterpolationError(f"environment variable {name} is not set; set it or write ${{{name}:-default}}")
        return value

    return _REFERENCE.sub(replace, text)
