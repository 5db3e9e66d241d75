"""p10's rows, medians, targets and table (``bench.code_mode``); pure functions, nothing here awaits."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from bench.code_tasks.task import Task

MODES: Final = ("plain", "search", "code")
PLAIN_SHARE_TARGET: Final = 0.20
"""Code mode's median tokens against plain's."""
SEARCH_SHARE_TARGET: Final = 0.50
"""Code mode's median tokens against the search view's, on tasks of ``MANY_CALLS`` calls or more."""
MANY_CALLS: Final = 3
TURNS_TARGET: Final = 2
TURNS_SHARE_TARGET: Final = 0.80


@dataclass
class Row:
    """One task in one mode: the listing's tokens, the calls' tokens (arguments and results), turns, calls."""

    listing: int = 0
    tokens: int = 0
    turns: int = 0
    calls: int = 0
    estimated: bool = False
    answer: Any = None
    correct: bool = False
    """Whether the answer equals the task's expected one."""
    problems: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.listing + self.tokens


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def summary(
    tasks: Sequence[Task],
    results: Mapping[str, Mapping[str, Row]],
    *,
    emulated: bool,
    left_out: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Per task and in total: tokens and turns per mode, the ratios, the targets (module constants).

    The table shows every task with a row in every mode (``left_out`` says why
    another has none). The medians and the token targets count only the tasks
    whose answer was right in every mode; the turns target counts every task
    shown, one whose code run failed as more than two turns (the model would run
    it again).
    """
    done = [task for task in tasks if all(task.name in results.get(mode, {}) for mode in MODES)]
    rows = {task.name: {mode: results[mode][task.name] for mode in MODES} for task in done}
    right = {name: r for name, r in rows.items() if all(row.correct for row in r.values())}
    code_plain = [r["code"].total / r["plain"].total for r in right.values()]
    many = [r for r in right.values() if r["plain"].calls >= MANY_CALLS]
    code_search = [r["code"].total / r["search"].total for r in many]
    short = sum(1 for r in rows.values() if r["code"].correct and r["code"].turns <= TURNS_TARGET)
    medians = {mode: _median([r[mode].total for r in right.values()]) for mode in MODES}
    turns = {mode: _median([r[mode].turns for r in right.values()]) for mode in MODES}
    share_plain, share_search = _median(code_plain), _median(code_search)
    share_turns = short / len(rows) if rows else float("nan")
    return {
        "tasks": len(done),
        "code_estimated": emulated,
        "left_out": dict(left_out or {}),
        "answers_correct": len(right),
        "rows": {
            name: {
                "calls": r["plain"].calls,
                "correct": name in right,
                **{
                    mode: {"tokens": r[mode].total, "turns": r[mode].turns, "listing": r[mode].listing}
                    for mode in MODES
                },
                "problems": {mode: r[mode].problems for mode in MODES if r[mode].problems},
            }
            for name, r in rows.items()
        },
        "median_tokens": medians,
        "median_turns": turns,
        "median_code_over_plain": round(share_plain, 4),
        "code_median_over_plain_median": round(medians["code"] / medians["plain"], 4) if right else None,
        "tasks_of_3_calls": len(many),
        "median_code_over_search_3_calls": round(share_search, 4),
        "share_code_within_2_turns": round(share_turns, 4),
        "targets": {
            "code <= 20% of plain": _verdict(share_plain <= PLAIN_SHARE_TARGET),
            "code <= 50% of search (3+ calls)": _verdict(share_search <= SEARCH_SHARE_TARGET),
            "code <= 2 turns on >= 80% of tasks": _verdict(share_turns >= TURNS_SHARE_TARGET),
        },
    }


def markdown(tasks: Sequence[Task], results: Mapping[str, Mapping[str, Row]], out: Mapping[str, Any]) -> str:
    """The table of ``summary``'s figures, per task then the medians and the targets, as Markdown."""
    mark = "~" if out["code_estimated"] else ""
    lines = [
        "| task | servers | calls | plain tokens | turns | search tokens | turns | code tokens | turns"
        " | code/plain | code/search |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for task in tasks:
        row = out["rows"].get(task.name)
        if row is None:
            why = out["left_out"].get(task.name, "not run in every mode")
            lines.append(f"| {task.name} | {', '.join(task.servers)} | ({why}) |||||||||")
            continue
        plain, search, code = (row[mode] for mode in MODES)
        name = task.name if row["correct"] else f"{task.name} (!)"
        lines.append(
            f"| {name} | {', '.join(task.servers)} | {row['calls']} | {plain['tokens']:,} | {plain['turns']}"
            f" | {search['tokens']:,} | {search['turns']} | {mark}{code['tokens']:,} | {code['turns']}"
            f" | {code['tokens'] / plain['tokens']:.1%} | {code['tokens'] / search['tokens']:.1%} |"
        )
    medians, turns = out["median_tokens"], out["median_turns"]
    lines.append(
        f"| **median** ({out['answers_correct']} tasks) | | | {medians['plain']:,.0f} | {turns['plain']:g}"
        f" | {medians['search']:,.0f} | {turns['search']:g} | {mark}{medians['code']:,.0f} | {turns['code']:g}"
        f" | {out['median_code_over_plain']:.1%} | |"
    )
    lines += [
        "",
        f"Tasks run in every mode: {out['tasks']}; with the expected answer in every mode: {out['answers_correct']}"
        " (the medians and the token targets count these; `(!)` marks the others, whose problems follow).",
        f"Code's tokens against plain's, median of the per-task ratios: {out['median_code_over_plain']:.1%}"
        f" (the medians' ratio: {out['code_median_over_plain_median']:.1%}); target <= {PLAIN_SHARE_TARGET:.0%}:"
        f" {out['targets']['code <= 20% of plain']}.",
        f"Against the search view's, on the {out['tasks_of_3_calls']} tasks of {MANY_CALLS}+ calls:"
        f" {out['median_code_over_search_3_calls']:.1%}; target <= {SEARCH_SHARE_TARGET:.0%}:"
        f" {out['targets']['code <= 50% of search (3+ calls)']}.",
        f"Code in <= {TURNS_TARGET} turns: {out['share_code_within_2_turns']:.0%} of the tasks;"
        f" target >= {TURNS_SHARE_TARGET:.0%}: {out['targets']['code <= 2 turns on >= 80% of tasks']}.",
    ]
    if out["code_estimated"]:
        lines.append("`~`: estimated (no code view here): the program ran in CPython against the real tools.")
    problems = [
        f"* {name} ({mode}): {problem}"
        for name, row in out["rows"].items()
        for mode, found in row["problems"].items()
        for problem in found
    ]
    problems += [
        f"* {name} ({mode}): {problem}"
        for mode, rows in results.items()
        for name, row in rows.items()
        if name not in out["rows"]
        for problem in row.problems
    ]
    if problems:
        lines += ["", "Problems:", *problems]
    return "\n".join(lines) + "\n"
