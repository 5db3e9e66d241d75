"""The one place that overrides a private hook of pydantic-settings (STYLE: private names live in compat).

* ``MappingEnvSource``: pydantic-settings' env source reads ``os.environ``;
  ``config.env`` needs it to read an injected mapping instead (the loader's
  errors name what it was given, and tests inject their own). The source's
  ``_load_env_vars`` is the hook that yields the variables.

Imports pydantic-settings and nothing of the SDK, so ``check`` and ``import``
stay fast (``config.env`` imports this only when an override variable is set).
``tests/compat/test_compat.py`` holds the assumption. Synchronous.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic_settings import BaseSettings, EnvSettingsSource


class MappingEnvSource(EnvSettingsSource):
    """An env source over ``settings_cls`` that reads ``environ`` instead of ``os.environ``."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {(k if self.case_sensitive else k.lower()): v for k, v in self._environ.items()}
