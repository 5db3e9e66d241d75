"""A person at the terminal as the host of a one-shot ``call`` (issue 30): elicitations asked and answered.

``TerminalHost`` is the ``HostSide`` of ``mcp-supervisor call`` in a terminal:
what an upstream elicits is asked of the person (a form, field by field, with
the schema's defaults and choices, checked by type; a URL, printed and waited
for), over a ``Terminal`` (stdin and stderr in the CLI, a fake in tests).
Sampling and roots are refused as with no host. Server text is stripped of
control characters before it reaches the terminal.

Concurrency: one question at a time (a lock), so concurrent elicitations never
interleave their prompts; a read of the terminal runs in a worker thread that
is abandoned on cancel. The caller bounds the whole exchange (the call's
``tool_timeout_sec``).
"""

from __future__ import annotations

import math
import unicodedata
from typing import Any, Protocol, TextIO

import mcp_types as types
import trio

from supervisor.calls.attribution import HostCall, no_host_error


class Terminal(Protocol):
    """Where a one-shot ``call`` asks its person (the seam: tests drive it with a fake)."""

    async def readline(self) -> str | None:
        """One line the person typed, without its newline; None at the end of input (Ctrl-D)."""
        ...

    def write(self, text: str) -> None:
        """Show ``text`` (prompts and messages; never the result, which goes to stdout)."""
        ...


class StreamTerminal:
    """A ``Terminal`` over text streams: stdin and stderr in the CLI."""

    def __init__(self, stdin: TextIO, out: TextIO) -> None:
        self._stdin = stdin
        self._out = out

    async def readline(self) -> str | None:
        # A read of a terminal cannot be cancelled: it runs in a worker thread, abandoned on cancel
        # (a daemon thread, and the command is ending then).
        line = await trio.to_thread.run_sync(self._stdin.readline, abandon_on_cancel=True)
        return line.rstrip("\r\n") if line else None

    def write(self, text: str) -> None:
        self._out.write(text)
        self._out.flush()


class _EndOfInput(Exception):
    """The person ended the input (Ctrl-D): the elicitation is cancelled."""


class TerminalHost:
    """The host of a one-shot ``call`` in a terminal: the person answers elicitations.

    Sampling and roots are refused as with no host at all; log messages and
    resource updates have no one to go to. One question at a time (a lock), so
    prompts of concurrent elicitations never interleave.
    """

    def __init__(self, terminal: Terminal) -> None:
        self._terminal = terminal
        self._asking = trio.Lock()

    async def ask_host(self, server: str, request: types.InputRequest) -> types.InputResponse | types.ErrorData:
        if not isinstance(request, types.ElicitRequest):
            await trio.lowlevel.checkpoint()
            return no_host_error(request.method)
        async with self._asking:
            return await ask_person(self._terminal, server, request.params)

    def attribute(self, server: str) -> HostCall | None:
        return None  # no host calls: the one call is the command's own

    async def deliver_log(self, server: str, params: types.LoggingMessageNotificationParams) -> None:
        await trio.lowlevel.checkpoint()

    async def deliver_resource_updated(self, server: str, uri: str) -> None:
        await trio.lowlevel.checkpoint()

    async def deliver_elicitation_complete(self, server: str, elicitation_id: str) -> None:
        self._terminal.write(f"{server}: the server says the interaction at the URL is complete.\n")
        await trio.lowlevel.checkpoint()


async def ask_person(terminal: Terminal, server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
    """Ask the person at ``terminal`` what ``server`` elicits; Ctrl-D at any prompt cancels.

    ===========  ==========================================  =============================
    mode         the person                                  answer
    ===========  ==========================================  =============================
    url          presses Enter after the URL                 accept
    form         answers (an empty field takes its default)  accept, with the content
    form         leaves every field empty, and no defaults   decline
    either       Ctrl-D (end of input)                       cancel
    ===========  ==========================================  =============================
    """
    try:
        if isinstance(params, types.ElicitRequestURLParams):
            terminal.write(f"\n{server} asks you to open a URL: {_shown(params.message)}\n  {_shown(params.url)}\n")
            terminal.write("Press Enter when you are done there (Ctrl-D cancels): ")
            if await terminal.readline() is None:
                raise _EndOfInput
            return types.ElicitResult(action="accept")
        return await _ask_form(terminal, server, params)
    except _EndOfInput:
        terminal.write("\n(cancelled)\n")
        return types.ElicitResult(action="cancel")


async def _ask_form(terminal: Terminal, server: str, params: types.ElicitRequestFormParams) -> types.ElicitResult:
    schema = params.requested_schema
    raw = schema.get("properties")
    properties: dict[str, dict[str, Any]] = (
        {name: field for name, field in raw.items() if isinstance(field, dict)} if isinstance(raw, dict) else {}
    )
    required = [name for name in schema.get("required") or [] if name in properties]
    terminal.write(
        f"\n{server} asks: {_shown(params.message)}\n"
        "(Enter takes the [default]; a form left empty declines; Ctrl-D cancels)\n"
    )
    content: dict[str, str | int | float | bool | list[str] | None] = {}
    typed = False
    for name, field in properties.items():
        value = await _ask_field(terminal, name, field, required=name in required)
        if value is not None:
            typed = True
            content[name] = value
        elif "default" in field:
            content[name] = field["default"]
    if not typed and not content:
        terminal.write("(declined)\n")
        return types.ElicitResult(action="decline")
    for name in required:
        while name not in content:  # a required field with no answer and no default: ask until it has one
            terminal.write("  (required)\n")
            value = await _ask_field(terminal, name, properties[name], required=True)
            if value is not None:
                content[name] = value
    return types.ElicitResult(action="accept", content=content)


async def _ask_field(
    terminal: Terminal, name: str, field: dict[str, Any], *, required: bool
) -> str | int | float | bool | list[str] | None:
    """One field's answer, checked against its schema (asked again until it fits); None for an empty answer."""
    label = _shown(str(field.get("title") or name))
    if field.get("description"):
        terminal.write(f"  {label}: {_shown(str(field['description']))}\n")
    options = _choices(field) or _choices(field.get("items"))
    for number, (value, title) in enumerate(options or [], start=1):
        terminal.write(f"    {number}) {_shown(title)}" + (f" ({_shown(value)})" if title != value else "") + "\n")
    default = f" [{_shown(_default_text(field['default']))}]" if "default" in field else ""
    prompt = f"  {label}{_hint(field)}{' (required)' if required else ''}{default}: "
    while True:
        terminal.write(prompt)
        line = await terminal.readline()
        if line is None:
            raise _EndOfInput
        if not line.strip():
            return None
        try:
            return parse_answer(field, line.strip())
        except ValueError as exc:
            terminal.write(f"    {exc}\n")


def parse_answer(field: dict[str, Any], text: str) -> str | int | float | bool | list[str]:
    """The typed answer ``text`` as the schema ``field`` wants it.

    Raises:
        ValueError: ``text`` does not fit; the message says what would.
    """
    kind = field.get("type")
    if kind == "array":
        items = field.get("items") if isinstance(field.get("items"), dict) else {}
        choices = _choices(items)
        parts = [part.strip() for part in text.split(",") if part.strip()]
        values = [_pick(choices, part) for part in parts] if choices else parts
        if _outside(len(values), field.get("minItems"), field.get("maxItems")):
            raise ValueError(f"choose {_range_text(field.get('minItems'), field.get('maxItems'))} (comma-separated)")
        return values
    choices = _choices(field)
    if choices is not None:
        return _pick(choices, text)
    if kind == "boolean":
        answer = text.lower()
        if answer in ("y", "yes", "true", "1"):
            return True
        if answer in ("n", "no", "false", "0"):
            return False
        raise ValueError("answer y or n")
    if kind in ("integer", "number"):
        return _number(field, text, integer=kind == "integer")
    return _string(field, text)


def _number(field: dict[str, Any], text: str, *, integer: bool) -> int | float:
    try:
        value: int | float = int(text)  # "3" stays an integer in the JSON answer, even for a number
    except ValueError:
        try:
            value = math.nan if integer else float(text)
        except ValueError:
            value = math.nan
    if not math.isfinite(value):
        raise ValueError(f"{'a whole' if integer else 'a'} number, please")
    if _outside(value, field.get("minimum"), field.get("maximum")):
        raise ValueError(f"a number {_range_text(field.get('minimum'), field.get('maximum'))}, please")
    return value


def _string(field: dict[str, Any], text: str) -> str:
    if _outside(len(text), field.get("minLength"), field.get("maxLength")):
        raise ValueError(f"{_range_text(field.get('minLength'), field.get('maxLength'))} characters, please")
    return text


def _outside(value: float, low: object, high: object) -> bool:
    """Whether ``value`` is below ``low`` or above ``high`` (bounds that are not numbers do not count)."""
    bounds = (isinstance(low, int | float) and value < low, isinstance(high, int | float) and value > high)
    return any(bounds)


def _choices(field: object) -> list[tuple[str, str]] | None:
    """An enum's (value, title) pairs: ``enum`` (titles from ``enumNames``) or ``oneOf``/``anyOf`` of ``const``."""
    if not isinstance(field, dict):
        return None
    if isinstance(field.get("enum"), list):
        values = [str(value) for value in field["enum"]]
        names = field.get("enumNames")
        titles = [str(n) for n in names] if isinstance(names, list) and len(names) == len(values) else values
        return list(zip(values, titles, strict=True))
    options = field.get("oneOf") or field.get("anyOf")
    if isinstance(options, list) and options and all(isinstance(o, dict) and "const" in o for o in options):
        return [(str(o["const"]), str(o.get("title") or o["const"])) for o in options]
    return None


def _pick(choices: list[tuple[str, str]], text: str) -> str:
    """The choice ``text`` names: its value, its title (any case) or its number in the list shown."""
    for number, (value, title) in enumerate(choices, start=1):
        if text in (value, str(number)) or text.casefold() == title.casefold():
            return value
    raise ValueError(f"one of {', '.join(value for value, _ in choices)} (or its number), please")


def _hint(field: dict[str, Any]) -> str:
    kind = field.get("type")
    bounds = _range_text(field.get("minimum"), field.get("maximum"))
    hints = {"boolean": "y/n", "array": "comma-separated", "integer": "whole number", "number": "number"}
    hint = hints.get(kind, "") if isinstance(kind, str) and _choices(field) is None else ""
    return f" ({hint}{', ' + bounds if bounds and hint else ''})" if hint else ""


def _range_text(low: object, high: object) -> str:
    if low is not None and high is not None:
        return f"from {low} to {high}"
    return f"at least {low}" if low is not None else f"at most {high}" if high is not None else ""


def _default_text(value: object) -> str:
    if isinstance(value, bool):
        return "y" if value else "n"
    return ", ".join(str(item) for item in value) if isinstance(value, list) else str(value)


def _shown(text: str) -> str:
    """``text`` from a server, safe for a terminal: control and format characters (escapes, bidi) made visible."""
    visible = (c if c in "\n\t" or unicodedata.category(c) not in ("Cc", "Cf") else f"\\u{ord(c):04x}" for c in text)
    return "".join(visible)
