"""The documentation keeps up with the code: settings keys, links and the commands CI depends on.

Fast and synchronous: no process, no network, no trio; only the settings models
(through the public ``supervisor.Settings``) and the Markdown files of the checkout.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel

from supervisor import Settings

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
CONFIGURATION = DOCS / "configuration.md"

NOT_KEYS: dict[tuple[str, str], str] = {
    ("ServerSettings", "name"): "the table's name: the loader fills it in, and refuses it as a key in the file",
}
"""Model fields that are not settings keys, with the reason (fields marked ``exclude=True`` are skipped too)."""

_FENCE = re.compile(r"^```.*?^```[^\n]*$", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def _nested(annotation: object, path: str) -> Iterator[tuple[type[BaseModel], str]]:
    """The models inside a field's type, with their table paths: ``Model``, ``Model | None``, ``dict[str, Model]``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation, path
        return
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is dict and len(args) == 2:
        yield from _nested(args[1], f"{path}.<name>")
        return
    for arg in args:
        yield from _nested(arg, path)


def _settings_keys(model: type[BaseModel], table: str = "") -> Iterator[tuple[type[BaseModel], str, str]]:
    """Every (model, TOML key, dotted path) reachable from ``model``; the key is the field's alias when it has one."""
    for attribute, field in model.model_fields.items():
        if field.exclude or (model.__name__, attribute) in NOT_KEYS:
            continue
        key = field.alias or attribute
        path = f"{table}.{key}" if table else key
        yield model, key, path
        for inner, inner_path in _nested(field.annotation, path):
            yield from _settings_keys(inner, inner_path)


def _models(model: type[BaseModel]) -> set[type[BaseModel]]:
    found = {model}
    for field in model.model_fields.values():
        for inner, _ in _nested(field.annotation, ""):
            found |= _models(inner)
    return found


def _documented(key: str, text: str) -> bool:
    """``key`` appears as a backticked key (`` `key` ``) or starts a TOML line (``key = ...``)."""
    escaped = re.escape(key)
    return bool(re.search(rf"`{escaped}`", text) or re.search(rf"^\s*{escaped}\s*=", text, re.MULTILINE))


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    anchors: set[str] = set()
    for heading in _HEADING.findall(_FENCE.sub("", page.read_text())):
        slug, n = _slug(heading), 1
        while slug in anchors:
            slug, n = f"{_slug(heading)}-{n}", n + 1
        anchors.add(slug)
    return anchors


def test_every_settings_key_in_the_models_is_in_the_configuration_reference() -> None:
    text = CONFIGURATION.read_text()
    missing = sorted({f"`{key}` ({path})" for _, key, path in _settings_keys(Settings) if not _documented(key, text)})
    assert not missing, f"{CONFIGURATION.relative_to(ROOT)} does not document these settings keys: " + ", ".join(
        missing
    )


def test_the_key_walk_reaches_nested_tables_and_spells_keys_as_toml_does() -> None:
    paths = {path for _, _, path in _settings_keys(Settings)}
    for expected in (
        "supervisor.front.allow_unauthenticated_loopback",
        "supervisor.catalog_store.operation_timeout_ms",
        "defaults.reconnect.catalog_reuse_ttl_ms",
        "mcp_servers.<name>.reconnect.jitter",
        "mcp_servers.<name>.oauth.signing_algorithm",
        "mcp_servers.<name>.transport",
    ):
        assert expected in paths, f"the walk missed {expected}"
    assert "mcp_servers.<name>.http_transport" not in paths, "a field with an alias must be named by its alias"
    assert "mcp_servers.<name>.name" not in paths
    assert "source_path" not in paths
    fields = {(model.__name__, name) for model in _models(Settings) for name in model.model_fields}
    stale = sorted(set(NOT_KEYS) - fields)
    assert not stale, f"NOT_KEYS names fields the models no longer have: {stale}"


def test_every_relative_link_in_the_readme_and_docs_reaches_a_file_and_heading() -> None:
    broken: list[str] = []
    for page in _pages():
        for target in _LINK.findall(_FENCE.sub("", page.read_text())):
            if re.match(r"[a-z]+:", target):
                continue  # http(s)://, mailto: ...
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(ROOT)}: {target}"
            if not linked.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
                broken.append(f"{where} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in _LINK.findall(README.read_text())}
    unlinked = sorted(page.name for page in DOCS.glob("*.md") if page.resolve() not in linked)
    assert not unlinked, f"README.md does not link these docs pages: {unlinked}"


def test_the_readme_shows_the_test_command_that_ci_runs_byte_for_byte() -> None:
    match = re.search(r"^TEST_COMMAND='([^']*)'$", (ROOT / ".ci" / "run").read_text(), re.MULTILINE)
    assert match is not None, ".ci/run no longer sets TEST_COMMAND='...'"
    assert match.group(1) in README.read_text(), f"README.md lost the test command {match.group(1)!r}"
