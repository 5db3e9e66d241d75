"""Environment overrides (``MCP_SUPERVISOR_<SECTION>__<KEY>``) read by pydantic-settings.

Imported by :mod:`supervisor.config.loader` only when such a variable is set:
pydantic-settings takes about 0.2 s to import, more than the rest of ``check``.
Pure and synchronous; reads only the mapping it is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import create_model
from pydantic_settings import BaseSettings, SettingsConfigDict

from supervisor.compat.pydantic_settings import MappingEnvSource
from supervisor.config.models import ENV_PREFIX, Settings


class _Sections(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", strict=True, frozen=True
    )


# The env source only needs the shape of the top-level sections (to know which
# values nest); deriving it from Settings keeps the two from drifting apart.
_SECTIONS: dict[str, Any] = {
    name: (field.annotation, field) for name, field in Settings.model_fields.items() if name != "source_path"
}
_Shape = create_model("_Shape", __base__=_Sections, **_SECTIONS)


def read_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    """The override variables in ``environ`` as a nested mapping, not yet validated.

    Raises:
        ValueError: A variable holds a value that cannot be parsed (e.g. bad JSON for a table).
    """
    return MappingEnvSource(_Shape, environ)()
