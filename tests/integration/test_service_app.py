"""`retriever=service` end to end on the travel dataset, against a service on 127.0.0.1 that
the test starts: in process (the job's outputs, manifest and report) and, once, as the app
(exit codes and the one-line error)."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from conftest import compose_config, mini_overrides, run_app, run_in_process
from support.service_server import Reply, labelled_answers, serve

from retrieval_bench.errors import ConfigError
from retrieval_bench.reports.service import service_lines
from retrieval_bench.retrievers.service import SERVICE_ERROR, ServiceError
from run.example_service import Ranker, make_server, url_of

TRAVEL_QUERIES = 166


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_a_travel_job_against_a_perfect_service_scores_its_bound(tmp_path: Path) -> None:
    with serve(labelled_answers()) as (url, received):
        _, job = run_in_process(
            ["retriever=service", f"arms.service.url={url}", f"cache_dir={tmp_path / 'cache'}"],
            tmp_path,
        )
    assert len(received) == TRAVEL_QUERIES
    assert {body["top_k"] for body in received} == {10}  # retriever.pool_size
    metrics = json.loads((job / "metrics.json").read_text(encoding="utf-8"))
    assert list(metrics["stages"]) == ["service", "final"]
    final = metrics["stages"]["final"]["overall"]
    # The service returns each query's labelled passages: recall reaches its bound.
    assert final["recall@6"] == final["recall_bound@6"]
    assert (job / "trec" / "service.run").is_file()
    info = json.loads((job / "manifest.json").read_text(encoding="utf-8"))["arms"]["service"]
    assert info["url"] == url
    assert info["queries"] == TRAVEL_QUERIES
    assert len(info["latency_ms_by_query"]) == TRAVEL_QUERIES
    assert set(info["latency_ms"]) == {"p50", "p95", "max", "mean"}
    assert info["bad_input"] == {"failed_queries": 0, "unknown_ids": 0, "duplicate_ids": 0}
    report = (job / "report.md").read_text(encoding="utf-8")
    assert "\n".join(service_lines({"service": info})) in report


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_skipped_failures_and_unknown_ids_are_counted_in_the_outputs(tmp_path: Path) -> None:
    perfect = labelled_answers()

    def respond(body: dict[str, Any]) -> Reply:
        if body["query_id"] == "t001":
            return 500, b"index offline"
        status, answer = perfect(body)
        if body["query_id"] == "t002":
            answer["results"].append({"id": "retired-passage", "score": -1.0})
        return status, answer

    overrides = ["retriever=service", "arms.service.on_error=skip", "arms.service.retries=0"]
    with serve(respond) as (url, _):
        _, job = run_in_process(
            [*overrides, f"arms.service.url={url}", f"cache_dir={tmp_path / 'cache'}"], tmp_path
        )
    info = json.loads((job / "manifest.json").read_text(encoding="utf-8"))["arms"]["service"]
    assert (info["bad_input"]["failed_queries"], info["failures"], info["failed_query_ids"]) == (
        1,
        {"http_500": 1},
        ["t001"],
    )
    assert info["unknown_id_examples"] == [{"query_id": "t002", "id": "retired-passage"}]
    metrics = json.loads((job / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["stages"]["service"]["counts"]["empty_rankings"][SERVICE_ERROR] == 1
    rankings = [json.loads(x) for x in (job / "rankings.jsonl").read_text().splitlines()]
    [t001] = [r for r in rankings if r["query_id"] == "t001"]
    assert t001["stages"]["service"]["ids"] == []
    assert t001["stages"]["service"]["empty_reason"] == SERVICE_ERROR


def test_a_failing_service_fails_the_job_naming_the_query_and_the_url(tmp_path: Path) -> None:
    perfect = labelled_answers()

    def respond(body: dict[str, Any]) -> Reply:
        return (200, b"not json") if body["query_id"] == "t003" else perfect(body)

    with serve(respond) as (url, _), pytest.raises(ServiceError) as raised:
        run_in_process(
            ["retriever=service", f"arms.service.url={url}", f"cache_dir={tmp_path / 'cache'}"],
            tmp_path,
        )
    assert str(raised.value).startswith(f"service {url}: query 't003': the answer is not JSON")


def test_retriever_service_without_a_url_is_refused_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        run_in_process(["retriever=service", f"cache_dir={tmp_path / 'cache'}"], tmp_path)
    assert raised.value.key == "arms.service.url"


def test_a_bad_service_setting_is_refused_when_the_config_is_read() -> None:
    with pytest.raises(ConfigError) as raised:
        compose_config(["retriever=service", "arms.service.on_error=ignore"])
    assert raised.value.key == "arms.service.on_error"


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_a_second_service_arm_overrides_the_url(tmp_path: Path) -> None:
    """Two services in one job: `arms.<name>` keys override `service.*` for that arm only."""
    with (
        serve(labelled_answers()) as (good, _),
        serve(lambda body: (200, {"results": []})) as (
            empty,
            _,
        ),
    ):
        second = f"{{_target_: retrieval_bench.retrievers.service.ServiceArmSpec, url: '{empty}'}}"
        _, job = run_in_process(
            [
                "retriever=service",
                f"arms.service.url={good}",
                f"+arms.empty={second}",
                "retriever.arms=[service,empty]",
                f"cache_dir={tmp_path / 'cache'}",
            ],
            tmp_path,
        )
    arms = json.loads((job / "manifest.json").read_text(encoding="utf-8"))["arms"]
    assert (arms["service"]["url"], arms["empty"]["url"]) == (good, empty)
    metrics = json.loads((job / "metrics.json").read_text(encoding="utf-8"))
    assert list(metrics["stages"]) == ["service", "empty", "fused", "final"]
    manifest = json.loads((job / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["own_acl_arms"] == ["service", "empty"]
    report = (job / "report.md").read_text(encoding="utf-8")
    assert "Trusted with their own access control: `service`, `empty`." in report


@pytest.mark.slow
def test_the_app_runs_a_service_and_exits_2_naming_a_failed_query(tmp_path: Path) -> None:
    perfect = labelled_answers()

    def respond(body: dict[str, Any]) -> Reply:
        return (503, b"down") if body["query_id"] == "t010" else perfect(body)

    common = ["retriever=service", f"cache_dir={tmp_path / 'cache'}", "arms.service.retries=1"]
    with serve(perfect) as (url, _):
        ok = run_app([*common, f"arms.service.url={url}", f"hydra.run.dir={tmp_path / 'ok'}"])
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert "Service arm `service`" in (tmp_path / "ok" / "report.md").read_text(encoding="utf-8")
    with serve(respond) as (url, _):
        failed = run_app([*common, f"arms.service.url={url}", f"hydra.run.dir={tmp_path / 'bad'}"])
    assert failed.returncode == 2, failed.stderr[-3000:]
    assert failed.stderr.strip().splitlines()[-1] == (
        f"error: service {url}: query 't010': HTTP 503 Service Unavailable: 'down' (after 2 "
        "attempts); set arms.service.on_error=skip to count failed queries instead of failing the "
        "job"
    )


def test_the_report_line_of_a_service_arm() -> None:
    info = {
        "kind": "service",
        "url": "http://127.0.0.1:8080/search",
        "queries": 3,
        "latency_ms": {"p50": 12.04, "p95": 20.51, "max": 31.2, "mean": 14.0},
        "retried_queries": 1,
        "bad_input": {"failed_queries": 1, "unknown_ids": 2, "duplicate_ids": 0},
        "failures": {"timeout": 1},
        "queries_with_unknown_ids": 1,
        "reordered_queries": 1,
    }
    assert service_lines({"bm25": {"index": "sparse"}, "prod": info}) == [
        "## Service arms",
        "",
        "Service arm `prod` (http://127.0.0.1:8080/search): 3 queries, latency ms p50 12.0, "
        "p95 20.5, max 31.2; retried 1; failures: timeout 1; answers re-sorted by score 1. What "
        "its answers held that could not be used is under *Arm input*. The job's filters are "
        "not applied to a service (its leaks are what leak@K measures); every query's latency: "
        "`manifest.json`.",
        "",
    ]


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_the_example_service_ranks_as_the_bm25_arm_does(tmp_path: Path) -> None:
    # `python -m run.example_service`, in process: BM25 over the mini corpus behind the service
    # protocol. Without filters, a service job and a bm25 job rank every query alike.
    overrides = [*mini_overrides(tmp_path), "filters.city=false", "filters.permissions=false"]
    server = make_server(Ranker(overrides))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        url = url_of(server)
        job = [*overrides, "retriever=service", f"arms.service.url={url}"]
        service, _ = run_in_process(job, tmp_path / "service")
        bad = urllib.request.Request(url, data=b'{"top_k": 3}', method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(bad, timeout=30)
        assert refused.value.code == 400
    finally:
        server.shutdown()
        server.server_close()
    bm25, _ = run_in_process([*overrides, "retriever=bm25"], tmp_path / "bm25")
    ranked = {r.query.query_id: r.stages["final"].ids for r in bm25.records}
    assert {r.query.query_id: r.stages["final"].ids for r in service.records} == ranked
    assert any(ranked.values())
