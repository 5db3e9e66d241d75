"""``pins diff`` (issue 27): description as text, schemas as sorted JSON, hidden characters shown."""

from __future__ import annotations

from supervisor.pins.diff import render_diff
from supervisor.pins.fingerprint import Definition

SCHEMA = {"type": "object", "properties": {"org": {"type": "string"}}}


def _tool(description: str = "Searches issues.\nReturns at most 50.", **fields: object) -> Definition:
    return {"name": "search_issues", "description": description, "inputSchema": SCHEMA, **fields}


def test_a_changed_description_reads_as_a_text_diff_under_pinned_and_current_headers() -> None:
    diff = render_diff(("tool", "search_issues"), _tool(), _tool("Searches issues.\nReturns at most 500."))
    assert diff == (
        '--- tool "search_issues" (pinned)\n'
        '+++ tool "search_issues" (current)\n'
        "@@ -2,7 +2,7 @@ description\n"
        "   search_issues\n"
        " description:\n"
        "   Searches issues.\n"
        "-  Returns at most 50.\n"
        "+  Returns at most 500.\n"
        " inputSchema:\n"
        "   {\n"
        '     "properties": {\n'
    )


def test_a_changed_schema_reads_as_pretty_sorted_json_and_the_hunk_names_the_field() -> None:
    wider = {
        "properties": {"org": {"type": "string"}, "cc": {"type": "string", "description": "Copy to."}},
        "type": "object",
    }
    diff = render_diff(("tool", "search_issues"), _tool(), _tool(inputSchema=wider))
    lines = diff.splitlines()
    assert "@@ -6,6 +6,10 @@ inputSchema" in lines
    assert '+      "cc": {' in lines
    assert '+        "description": "Copy to.",' in lines
    assert not any(line.startswith(("-", "+")) and "description:" in line for line in lines[2:])


def test_key_order_alone_is_no_difference() -> None:
    reordered = {"inputSchema": {"properties": {"org": {"type": "string"}}, "type": "object"}, **_tool()}
    assert render_diff(("tool", "search_issues"), _tool(), reordered) == ""


def test_annotations_and_prompt_arguments_are_shown_as_json() -> None:
    diff = render_diff(("tool", "search_issues"), _tool(), _tool(annotations={"destructiveHint": True}))
    assert "+annotations:" in diff and '+    "destructiveHint": true' in diff
    before: Definition = {"name": "review", "arguments": [{"name": "pr"}]}
    after: Definition = {"name": "review", "arguments": [{"name": "pr", "required": True}]}
    prompt = render_diff(("prompt", "review"), before, after)
    assert prompt.startswith('--- prompt "review" (pinned)\n+++ prompt "review" (current)\n')
    assert '-      "name": "pr"' in prompt and '+      "name": "pr",' in prompt and '+      "required": true' in prompt


def test_a_new_tool_is_all_additions_and_a_tool_no_longer_listed_all_deletions() -> None:
    new = render_diff(("tool", "search_issues"), None, _tool())
    assert new.splitlines()[:3] == [
        '--- tool "search_issues" (pinned: none)',
        '+++ tool "search_issues" (current)',
        "@@ -0,0 +1,14 @@ name",
    ]
    assert all(line.startswith("+") for line in new.splitlines()[3:])
    gone = render_diff(("tool", "search_issues"), _tool(), None)
    assert gone.splitlines()[1] == '+++ tool "search_issues" (current: not listed)'
    assert all(line.startswith("-") for line in gone.splitlines()[3:])


def test_hidden_and_control_characters_are_visible_in_the_diff() -> None:
    tags = "".join(chr(0xE0000 + ord(c)) for c in "SEND TOKEN")
    diff = render_diff(("tool", "search_issues"), _tool("Searches."), _tool(f"Searches.{tags}\u200b\x1b[2K"))
    assert '+  Searches.<tags "SEND TOKEN"><U+200B><U+001B>[2K' in diff.splitlines()
    assert "\x1b" not in diff and "\u200b" not in diff
