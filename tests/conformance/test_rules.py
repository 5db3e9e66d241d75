"""The conformance lane's rules on made-up verdicts (fast lane): what fails a run, what is only shown."""

from __future__ import annotations

from tests.conformance.rules import BEHIND, Row, check_table, client_table
from tests.conformance.suite import Outcome

PASS = Outcome(True, ())
FAIL = Outcome(False, ("auth-token-request: no token request",))


def test_a_client_scenario_is_a_regression_only_where_the_reference_passes_and_the_sidecar_does_not() -> None:
    rows = [
        Row("both-pass", PASS, PASS),
        Row("lost", PASS, FAIL),
        Row("better", FAIL, PASS),
        Row("both-fail", FAIL, FAIL),
        Row("auth/dpop", FAIL, FAIL, out_of_reach="DPoP"),
    ]
    assert [row.scenario for row in rows if row.regression()] == ["lost"]
    text = client_table("Client role", rows, ("reference", "sidecar"))
    assert "| lost | pass | FAIL | **the sidecar fails where the reference passes** |" in text
    assert "| better | FAIL | pass | the sidecar passes where the reference fails |" in text
    assert "out of reach for both: DPoP" in text
    assert "reference 2/5, sidecar 2/5" in text


def _server(checks: dict[str, str], info: frozenset[str] = frozenset()) -> Outcome:
    failed = tuple(f"{check}: {status.lower()}" for check, status in checks.items() if status != "SUCCESS")
    return Outcome(not failed, failed, tuple(checks.items()), info)


def _outcomes(alone: Outcome, *sidecar: Outcome) -> dict[str, dict[str, Outcome]]:
    return {"alone": {"s": alone}, **{behind: {"s": outcome} for behind, outcome in zip(BEHIND, sidecar, strict=True)}}


def test_a_server_check_the_sidecar_fails_or_never_reaches_is_lost_behind_each_upstream() -> None:
    alone = _server({"a": "SUCCESS", "b": "SUCCESS", "c": "FAILURE"})
    stdio = _server({"a": "SUCCESS", "b": "WARNING", "c": "FAILURE"})
    http = _server({"b": "SUCCESS"})
    _, lost = check_table("Server role", ["s"], _outcomes(alone, stdio, http))
    assert lost == ["s: b (stdio): b: warning", "s: a (http): not reached"]


def test_checks_are_excused_only_where_the_suite_itself_said_they_do_not_apply_to_the_sidecars_answer() -> None:
    alone = _server({"server-sse-priming-event": "SUCCESS", "server-sse-retry-field": "SUCCESS"})
    json_answer = _server({}, frozenset({"server-sse-content-type"}))
    silent = _server({})
    text, lost = check_table("Server role", ["s"], _outcomes(alone, json_answer, silent))
    assert [loss.partition(" (")[0] for loss in lost] == ["s: server-sse-priming-event", "s: server-sse-retry-field"]
    assert "0/0 (n/a: answered JSON" in text
    failing_too = _server({"server-sse-retry-field": "FAILURE"}, frozenset({"server-sse-content-type"}))
    _, lost = check_table("Server role", ["s"], _outcomes(alone, failing_too, json_answer))
    assert lost == [
        "s: server-sse-priming-event (stdio): not reached",
        "s: server-sse-retry-field (stdio): server-sse-retry-field: failure",
    ]


def test_a_client_scenario_the_sidecar_passes_on_its_second_run_is_no_regression_and_the_table_says_so() -> None:
    row = Row("sse-retry", PASS, PASS, first_sidecar=FAIL)
    assert not row.regression()
    assert "passed on a second run (the first: auth-token-request: no token request)" in client_table(
        "Client role", [row], ("reference", "sidecar")
    )
    assert Row("sse-retry", PASS, FAIL, first_sidecar=FAIL).regression()
