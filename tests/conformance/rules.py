"""The conformance lane's rules: what fails a run, and the tables it prints (issue 46).

* **Client role:** a scenario the reference client passes and the sidecar does
  not (``Row.regression``), twice in a row: such a scenario is run once more,
  and a pass on that second run is shown in the table with what failed the
  first time (the scenarios time real HTTP exchanges on a shared box).
  Scenarios neither client is built for are shown, not judged.
* **Server role:** a check the suite's server alone passes and the sidecar does
  not, behind either upstream transport (``check_table``); a check the sidecar
  never reached counts as lost, unless the suite itself said the rest of the
  scenario does not apply to the sidecar's answer (``NOT_APPLICABLE``). A
  scenario with a lost check is run once more in every column, and judged on
  that second run (the table says which were).

Pure functions over the suite's verdicts (``tests.conformance.suite.Outcome``),
tested on their own in ``tests/conformance/test_rules.py`` (fast lane).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from tests.conformance.suite import Outcome

BEHIND: Final = ("stdio", "http")
"""How the fixture server sits behind the sidecar: its child over stdio, or a streamable-HTTP upstream."""


@dataclass
class Row:
    """One client scenario: the verdict of each client on it."""

    scenario: str
    reference: Outcome | None = None
    sidecar: Outcome | None = None
    out_of_reach: str | None = None
    first_sidecar: Outcome | None = None
    """The sidecar's first verdict, when it failed where the reference passed and was run once more."""

    def verdict(self, outcome: Outcome | None) -> str:
        if outcome is None:
            return "-"
        return "pass" if outcome.passed else "FAIL"

    def regression(self) -> bool:
        return (
            self.out_of_reach is None
            and self.reference is not None
            and self.reference.passed
            and self.sidecar is not None
            and not self.sidecar.passed
        )


def client_table(title: str, rows: list[Row], columns: tuple[str, str]) -> str:
    lines = [f"## {title}", "", f"| scenario | {columns[0]} | {columns[1]} | note |", "|---|---|---|---|"]
    for row in rows:
        note = f"out of reach for both: {row.out_of_reach}" if row.out_of_reach else ""
        if row.regression():
            note = "**the sidecar fails where the reference passes**"
        elif row.sidecar and row.reference and row.sidecar.passed and not row.reference.passed:
            note = "the sidecar passes where the reference fails"
        elif row.first_sidecar is not None:
            note = f"passed on a second run (the first: {'; '.join(row.first_sidecar.failed[:2])})"
        lines.append(f"| {row.scenario} | {row.verdict(row.reference)} | {row.verdict(row.sidecar)} | {note} |")
    passed = (
        sum(1 for r in rows if r.reference and r.reference.passed),
        sum(1 for r in rows if r.sidecar and r.sidecar.passed),
    )
    lines += ["", f"{columns[0]} {passed[0]}/{len(rows)}, {columns[1]} {passed[1]}/{len(rows)}", ""]
    return "\n".join(lines)


NOT_APPLICABLE: Final = {"server-sse-content-type": "answered JSON; the suite judges SSE priming and resumption n/a"}
"""The suite's own INFO checks that say the rest of a scenario does not apply to this server's answer.

The streamable-HTTP transport lets a server answer a POST with JSON or an SSE
stream. Where the front answers JSON, ``server-sse-polling`` records
``server-sse-content-type`` ("priming event tests not applicable") and judges
nothing more: the checks the server alone passes on its SSE stream are then
shown as not applicable, never counted as passed, and never excused otherwise.
"""


def _not_applicable(outcome: Outcome) -> str | None:
    return next((why for check, why in NOT_APPLICABLE.items() if check in outcome.info), None)


def check_table(title: str, scenarios: list[str], outcomes: dict[str, dict[str, Outcome]]) -> tuple[str, list[str]]:
    """The server role's table (scenario x alone x each sidecar), each check the alone passes and a sidecar loses."""
    columns = ["alone", *(f"sidecar, {b} upstream" for b in BEHIND)]
    lines = [
        f"## {title}",
        "",
        f"| scenario | {' | '.join(columns)} | checks the sidecar loses |",
        "|---|---|---|---|---|",
    ]
    lost: list[str] = []
    for scenario in scenarios:
        alone = outcomes["alone"][scenario]
        passed_alone = {check for check, status in alone.checks if status == "SUCCESS"} - {
            check for check, status in alone.checks if status != "SUCCESS"
        }
        cells, losses = [], []
        for column in ("alone", *BEHIND):
            outcome = outcomes[column][scenario]
            ok = sum(1 for _, status in outcome.checks if status == "SUCCESS")
            cells.append(f"{ok}/{len(outcome.checks)}" + ("" if outcome.passed else " FAIL"))
            why = _not_applicable(outcome) if column != "alone" else None
            if why is not None and not any(status != "SUCCESS" for _, status in outcome.checks):
                cells[-1] += f" (n/a: {why})"
            elif column != "alone":
                bad = {check for check, status in outcome.checks if status != "SUCCESS"}
                seen = {check for check, _ in outcome.checks}
                for check in sorted(passed_alone & (bad | (passed_alone - seen))):
                    losses.append(f"{check} ({column})")
                    said = next((text for text in outcome.failed if text.startswith(f"{check}:")), "not reached")
                    lost.append(f"{scenario}: {check} ({column}): {said}")
        lines.append(f"| {scenario} | {' | '.join(cells)} | {', '.join(losses)} |")
    return "\n".join([*lines, ""]), lost
