"""A one-shot ``call`` in a terminal is a host: the person answers what an upstream elicits (issue 30, item 5).

Fast lane: ``ops.terminal_host.TerminalHost`` and ``ask_person`` driven through
the ``Terminal`` seam by a scripted fake (each line a person would type, None
for Ctrl-D), and ``StreamTerminal`` over in-memory streams. End to end, with a
real pseudo-terminal and a real upstream: ``tests/test_oneshot_elicitation_e2e.py``.
"""

from __future__ import annotations

import io
from typing import Any, Final

import mcp_types as types
import pytest
import trio

from supervisor.ops.terminal_host import StreamTerminal, TerminalHost, ask_person, parse_answer

BOUND_SEC: Final = 5.0


class FakeTerminal:
    """A person who types ``lines`` in order (None: Ctrl-D); everything shown to them lands in ``shown``."""

    def __init__(self, *lines: str | None) -> None:
        self._lines = list(lines)
        self.shown: list[str] = []

    async def readline(self) -> str | None:
        await trio.lowlevel.checkpoint()
        assert self._lines, f"asked once more than scripted; last shown: {self.shown[-1:]}"
        return self._lines.pop(0)

    def write(self, text: str) -> None:
        self.shown.append(text)

    @property
    def text(self) -> str:
        return "".join(self.shown)

    @property
    def unread(self) -> int:
        return len(self._lines)


def _form(properties: dict[str, Any], required: list[str] | None = None) -> types.ElicitRequestFormParams:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        schema["required"] = required
    return types.ElicitRequestFormParams(message="Tell us about you", requested_schema=schema)


async def _ask(terminal: FakeTerminal, params: types.ElicitRequestParams) -> types.ElicitResult:
    with trio.fail_after(BOUND_SEC):
        return await ask_person(terminal, "fx", params)


EVERY_KIND: Final[dict[str, Any]] = {
    "name": {"type": "string", "title": "Your name", "description": "What we call you", "minLength": 2},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "height": {"type": "number", "default": 1.7},
    "subscribe": {"type": "boolean", "default": True},
    "color": {"type": "string", "enum": ["red", "green", "blue"]},
    "size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]},
    "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}},
}


async def test_a_form_asks_every_field_checks_each_type_and_accepts_with_the_answers() -> None:
    terminal = FakeTerminal(
        "A",  # too short: asked again
        "Ada",
        "old",  # not an integer: asked again
        "200",  # above the maximum: asked again
        "36",
        "",  # the default, 1.7
        "no",
        "2",  # the second choice: green
        "large",  # a title, any case
        "a, 3",
    )
    result = await _ask(terminal, _form(EVERY_KIND, required=["name"]))
    assert result.action == "accept"
    assert result.content == {
        "name": "Ada",
        "age": 36,
        "height": 1.7,
        "subscribe": False,
        "color": "green",
        "size": "l",
        "tags": ["a", "c"],
    }
    assert terminal.unread == 0
    shown = terminal.text
    assert "fx asks: Tell us about you" in shown
    assert "Your name: What we call you" in shown and "Your name (required): " in shown
    assert "at least 2 characters, please" in shown
    assert "a whole number, please" in shown and "a number from 0 to 150, please" in shown
    assert "height (number) [1.7]: " in shown and "subscribe (y/n) [y]: " in shown
    assert "2) green" in shown and "2) Large (l)" in shown


async def test_enter_on_every_field_takes_the_schema_defaults() -> None:
    fields = {"subscribe": {"type": "boolean", "default": False}, "color": {"type": "string", "default": "red"}}
    result = await _ask(FakeTerminal("", ""), _form(fields))
    assert result.action == "accept" and result.content == {"subscribe": False, "color": "red"}


async def test_a_form_left_empty_with_no_defaults_declines() -> None:
    terminal = FakeTerminal("", "")
    result = await _ask(terminal, _form({"name": {"type": "string"}, "age": {"type": "integer"}}, ["name"]))
    assert result.action == "decline" and result.content is None
    assert "(declined)" in terminal.text


async def test_ctrl_d_at_any_prompt_cancels_the_whole_form() -> None:
    terminal = FakeTerminal("Ada", None)
    result = await _ask(terminal, _form({"name": {"type": "string"}, "age": {"type": "integer"}}))
    assert result.action == "cancel" and result.content is None
    assert "(cancelled)" in terminal.text


async def test_a_required_field_left_empty_is_asked_again_once_the_form_has_answers() -> None:
    terminal = FakeTerminal("Ada", "", "", "Lovelace")  # `last` left empty, then asked until it has an answer
    result = await _ask(terminal, _form({"first": {"type": "string"}, "last": {"type": "string"}}, ["last"]))
    assert result.action == "accept" and result.content == {"first": "Ada", "last": "Lovelace"}
    assert "(required)\n" in terminal.text


async def test_a_url_elicitation_shows_the_server_the_message_and_the_url_and_accepts_on_enter() -> None:
    params = types.ElicitRequestURLParams(message="Please log in", url="https://example.invalid/login")
    terminal = FakeTerminal("")
    assert (await _ask(terminal, params)).action == "accept"
    assert "fx asks you to open a URL: Please log in\n  https://example.invalid/login\n" in terminal.text
    assert (await _ask(FakeTerminal(None), params)).action == "cancel"


async def test_server_text_cannot_drive_the_terminal_with_control_characters() -> None:
    params = types.ElicitRequestURLParams(message="\x1b[2J\x1b]0;owned\x07hi\u202e", url="https://e.invalid/\x1b[A")
    terminal = FakeTerminal("")
    await _ask(terminal, params)
    assert "\x1b" not in terminal.text and "\u202e" not in terminal.text and "\x07" not in terminal.text
    assert "\\u001b[2J" in terminal.text and "\\u202e" in terminal.text


async def test_the_terminal_host_refuses_sampling_and_roots_as_a_missing_host_would() -> None:
    host = TerminalHost(FakeTerminal())
    roots = await host.ask_host("fx", types.ListRootsRequest())
    assert isinstance(roots, types.ErrorData) and roots.code == types.INVALID_REQUEST
    assert "no host to forward roots/list" in roots.message
    assert host.attribute("fx") is None


async def test_the_terminal_host_asks_one_elicitation_at_a_time() -> None:
    terminal = FakeTerminal("one", "two")
    host = TerminalHost(terminal)
    request = types.ElicitRequest(params=_form({"name": {"type": "string"}}))
    answers: list[object] = []

    async def ask() -> None:
        answers.append(await host.ask_host("fx", request))

    with trio.fail_after(BOUND_SEC):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            nursery.start_soon(ask)
    contents = sorted(str(a.content) for a in answers if isinstance(a, types.ElicitResult))
    assert contents == ["{'name': 'one'}", "{'name': 'two'}"]
    # Each form's header is followed by its own field prompt: no interleaving.
    headers = [i for i, text in enumerate(terminal.shown) if text.startswith("\nfx asks:")]
    assert len(headers) == 2 and terminal.shown[headers[0] + 1].startswith("  name")


async def test_a_stream_terminal_reads_lines_and_reports_the_end_of_input() -> None:
    out = io.StringIO()
    terminal = StreamTerminal(io.StringIO("Ada\r\n\n"), out)
    with trio.fail_after(BOUND_SEC):
        assert await terminal.readline() == "Ada"
        assert await terminal.readline() == ""
        assert await terminal.readline() is None
    terminal.write("shown")
    assert out.getvalue() == "shown"


@pytest.mark.parametrize(
    ("field", "text", "message"),
    [
        ({"type": "boolean"}, "maybe", "answer y or n"),
        ({"type": "number"}, "nan", "a number, please"),
        ({"type": "string", "enum": ["x", "y"]}, "z", "one of x, y (or its number), please"),
        ({"type": "string", "maxLength": 3}, "long", "at most 3 characters, please"),
        ({"type": "array", "items": {"enum": ["a"]}, "minItems": 1}, ",", "choose at least 1 (comma-separated)"),
    ],
)
def test_an_answer_that_does_not_fit_its_schema_says_what_would(field: dict[str, Any], text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_answer(field, text)
