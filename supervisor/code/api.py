"""A view's tools as one program's API: the ``tools`` package's modules, and what ``search_tools`` answers (issue 58).

``ViewApi.of`` takes every tool of a code view (listed or not: the program
reaches what a search could find), grouped by server, and makes one module per
server (``code.names``'s rule: module = server, function = the tool part of
the public name the host was shown, after transforms) with its stubs
(``code.stubs``). ``by_public`` and ``by_call`` map a public name and the
engine's ``tools.<module>.<function>`` back to the stub.

``signatures`` is ``search_tools``' answer: one typed line per hit, its
description's first sentence under it; ``details`` gives the full stubs of the
hits, every argument described.

Pure: made once per view version (``host.code_mode`` keeps the latest).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from supervisor.catalog.naming import tool_part
from supervisor.catalog.registry import RegisteredTool
from supervisor.code.names import Identifiers
from supervisor.code.stubs import ServerStubs, ToolEntry, ToolStub, detail, server_stubs


@dataclass(frozen=True, slots=True)
class ViewApi:
    """The program's view of a code view's tools (module docstring)."""

    modules: Mapping[str, ServerStubs]
    """module identifier -> its stubs."""
    servers: Mapping[str, str]
    """module identifier -> the server's name."""
    by_public: Mapping[str, ToolStub]
    """public name -> its function."""
    by_call: Mapping[str, ToolStub]
    """``tools.<module>.<function>`` (how the engine names a call) -> its function."""

    @classmethod
    def of(cls, servers: Iterable[tuple[str, Iterable[ToolEntry]]]) -> ViewApi:
        """The API of ``servers``: each server's name and its tools, in catalog order."""
        names = Identifiers("s")
        modules: dict[str, ServerStubs] = {}
        for server, entries in servers:
            module = names.add(server)
            modules[module] = server_stubs(module, entries)
        by_public = {stub.public_name: stub for stubs in modules.values() for stub in stubs.tools.values()}
        by_call = {f"tools.{stub.module}.{stub.function}": stub for stub in by_public.values()}
        return cls(modules, dict(names.origin), by_public, by_call)

    @classmethod
    def of_tools(cls, tools: Iterable[RegisteredTool]) -> ViewApi:
        """The API of a view's tools (as the host was shown them), a module per server, in catalog order."""
        grouped: dict[str, list[ToolEntry]] = {}
        for tool in tools:
            shown = tool.shown
            entry = ToolEntry(
                tool.key, tool_part(tool.key, tool.owner), shown.description, shown.input_schema, shown.output_schema
            )
            grouped.setdefault(tool.owner, []).append(entry)
        return cls.of(sorted(grouped.items()))

    def signatures(self, public_names: Iterable[str]) -> str:
        """``search_tools``' answer: each hit's signature, and its summary under it (unknown names are left out)."""
        lines: list[str] = []
        for name in public_names:
            stub = self.by_public.get(name)
            if stub is not None:
                lines.append(stub.signature)
                if stub.summary:
                    lines.append(f"    {stub.summary}")
        return "\n".join(lines)

    def details(self, public_names: Iterable[str]) -> str:
        """``search_tools(detail=true)``: each hit's full stub, after the types it names."""
        stubs = [stub for name in public_names if (stub := self.by_public.get(name)) is not None]
        return "\n\n".join(detail(stub, self.modules[stub.module]) for stub in stubs)
