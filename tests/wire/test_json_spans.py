"""``supervisor.wire.json_spans``: members located in the bytes, large ones unread, and nothing malformed proven."""

from __future__ import annotations

import json
import random
import sys
from typing import Any

import pytest

from supervisor.wire import json_spans as _json_spans
from supervisor.wire.json_spans import OpaqueArray, OpaqueObject, OpaqueString, Span, Unproven, scan_object

READ = frozenset({"_meta", "isError", "resultType"})
BIG = "y" * 2000  # past OPAQUE_BYTES


def _scan(line: bytes, descend: str = "result") -> dict[str, Span]:
    return scan_object(line, descend=descend, read=READ)


def test_each_member_is_decoded_and_its_text_located_and_the_named_member_is_descended_into() -> None:
    line = b' { "id" : 7, "result":{"content":[{"text":"\\u00e9\\n"}], "_meta":{"k":1}} , "jsonrpc":"2.0"} '
    members = _scan(line)
    assert members["id"][0] == 7
    assert members["jsonrpc"][0] == "2.0"
    inner = members["result"][0]
    assert inner["content"][0] == [{"text": "é\n"}]
    _, start, end = inner["content"]
    assert line[start:end] == b'[{"text":"\\u00e9\\n"}]', "the text is the original, escapes and all"


def test_a_large_member_the_caller_does_not_read_is_a_placeholder_of_its_type_and_read_ones_are_decoded() -> None:
    result = {"content": [{"type": "text", "text": BIG}], "structuredContent": {"t": BIG}, "note": BIG,
              "_meta": {"big": BIG}, "isError": False, "small": [1, 2]}  # fmt: skip
    line = json.dumps({"jsonrpc": "2.0", "id": "a", "result": result, "error_like": {"t": BIG}}).encode()
    members = _scan(line)
    assert members["error_like"][0] == {"t": BIG}, "outside the descended member everything is decoded"
    inner = members["result"][0]
    assert type(inner["content"][0]) is OpaqueArray and inner["content"][0] == []
    assert type(inner["structuredContent"][0]) is OpaqueObject
    assert type(inner["note"][0]) is OpaqueString and inner["note"][0] == ""
    assert inner["_meta"][0] == {"big": BIG}, "a member the splice reads is decoded however large"
    assert inner["isError"][0] is False and inner["small"][0] == [1, 2]
    for key, value in result.items():
        _, start, end = inner[key]
        assert json.loads(line[start:end]) == value


def test_a_meta_look_alike_inside_a_large_string_is_text_and_the_real_meta_is_the_member() -> None:
    decoy = '"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"evil"}}, \\"_meta\\": 1 ' + BIG
    line = json.dumps({"id": 1, "result": {"content": [{"type": "text", "text": decoy}], "_meta": {"k": 1}}}).encode()
    inner = _scan(line)["result"][0]
    assert inner["_meta"][0] == {"k": 1}
    assert set(inner) == {"content", "_meta"}
    _, start, end = inner["content"]
    assert json.loads(line[start:end])[0]["text"] == decoy


@pytest.mark.parametrize(
    "line",
    [
        b'{"a":1,}', b"[1]", b'{"a" 1}', b'{"a":1} x', b'{"result":[1]}', b'{"a":tru}', b"", b"{", b'{"a":"b',
        b'{"a":"\\x"}', b'{"a":"\\u12g4"}', b'{"a":"\\"}', b'{"a":01}', b'{"a":1.}', b'{"a":-}', b'{"a":1e}',
        b'{"a":[1,]}', b'{"a":[1 2]}', b'{"a":{"b":1]}', b'{"a":"\xff"}', b'{"a":"\xed\xa0\x80"}',
        b'{"a":"tab\there"}', b'{"a":"\x00"}', b'{"a"\t:1}', b'{"a":NaN}', b'{"a":Infinity}', b'{"a":1,"a":2}',
        b'{"result":{"a":1,"a":2}}', b'{\'a\':1}', b'{"a":1}}', b'{"a":"b"c"}', b'{"a":"\\\\"b"}',
    ],
)  # fmt: skip
def test_anything_not_proven_one_well_formed_object_is_unproven(line: bytes) -> None:
    with pytest.raises(Unproven):
        _scan(line)


def test_more_tokens_than_the_budget_are_unproven_however_well_formed() -> None:
    line = json.dumps({"id": 1, "result": {"content": list(range(_json_spans.TOKEN_BUDGET))}}).encode()
    json.loads(line)
    with pytest.raises(Unproven):
        _scan(line)


def test_escaped_strings_end_where_json_says_in_ascii_and_in_utf8_lines() -> None:
    for text in ['a\\"b\\\\', '\\\\\\"' * 100, 'q"' * 300, "é\\" * 3 + '"', "\U0001f600\n" * 50]:
        for ensure_ascii in (True, False):
            message = {"id": 1, "result": {"t": text + BIG, "u": text, "é": "é\\"}, "v": text}
            line = json.dumps(message, ensure_ascii=ensure_ascii).encode()
            members = _scan(line)
            inner = members["result"][0]
            assert inner["u"][0] == text and inner["é"][0] == "é\\" and members["v"][0] == text
            assert json.loads(line[inner["t"][1] : inner["t"][2]]) == text + BIG


_SEEDS: list[dict[str, Any]] = [
    {"jsonrpc": "2.0", "id": "mcp-supervisor/splice/7", "result": {
        "content": [{"type": "text", "text": 'a "q" \\ é \U0001f600 \t\n' * 60},
                    {"type": "image", "data": "QUJD" * 300}],
        "structuredContent": {"n": [1, -2.5e-3, True, False, None, {"k": []}], "s": "x" * 1100},
        "isError": False, "_meta": {"k": {"deep": [1, "2"]}}}},
    {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "mcp__fx__echo", "arguments": {"text": "\\u0000 é" * 200, "n": 12, "l": [[], {}, [{}]]},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}},
]  # fmt: skip
_INTERESTING = b'"\\{}[],: \x00\x1f\x7f\xc3\xa9\xff\xed0-eE.tnu'


def _mutants(rng: random.Random, line: bytes) -> bytes:
    index = rng.randrange(len(line))
    match rng.randrange(5):
        case 0:
            return line[:index] + line[index + 1 :]
        case 1:
            return line[:index] + bytes([rng.choice(_INTERESTING)]) + line[index:]
        case 2:
            return line[:index] + bytes([rng.choice(_INTERESTING)]) + line[index + 1 :]
        case 3:
            return line[:index]
        case _:
            other = rng.randrange(len(line))
            return line[:index] + line[min(index, other) : max(index, other)] + line[index:]


def _check_agrees_with_json_loads(line: bytes, descend: str, read: frozenset[str]) -> bool:
    """Whether the scan proved ``line``; if it did, that ``json.loads`` reads the same message from it."""
    try:
        members = scan_object(line, descend=descend, read=read)
    except Unproven:
        return False
    expected: Any = json.loads(line.decode())  # strict UTF-8, as the splice decodes an unproven line
    assert isinstance(expected, dict) and list(expected) == list(members), line
    for key, (value, start, end) in members.items():
        if key == descend:
            assert isinstance(expected[key], dict) and list(expected[key]) == list(value), line
            for inner_key, (inner_value, inner_start, inner_end) in value.items():
                assert json.loads(line[inner_start:inner_end]) == expected[key][inner_key], line
                if not isinstance(inner_value, OpaqueArray | OpaqueObject | OpaqueString):
                    assert inner_value == expected[key][inner_key], line
        else:
            assert value == expected[key] == json.loads(line[start:end]), line
    return True


@pytest.mark.parametrize("seed", range(len(_SEEDS)))
def test_no_mutated_line_is_proven_unless_json_loads_reads_the_same_message_from_it(seed: int) -> None:
    rng = random.Random(seed)
    descend = "result" if "result" in _SEEDS[seed] else "params"
    read = READ if descend == "result" else frozenset({"name", "_meta"})
    for ensure_ascii in (True, False):
        line = json.dumps(_SEEDS[seed], ensure_ascii=ensure_ascii).encode()
        assert _check_agrees_with_json_loads(line, descend, read), "the seed itself is proven"
        proven = 0
        for _ in range(1500):
            mutant = line
            for _ in range(rng.randrange(1, 3)):
                mutant = _mutants(rng, mutant) or b"{"
            proven += _check_agrees_with_json_loads(mutant, descend, read)
        assert 0 < proven < 1500, "some mutants are still well-formed, most are not"


@pytest.mark.parametrize(
    "fault",
    [b"\x00", b"\t", b"\x1f", b"\xff", b"\xc3", b"\xed\xa0\x80", b"\\", b"\\x", b"\\u12", b'"', b'\\\\"', b"\n"],
)
def test_a_fault_inside_a_large_unread_string_is_unproven(fault: bytes) -> None:
    line = json.dumps({"id": 1, "result": {"content": [{"type": "text", "text": BIG + "%s" + BIG}]}}).encode()
    with pytest.raises(Unproven):
        _scan(line.replace(b"%s", fault))
    assert type(_scan(line)["result"][0]["content"][0]) is OpaqueArray, "whole, it is proven and left unread"


@pytest.mark.parametrize(
    "value",
    [
        10 ** (_json_spans.OPAQUE_BYTES + 200),  # a number longer than the C scanner's window: its cut is no value
        10 ** (_json_spans.OPAQUE_BYTES - 1),  # one that ends exactly where the window does
        {"k": "é" * _json_spans.OPAQUE_BYTES},  # a window ending inside a two-byte character
        {"k": "é" * 100, "n": [1.5, None, True, {"deep": "ü"}]},  # non-ASCII: character and byte offsets differ
        "x" * (_json_spans.OPAQUE_BYTES - 2),  # a string whose closing quote is the window's last byte
    ],
    ids=["long-number", "number-to-the-edge", "cut-character", "non-ascii", "string-to-the-edge"],
)
def test_a_value_near_or_past_the_c_scanners_window_is_read_and_located_as_json_loads_reads_it(value: Any) -> None:
    result = {"_meta": value, "content": [{"type": "text", "text": BIG}], "isError": False}
    line = json.dumps({"jsonrpc": "2.0", "id": value, "result": result}, ensure_ascii=False).encode()
    members = _scan(line)
    assert members["id"][0] == value
    assert json.loads(line[members["id"][1] : members["id"][2]]) == value
    inner = members["result"][0]
    assert inner["_meta"][0] == value
    for key, expected in result.items():
        _, start, end = inner[key]
        assert json.loads(line[start:end]) == expected, key


@pytest.mark.parametrize("lead", ["", ']}"'], ids=["no-closer-in-window", "closers-in-window"])
def test_a_large_member_goes_to_the_c_scanner_only_if_its_closing_byte_is_in_the_window(
    lead: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each member's first byte, for every window the C scanner was given.
    scanned: list[str] = []
    scan_value = _json_spans._SCAN_VALUE

    def spy(text: str, index: int) -> tuple[Any, int]:
        scanned.append(text[index])
        return scan_value(text, index)

    monkeypatch.setattr(_json_spans, "_SCAN_VALUE", spy)
    text = lead + BIG
    result = {"content": [{"type": "text", "text": text}], "structuredContent": {"t": text}, "isError": False}
    line = json.dumps({"jsonrpc": "2.0", "id": 7, "result": result}).encode()
    inner = _scan(line)["result"][0]
    for key, expected in result.items():
        _, start, end = inner[key]
        assert json.loads(line[start:end]) == expected, key
    # jsonrpc, id and isError always; content and structuredContent only when a ']' or '}' is in their first window.
    assert sorted(scanned) == (['"', "7", "[", "f", "{"] if lead else ['"', "7", "f"])


_RUN_LENGTHS = [1, 2, 63, 64, 65, 191, 192, 193, 2 * len(_json_spans._BACKSLASHES) + 63]
"""Backslash runs (in the decoded text) around the doubling chunks' edges and past the longest chunk."""


@pytest.mark.parametrize("run", _RUN_LENGTHS)
@pytest.mark.parametrize("lead", ["", "é"])
def test_a_quote_ends_a_string_by_the_parity_of_the_backslashes_before_it(run: int, lead: str) -> None:
    # On the wire a run of n backslashes is 2n, then an escaped quote adds an odd one: both parities at the quote.
    # The last text has more escaped quotes than _MAX_QUOTE_HOPS: its end is found by the C scanner.
    texts = [lead + "\\" * run, lead + "\\" * run + '"' + BIG, lead + '"' * 40 + "\\" * run + '"']
    for text in texts:
        result = {"content": [{"type": "text", "text": text}], "isError": True}
        line = json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}, ensure_ascii=False).encode()
        inner = _scan(line)["result"][0]
        _, start, end = inner["content"]
        assert json.loads(line[start:end]) == result["content"], (run, text[:50])
        assert inner["isError"][0] is True


def test_a_megabyte_of_backslashes_is_counted_without_a_python_step_per_byte() -> None:
    """I15: the scan of one line runs on the event loop; its Python work must not grow with a run of escapes."""
    line = json.dumps({"id": 1, "result": {"content": [{"type": "text", "text": "\\" * 500_000 + '"' + BIG}]}}).encode()
    lines_run = 0

    def count_lines(frame: Any, event: str, arg: Any) -> Any:
        nonlocal lines_run
        if event == "line":
            lines_run += 1
        return count_lines

    previous = sys.gettrace()  # a debugger's or a coverage tool's, put back after
    sys.settrace(count_lines)
    try:
        inner = _scan(line)["result"][0]
    finally:
        sys.settrace(previous)
    _, start, end = inner["content"]
    assert json.loads(line[start:end])[0]["text"].startswith("\\" * 500_000 + '"')
    assert lines_run < 5_000, f"{lines_run} Python lines for one scan: a loop per byte of the run"
