"""``decode_message``: the model ``jsonrpc_message_adapter.validate_json`` gives, and the same lines refused."""

from __future__ import annotations

import json

import mcp_types
import pytest

from supervisor.wire.stdio import decode_message

LISTING = {
    "jsonrpc": "2.0",
    "id": 2,
    "result": {
        "tools": [
            {"name": f"t_{i}", "description": "d\u00e9j\u00e0", "inputSchema": {"type": "object", "properties": {}}}
            for i in range(100)
        ]
    },
}

LINES = [
    json.dumps(LISTING).encode(),
    b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}],"isError":false}}',
    b'{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","arguments":{"n":1.5}}}',
    b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}',
    b'{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"Method not found","data":"x"}}',
    b'{"jsonrpc":"2.0","id":99999999999999999999999,"result":{}}',
    b'{"jsonrpc":"2.0","id":1,"result":{"x":NaN}}',
    b'{"jsonrpc":"2.0","id":1,"result":{},"result":{"a":1}}',
    b'  {"jsonrpc":"2.0","id":1,"result":{}}  ',
    # refused by both
    b'{"jsonrpc":"2.0","id":1.5,"result":{}}',
    b'{"jsonrpc":"2.0","id":true,"result":{}}',
    b'{"jsonrpc":"1.0","id":1,"result":{}}',
    b'{"jsonrpc":"2.0","id":"1","method":"x","params":[1]}',
    b'{"jsonrpc":"2.0","id":1}',
    b'{"jsonrpc":"2.0","id":1,"result":{}',
    b'{"jsonrpc":"2.0","method":"a","params":{"k":"\\ud800"}}',
    b"\xff\xfe",
    b"[]",
    b"null",
    b"not json",
]


def _sdk(line: bytes) -> object:
    try:
        return mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError:
        return ValueError


def _ours(line: bytes) -> object:
    try:
        return decode_message(line)
    except ValueError:
        return ValueError


@pytest.mark.parametrize("line", LINES, ids=range(len(LINES)))
def test_a_line_decodes_to_the_sdks_own_model_or_is_refused_as_the_sdk_refuses_it(line: bytes) -> None:
    expected = _sdk(line)
    got = _ours(line)
    if expected is ValueError:
        assert got is ValueError
    else:
        assert type(got) is type(expected)
        assert repr(got) == repr(expected)  # NaN != NaN: compare the reprs, which show every field
