"""The stdio front's prelude: a host's first answers while the sidecar still imports the SDK (issue 57; no SDK).

A stdio sidecar spends ~0.7 s of a CPU importing the ``mcp`` SDK and its own
parts before its Front can answer anything, so a host that spawns it waited
longer for ``initialize`` than the server alone took to start (1.26x), and
longer still for its first ``tools/list`` (2.03x). ``run`` on the stdio front
(``cli``) opens the prelude right after it starts the stdio servers
(``upstream.spawn``) and imports the rest in a worker thread meanwhile. The
prelude owns the host wire (``wire.host_pipes``) until the Front takes it
(``hand_over``), and answers, from what it has without the SDK:

* ``initialize`` (the handshake era) and ``server/discover`` (2026-07-28), as
  the SDK's server would (``host.capabilities``), declaring the capabilities
  the view served the last time (its snapshot's facts), or all of them when
  nothing is known;
* a first-page ``tools/list`` or ``prompts/list``, from the view's snapshot on
  disk (``catalog.disk.ViewSnapshot``) while every catalog it was made of is
  still fresh: what the Front answered last time, under the same settings,
  versions and pins.

Every other line, and any of those it cannot answer exactly as the Front would
(other params, an unknown version, a stale snapshot, a second ``initialize``),
waits in order for the Front. ``hand_over`` stops reading at a line boundary
and gives the Front those lines, with the host's ``initialize`` re-addressed to
``REPLAYED_INITIALIZE_ID``: the SDK's session must see the handshake it answers
nothing to, and the stdio link drops that answer (the host has its own). What
the prelude answered from the snapshot goes with it, so the Front knows what
its host holds (I22): a live catalog that differs from it is told as a change.

Concurrency: ``open_prelude`` owns one nursery with the reader task; nothing
else reads the host wire until ``hand_over`` has returned. Its writes are the
few short answers above, made in the reader task. Waits: the reader parks on
the host's stdin; ``hand_over`` cancels only that park, never a line half
handled.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import trio

from supervisor.catalog.disk import ALL_FACTS, CatalogFiles, ViewFacts, ViewSnapshot, answer_digest
from supervisor.host.capabilities import (
    ENVELOPE_KEYS,
    MODERN_VERSIONS,
    PROTOCOL_VERSION_META_KEY,
    discover_result,
    initialize_result,
    negotiated,
)
from supervisor.wire.host_pipes import HostPipes, open_host_pipes

logger = logging.getLogger(__name__)

ListKind = Literal["tools", "prompts"]
REPLAYED_INITIALIZE_ID: Final = "mcp-supervisor/prelude-initialize"
"""The id the host's ``initialize`` is replayed to the SDK under; the stdio link drops the SDK's answer to it."""
_LISTS: Final[dict[str, ListKind]] = {"tools/list": "tools", "prompts/list": "prompts"}


@dataclass(frozen=True, slots=True)
class PreludeAnswer:
    """A first-page list the prelude answered from the snapshot: its kind, version and answer's digest."""

    kind: ListKind
    version: str
    digest: str


@dataclass(frozen=True, slots=True)
class Handover:
    """What the Front takes from the prelude: the lines it left, in order, and what it told the host."""

    pipes: HostPipes
    lines: list[bytes]
    handshake_version: str | None
    """The version the prelude's ``initialize`` answer negotiated (None: it answered none)."""
    answered: tuple[PreludeAnswer, ...]
    facts: ViewFacts
    """What the prelude declared (the view's snapshot's facts, or all)."""
    snapshot: ViewSnapshot | None
    """The view's snapshot it answered from (the Front goes on answering first lists from it while servers start)."""


@dataclass(eq=False)
class Prelude:
    """The stdio front's first answers (module docstring)."""

    pipes: HostPipes
    facts: ViewFacts
    instructions: str
    snapshot: ViewSnapshot | None = None
    _lines: list[bytes] = field(default_factory=list)
    _answered: list[PreludeAnswer] = field(default_factory=list)
    _handshake_version: str | None = None
    _stopping: bool = False
    _park: trio.CancelScope | None = None
    _done: trio.Event = field(default_factory=trio.Event)
    _owed: int = 0
    """Requests among the lines kept for the Front (the replayed ``initialize`` is not one: nobody waits for it)."""
    host_gone: trio.Event = field(default_factory=trio.Event)
    """Set when the host closed stdin owing no answer: the sidecar may stop before it has even started."""
    answers: int = 0
    """Requests answered here (tests read it)."""
    handled: int = 0
    """Lines read and answered or kept for the Front (tests read it)."""

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Read and answer the host's lines until ``hand_over`` (or stdin's end), then stop at a line boundary."""
        task_status.started()
        reader, lines = self.pipes.reader, self.pipes.lines
        try:
            while not self._stopping:
                chunk: Any = None  # stays None when ``stop`` cancels the wait
                with trio.CancelScope() as self._park:
                    chunk = await reader.receive()
                self._park = None
                if chunk is None:
                    return
                if not chunk and not self._stopping and not self._owed:
                    self.host_gone.set()  # it asked nothing it was not answered: nothing to start for
                if self._stopping or not chunk:
                    return  # a chunk read as the Front took over is not lost: EOF or nothing was read then
                lines.feed(chunk)
                while (line := lines.next_line()) is not None:
                    await self._on_line(line)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return  # the Front's own read meets the same end
        finally:
            self._done.set()

    def stop(self) -> None:
        """Stop reading once the line being handled is done (or at once, while parked on stdin)."""
        self._stopping = True
        if self._park is not None:
            self._park.cancel()

    async def hand_over(self) -> Handover:
        """Stop reading (at a line boundary) and give the Front the wire and what is left of it."""
        self.stop()
        await self._done.wait()
        if self.answers:
            logger.debug("prelude answered %d request(s); %d line(s) go to the Front", self.answers, len(self._lines))
        return Handover(
            self.pipes, self._lines, self._handshake_version, tuple(self._answered), self.facts, self.snapshot
        )

    async def _on_line(self, line: bytes) -> None:
        self.handled += 1
        answer = self._answer(line)
        if answer is None:
            self._lines.append(line)
            self._owed += _is_request(line)
            return
        self.answers += 1
        await self.pipes.wire_out.send_all(answer)

    def _answer(self, line: bytes) -> bytes | None:
        """The answer line to ``line`` if the prelude can give the Front's exact answer; else None (it waits)."""
        if not line.strip():
            return None
        try:
            message = json.loads(line)
        except ValueError:
            return None  # the Front answers a parse error
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or "id" not in message:
            return None  # a notification, a response, or not JSON-RPC
        request_id, method, params = message["id"], message.get("method"), message.get("params")
        if isinstance(request_id, bool) or not isinstance(request_id, str | int):
            return None
        result: str | None = None
        if method == "initialize":
            result = self._initialize(message, params)
        elif method == "server/discover" and _modern_version(params) is not None:
            result = json.dumps(discover_result(self.facts, self.instructions), separators=(",", ":"))
        elif method in _LISTS:
            result = self._listing(method, params)
        if result is None:
            return None
        return b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() + b',"result":' + result.encode() + b"}\n"

    def _initialize(self, message: dict[str, Any], params: object) -> str | None:
        if self._handshake_version is not None or not _well_formed_initialize(params):
            return None  # a second initialize, or one the SDK may refuse: the Front answers it
        assert isinstance(params, dict)
        version = negotiated(params.get("protocolVersion"))
        self._handshake_version = version
        # The SDK's session must see the handshake too; its answer to this id is dropped (module docstring).
        self._lines.append(json.dumps({**message, "id": REPLAYED_INITIALIZE_ID}).encode())
        result = initialize_result(params.get("protocolVersion"), self.facts, self.instructions)
        return json.dumps(result, separators=(",", ":"))

    def _listing(self, method: str, params: object) -> str | None:
        """A first-page list's answer from the snapshot, in the host's version; None: the Front answers it."""
        if self.snapshot is None:
            return None
        if self._handshake_version is not None:
            version = self._handshake_version if params is None or params == {} else None
        else:
            version = _modern_version(params)
        text = self.snapshot.answer(method, version) if version is not None else None
        if text is not None:
            assert version is not None
            self._answered.append(PreludeAnswer(_LISTS[method], version, answer_digest(text)))
        return text


def _is_request(line: bytes) -> bool:
    """Whether ``line`` may be a request (the Front owes it an answer): anything with an ``id`` but an answer."""
    try:
        message = json.loads(line)
    except ValueError:
        return bool(line.strip())  # the Front answers a parse error
    return not isinstance(message, dict) or ("id" in message and "method" in message)


def _modern_version(params: object) -> str | None:
    """The 2026-era version a request's params name, if they are the envelope and nothing else."""
    if not isinstance(params, dict) or set(params) != {"_meta"}:
        return None
    meta = params["_meta"]
    if not isinstance(meta, dict) or not ENVELOPE_KEYS.issuperset(meta):
        return None
    version = meta.get(PROTOCOL_VERSION_META_KEY)
    return version if version in MODERN_VERSIONS else None


def _well_formed_initialize(params: object) -> bool:
    """Whether ``params`` are an ``initialize`` the SDK accepts (anything else: the SDK answers, or refuses)."""
    if not isinstance(params, dict):
        return False
    info = params.get("clientInfo")
    return (
        isinstance(params.get("protocolVersion"), str)
        and isinstance(params.get("capabilities"), dict)
        and isinstance(info, dict)
        and isinstance(info.get("name"), str)
        and isinstance(info.get("version"), str)
    )


@asynccontextmanager
async def open_prelude(files: CatalogFiles | None, view: str, key: str, instructions: str) -> AsyncIterator[Prelude]:
    """Take over the host wire and answer on it until the Front's ``hand_over``; restore stdin/stdout after.

    Args:
        files: Where the view's snapshot lives (None: catalogs are not kept on disk).
        view: The view the host is served (``""``: everything).
        key: The snapshot's key under these settings (``catalog.disk.settings_key``).
        instructions: The ``instructions`` the Front gives (``host.capabilities.instructions``).
    """
    snapshot = files.read_view(view, key) if files is not None else None
    facts = snapshot.facts if snapshot is not None else ALL_FACTS
    if snapshot is not None:
        logger.debug("view %r snapshot found: %s", view, {m: sorted(v) for m, v in snapshot.answers.items()})
    async with open_host_pipes() as pipes, trio.open_nursery() as nursery:
        prelude = Prelude(pipes, facts, instructions, snapshot)
        await nursery.start(prelude.run)
        yield prelude
        prelude.stop()  # handed over already, or the start failed: either way nothing more is read here
