"""``supervisor._json_spans``: members located in the text, and objects written back from the slices."""

from __future__ import annotations

import json

import pytest

from supervisor._json_spans import join_members, whole_object_spans


def test_each_member_is_decoded_and_its_text_located_and_the_named_member_is_descended_into() -> None:
    text = ' { "id" : 7, "result":{"content":[{"text":"\\u00e9\\n"}], "_meta":{"k":1}} , "jsonrpc":"2.0"} '
    members = whole_object_spans(text, descend="result")
    assert members["id"][0] == 7
    assert members["jsonrpc"][0] == "2.0"
    inner = members["result"][0]
    assert inner["content"][0] == [{"text": "é\n"}]
    _, start, end = inner["content"]
    assert text[start:end] == '[{"text":"\\u00e9\\n"}]', "the text is the original, escapes and all"


def test_joining_members_keeps_the_untouched_text_and_encodes_the_replaced_and_added_values() -> None:
    text = '{"content":[1, 2],"_meta":{"old":true}}'
    inner = whole_object_spans(text)
    joined = join_members(text, inner, {"_meta": {"new": 1}, "resultType": "complete"})
    assert joined == '{"content":[1, 2],"_meta":{"new": 1},"resultType":"complete"}'
    assert json.loads(joined) == {"content": [1, 2], "_meta": {"new": 1}, "resultType": "complete"}


@pytest.mark.parametrize("text", ['{"a":1,}', "[1]", '{"a" 1}', '{"a":1} x', '{"result":[1]}', '{"a":tru}', ""])
def test_anything_but_one_object_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        whole_object_spans(text, descend="result")
