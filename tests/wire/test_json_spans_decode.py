"""``wire.json_spans`` decodes a plain string or a run of digits without ``json.loads``: the values must be its values.

Keys and envelope values of a large line (``"2.0"``, ``"tools/call"``, an id)
are decoded from their bytes directly (issue 11); each must come out as
``json.loads`` reads it, type included (``7`` is an ``int``, not ``7.0``), and
what ``json.loads`` refuses stays unproven.
"""

from __future__ import annotations

import json

import pytest

from supervisor.wire.json_spans import Unproven, scan_object

VALUES = [
    "2.0",
    "",
    "tools/call",
    "é ü 漢字 😀",
    'a "quoted" \\ back\\slash',
    "tab\there",
    0,
    7,
    12345678901234567890123456789,
    -3,
    1.5,
    -0.0,
    1e300,
    True,
    None,
    [1, "two"],
    {"k": "v"},
]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_a_member_and_its_key_decode_to_what_json_loads_gives_type_and_all(value: object) -> None:
    key = value if isinstance(value, str) else "k"
    line = json.dumps({"id": value, key: {"x": value}, "result": {key: value}}, ensure_ascii=False).encode()
    members = scan_object(line, descend="result", read=frozenset())
    expected = json.loads(line)
    got = {name: member[0] for name, member in members.items()}
    got["result"] = {name: member[0] for name, member in got["result"].items()}
    assert repr(got) == repr(expected)  # repr: 7 != 7.0 there, and nan != nan is not a concern
    assert [type(v) for v in got.values()] == [type(v) for v in expected.values()]


def test_digits_too_many_for_an_int_are_unproven_as_json_loads_refuses_them() -> None:
    line = b'{"id":' + b"9" * 5000 + b',"result":{}}'
    with pytest.raises(ValueError):
        json.loads(line)
    with pytest.raises(Unproven):
        scan_object(line, descend="result", read=frozenset())
