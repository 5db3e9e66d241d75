"""``ops.metrics.Metrics`` hooks: per-call updates land on the right (server, outcome) series."""

from __future__ import annotations

from supervisor.ops.metrics import PREFIX, Metrics


def test_each_call_is_counted_under_its_own_server_and_outcome_however_often_the_hook_runs() -> None:
    metrics = Metrics(statuses=list, catalog_size=lambda: 0)
    for server, outcome, seconds in [("a", "ok", 0.001), ("a", "ok", 0.002), ("a", "timeout", 30.0),
                                     ("b", "ok", 0.003), ("b", "rpc_error", 0.004)]:  # fmt: skip
        metrics.call_finished(server, outcome, seconds)  # type: ignore[arg-type]

    def sample(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(f"{PREFIX}_{name}", labels)

    assert sample("tool_calls_total", server="a", outcome="ok") == 2
    assert sample("tool_calls_total", server="a", outcome="timeout") == 1
    assert sample("tool_calls_total", server="b", outcome="ok") == 1
    assert sample("tool_calls_total", server="b", outcome="rpc_error") == 1
    assert sample("tool_calls_total", server="b", outcome="timeout") is None
    assert sample("tool_call_duration_seconds_count", server="a") == 3
    assert sample("tool_call_duration_seconds_sum", server="b") == 0.007


def test_call_latencies_fall_into_prometheus_le_buckets() -> None:
    metrics = Metrics(statuses=list, catalog_size=lambda: 0)
    for seconds in (0.001, 0.005, 0.3, 7.0, 100.0):  # 0.005 is a bound: "le" counts it in that bucket
        metrics.call_finished("a", "ok", seconds)

    def bucket(le: str) -> float | None:
        return metrics.registry.get_sample_value(
            f"{PREFIX}_tool_call_duration_seconds_bucket", {"server": "a", "le": le}
        )

    assert [bucket(le) for le in ("0.005", "0.01", "0.5", "10.0", "60.0", "+Inf")] == [2, 2, 3, 4, 4, 5]
    assert f'{PREFIX}_tool_calls_total{{outcome="ok",server="a"}} 5.0' in metrics.render().decode()
