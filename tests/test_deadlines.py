"""A lint of the suite itself: every real-time deadline in the end-to-end tests goes through ``scaled``.

The e2e modules (those that use ``tests.sidecar``, and ``tests/sidecar.py`` itself) must
not hand ``trio.fail_after`` / ``trio.move_on_after`` or a ``bound_sec=``
argument a bare number: such a deadline would ignore ``MCP_SUPERVISOR_TEST_SCALE``
and turn into a flake on a loaded machine. Static (``ast``), so it runs in the
fast lane.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Final

TESTS_DIR: Final = Path(__file__).resolve().parent
BOUNDED_CALLS: Final = frozenset({"fail_after", "move_on_after"})


def _e2e_modules() -> list[Path]:
    modules = [TESTS_DIR / "sidecar.py"]
    for path in sorted(TESTS_DIR.glob("test_*.py")):
        if "tests.sidecar" in path.read_text(encoding="utf-8"):
            modules.append(path)
    return modules


def _is_number(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool)


def unscaled_deadlines(source: str) -> list[int]:
    """Line numbers of deadlines given as bare numbers in ``source``."""
    lines: list[int] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in BOUNDED_CALLS and node.args and _is_number(node.args[0]):
            lines.append(node.lineno)
        lines.extend(kw.value.lineno for kw in node.keywords if kw.arg == "bound_sec" and _is_number(kw.value))
    return sorted(lines)


def test_the_lint_spots_bare_number_deadlines_and_accepts_scaled_ones() -> None:
    bare = "with trio.fail_after(5):\n    pass\nawait wait_until(p, what='x', bound_sec=3)\nmove_on_after(0.5)\n"
    assert unscaled_deadlines(bare) == [1, 3, 4]
    assert unscaled_deadlines("with trio.fail_after(scaled(5)):\n    await h.wait_tools(p, bound_sec=BOUND)\n") == []


def test_every_deadline_in_the_e2e_tests_is_scaled() -> None:
    offenders = {
        str(path.relative_to(TESTS_DIR)): lines
        for path in _e2e_modules()
        if (lines := unscaled_deadlines(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}, f"wrap these deadlines in tests.sidecar.scaled(...): {offenders}"
