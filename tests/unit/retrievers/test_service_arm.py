"""The service arm against a real HTTP server on 127.0.0.1 that each test starts: the request
it sends, the answer paths it reads, latency, retries, every failure kind (naming the query and
the URL), on_error=skip, and ids the corpus does not hold."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from conftest import compose_config
from support.service_server import Reply, serve, travel_ids

from retrieval_bench.config.service import ServiceConfig
from retrieval_bench.errors import BenchError, ConfigError, NothingUsable
from retrieval_bench.plugins import instantiate_plugin
from retrieval_bench.records import NO_CANDIDATES, EvalQuery
from retrieval_bench.retrievers.service import (
    SERVICE_ERROR,
    UNKNOWN_IDS,
    ServiceArm,
    ServiceError,
)
from retrieval_bench.tiebreak import TieBreak

IDS = travel_ids()
POSITIONS = {pid: i for i, pid in enumerate(IDS)}
A, B, C, D = IDS[0], IDS[1], IDS[2], IDS[3]


def query(query_id: str, role: str | None = None) -> EvalQuery:
    return EvalQuery(query_id, f"text of {query_id}", "entity_exact", "reviewed", user_role=role)


def make_arm(url: str, **settings: Any) -> ServiceArm:
    cfg = ServiceConfig(url=url, retry_backoff_s=0.0, **settings)
    cfg.validate()
    return ServiceArm("service", cfg, POSITIONS, TieBreak(IDS))


def ranked_ids(arm: ServiceArm, queries: list[EvalQuery], k: int = 10) -> list[list[str]]:
    results = arm.search(queries, k, [None] * len(queries))
    return [[IDS[i] for i in r.indices.tolist()] for r in results]


def hits(*pairs: tuple[str, float]) -> dict[str, Any]:
    return {"results": [{"id": pid, "score": score} for pid, score in pairs]}


def test_request_body_carries_query_id_top_k_and_role_null_when_none() -> None:
    with serve(lambda body: (200, hits((A, 1.0)))) as (url, received):
        make_arm(url).search([query("q1", "staff"), query("q2")], 7, [None, None])
    assert sorted(received, key=lambda b: b["query_id"]) == [
        {"query": "text of q1", "query_id": "q1", "top_k": 7, "user_role": "staff"},
        {"query": "text of q2", "query_id": "q2", "top_k": 7, "user_role": None},
    ]


def test_scores_from_the_service_ties_in_trec_order_and_reorders_counted() -> None:
    # B and C tie: trec_eval orders ties by id descending.
    low, high = sorted([B, C])
    answer = hits((A, 1.0), (low, 2.0), (high, 2.0), (D, 0.5))
    with serve(lambda body: (200, answer)) as (url, _):
        arm = make_arm(url)
        [result] = arm.search([query("q1")], 3, [None])
    assert [IDS[i] for i in result.indices.tolist()] == [high, low, A]
    assert result.scores.tolist() == [2.0, 2.0, 1.0]
    assert result.requested == 3
    assert arm.info()["reordered_queries"] == 1


def test_the_services_own_order_is_kept_when_it_agrees_with_its_scores() -> None:
    with serve(lambda body: (200, hits((C, 3.0), (A, 2.0), (B, 1.0)))) as (url, _):
        arm = make_arm(url)
        assert ranked_ids(arm, [query("q1")]) == [[C, A, B]]
    assert arm.info()["reordered_queries"] == 0


def test_configurable_dotted_paths_to_the_list_the_id_and_the_score() -> None:
    answer = {
        "data": {
            "hits": [
                {"doc": {"pid": A}, "meta": {"relevance": 0.25}},
                {"doc": {"pid": B}, "meta": {"relevance": 0.75}},
            ]
        }
    }
    with serve(lambda body: (200, answer)) as (url, _):
        arm = make_arm(
            url, results_path="data.hits", id_field="doc.pid", score_field="meta.relevance"
        )
        [result] = arm.search([query("q1")], 10, [None])
    assert [IDS[i] for i in result.indices.tolist()] == [B, A]
    assert result.scores.tolist() == [0.75, 0.25]


def test_a_bare_list_without_scores_keeps_the_services_order_scored_one_over_rank() -> None:
    with serve(lambda body: (200, [{"id": C}, {"id": A}, {"id": B}])) as (url, _):
        arm = make_arm(url, results_path="", score_field="")
        [result] = arm.search([query("q1")], 10, [None])
    assert [IDS[i] for i in result.indices.tolist()] == [C, A, B]
    assert result.scores.tolist() == [1.0, 1 / 2, 1 / 3]


def test_every_querys_latency_is_recorded_with_p50_p95_max() -> None:
    delay_s = 0.02

    def slow(body: dict[str, Any]) -> Reply:
        time.sleep(delay_s)
        return 200, hits((A, 1.0))

    queries = [query(f"q{i}") for i in range(5)]
    with serve(slow) as (url, _):
        arm = make_arm(url, concurrency=2)
        arm.search(queries, 10, [None] * 5)
    info = arm.info()
    by_query = info["latency_ms_by_query"]
    assert sorted(by_query) == [q.query_id for q in queries]
    assert all(ms >= delay_s * 1000 for ms in by_query.values())  # the server slept that long
    values = np.array(list(arm.latency_ms.values()))
    assert info["latency_ms"] == {
        "p50": round(float(np.percentile(values, 50)), 3),
        "p95": round(float(np.percentile(values, 95)), 3),
        "max": round(float(values.max()), 3),
        "mean": round(float(values.mean()), 3),
    }
    assert info["queries"] == 5


def flaky(failures: int, status: int = 503) -> Any:
    """Answers `status` to each query's first `failures` requests, then a result."""
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def respond(body: dict[str, Any]) -> Reply:
        with lock:
            seen[body["query_id"]] = seen.get(body["query_id"], 0) + 1
            attempt = seen[body["query_id"]]
        if attempt <= failures:
            return status, {"error": "busy"}
        return 200, hits((A, 1.0))

    return respond


@pytest.mark.parametrize("status", [503, 429])
def test_retries_then_success_is_counted(status: int) -> None:
    # 429 Too Many Requests is retried like a 5xx: a busy service asks the client to wait.
    with serve(flaky(2, status)) as (url, received):
        arm = make_arm(url, retries=2)
        assert ranked_ids(arm, [query("q1")]) == [[A]]
    assert len(received) == 3
    info = arm.info()
    assert (info["retried_queries"], info["retries"]) == (1, 2)
    assert info["bad_input"]["failed_queries"] == 0


def test_retries_exhausted_fail_the_job_naming_query_url_and_attempts() -> None:
    with serve(flaky(3)) as (url, received), pytest.raises(ServiceError) as raised:
        make_arm(url, retries=2).search([query("q1")], 10, [None])
    assert len(received) == 3
    assert str(raised.value) == (
        f"service {url}: query 'q1': HTTP 503 Service Unavailable: '{{\"error\": \"busy\"}}' "
        "(after 3 attempts); set arms.service.on_error=skip to count failed queries instead of "
        "failing the job"
    )
    assert isinstance(raised.value, BenchError)  # exit 2, one line, no traceback


def test_a_kept_alive_connection_the_server_dropped_is_reopened_without_a_retry() -> None:
    with serve(lambda body: (200, hits((A, 1.0))), drop_idle=True) as (url, received):
        arm = make_arm(url, retries=0, concurrency=1)
        assert ranked_ids(arm, [query("q1"), query("q2"), query("q3")]) == [[A], [A], [A]]
    assert sorted(b["query_id"] for b in received) == ["q1", "q2", "q3"]
    assert arm.info()["retries"] == 0


def test_a_4xx_is_not_retried() -> None:
    rejected = pytest.raises(ServiceError, match=r"query 'q1': HTTP 400 Bad Request")
    with serve(flaky(1, status=400)) as (url, received), rejected:
        make_arm(url, retries=3).search([query("q1")], 10, [None])
    assert len(received) == 1


def failing_q2(reply: Reply, delay_s: float = 0.0) -> Any:
    def respond(body: dict[str, Any]) -> Reply:
        if body["query_id"] != "q2":
            return 200, hits((A, 1.0))
        time.sleep(delay_s)
        return reply

    return respond


FAILURES = {
    "malformed_json": (
        failing_q2((200, b"<html>oops</html>")),
        {},
        "the answer is not JSON",
    ),
    "non_200": (failing_q2((500, b"boom")), {}, "HTTP 500 Internal Server Error: 'boom'"),
    "missing_id": (
        failing_q2((200, {"results": [{"id": A, "score": 1.0}, {"doc": B, "score": 0.5}]})),
        {},
        "result 2: no 'id' on the path arms.service.id_field='id' (its keys: ['doc', 'score'])",
    ),
    "missing_score": (
        failing_q2((200, {"results": [{"id": A}]})),
        {},
        "result 1: no 'score' on the path arms.service.score_field='score' (its keys: ['id'])",
    ),
    "missing_list": (
        failing_q2((200, {"hits": []})),
        {},
        "no 'results' on the path arms.service.results_path='results' (its keys: ['hits'])",
    ),
    "bad_score": (
        failing_q2((200, {"results": [{"id": A, "score": "high"}]})),
        {},
        "result 1: score 'high' (arms.service.score_field='score') is not a finite number",
    ),
    "timeout": (
        failing_q2((200, hits((A, 1.0))), delay_s=1.0),
        {"timeout_s": 0.1},
        "no answer within arms.service.timeout_s=0.1 s",
    ),
}


@pytest.mark.parametrize("kind", sorted(FAILURES))
def test_each_failure_names_the_query_and_the_url(kind: str) -> None:
    respond, settings, reason = FAILURES[kind]
    with serve(respond) as (url, _), pytest.raises(ServiceError) as raised:
        make_arm(url, retries=0, **settings).search(
            [query("q1"), query("q2"), query("q3")], 10, [None] * 3
        )
    message = str(raised.value)
    assert message.startswith(f"service {url}: query 'q2': ")
    assert reason in message


def test_an_unreachable_service_names_the_query_and_the_url() -> None:
    with serve(lambda body: (200, {})) as (url, _):
        pass  # the server is gone: its port refuses connections
    with pytest.raises(ServiceError, match=r"query 'q1': cannot reach the service") as raised:
        make_arm(url, retries=1).search([query("q1")], 10, [None])
    assert url in str(raised.value) and "(after 2 attempts)" in str(raised.value)


def test_on_error_skip_counts_the_failed_query_and_ranks_the_others() -> None:
    with serve(failing_q2((500, b"boom"))) as (url, _):
        arm = make_arm(url, retries=0, on_error="skip")
        results = arm.search([query("q1"), query("q2"), query("q3")], 10, [None] * 3)
    assert [IDS[i] for i in results[0].indices.tolist()] == [A]
    assert (results[1].returned, results[1].empty_reason) == (0, SERVICE_ERROR)
    assert [IDS[i] for i in results[2].indices.tolist()] == [A]
    info = arm.info()
    assert info["bad_input"]["failed_queries"] == 1
    assert info["failures"] == {"http_500": 1}
    assert info["failed_query_ids"] == ["q2"]
    assert sorted(info["latency_ms_by_query"]) == ["q1", "q2", "q3"]


def test_unknown_and_duplicate_ids_are_counted_never_dropped_unnoticed() -> None:
    answers = {
        "q1": hits((A, 3.0), ("not-in-corpus", 2.0), (A, 1.5), (B, 1.0)),
        "q2": hits(("gone-1", 2.0), ("gone-2", 1.0)),
        "q3": hits(),
    }
    with serve(lambda body: (200, answers[body["query_id"]])) as (url, _):
        arm = make_arm(url)
        results = arm.search([query("q1"), query("q2"), query("q3")], 10, [None] * 3)
    assert [IDS[i] for i in results[0].indices.tolist()] == [A, B]
    assert (results[1].returned, results[1].empty_reason) == (0, UNKNOWN_IDS)
    assert (results[2].returned, results[2].empty_reason) == (0, NO_CANDIDATES)
    info = arm.info()
    assert info["bad_input"]["unknown_ids"] == 3
    assert info["queries_with_unknown_ids"] == 2
    assert info["unknown_id_examples"] == [
        {"query_id": "q1", "id": "not-in-corpus"},
        {"query_id": "q2", "id": "gone-1"},
        {"query_id": "q2", "id": "gone-2"},
    ]
    assert info["bad_input"]["duplicate_ids"] == 1


def test_the_jobs_filters_are_not_applied_to_a_service() -> None:
    nothing_allowed = np.zeros(len(IDS), dtype=bool)
    with serve(lambda body: (200, hits((A, 1.0)))) as (url, _):
        arm = make_arm(url)
        [result] = arm.search([query("q1", "guest")], 10, [nothing_allowed])
    assert [IDS[i] for i in result.indices.tolist()] == [A]
    assert arm.info()["filters_applied"] is False


def test_more_results_than_top_k_are_cut_to_top_k() -> None:
    with serve(lambda body: (200, hits((A, 4.0), (B, 3.0), (C, 2.0), (D, 1.0)))) as (url, _):
        assert ranked_ids(make_arm(url), [query("q1")], k=2) == [[A, B]]


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"url": "127.0.0.1:8080/search"}, "url"),
        ({"concurrency": 0}, "concurrency"),
        ({"timeout_s": 0.0}, "timeout_s"),
        ({"retries": -1}, "retries"),
        ({"retry_backoff_s": -1.0}, "retry_backoff_s"),
        ({"on_error": "ignore"}, "on_error"),
        ({"id_field": ""}, "id_field"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(settings: dict[str, Any], key: str) -> None:
    """Named relative to the node; the config check names it under the arm's node."""
    with pytest.raises(ConfigError) as raised:
        replace(ServiceConfig(url="http://127.0.0.1:1/search"), **settings).validate()
    assert raised.value.key == key
    override = ",".join(
        f"{k}:'{v}'" if isinstance(v, str) else f"{k}:{v}" for k, v in settings.items()
    )
    with pytest.raises(ConfigError) as raised:
        compose_config([f"arms.service={{{override}}}"])
    assert raised.value.key == f"arms.service.{key}"


def test_a_missing_url_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"arms\.staging\.url.*arms\.staging\.url=http://"):
        ServiceConfig().require_url("arms.staging")


def test_an_arm_spec_refuses_an_unknown_or_bad_keyword() -> None:
    node = {"_target_": "retrieval_bench.retrievers.service.ServiceArmSpec"}
    with pytest.raises(ConfigError, match=r"concurency'.*did you mean 'concurrency'"):
        instantiate_plugin("arms.staging", {**node, "concurency": 4}, "ArmSpec", ["build"])
    with pytest.raises(ConfigError) as raised:
        instantiate_plugin("arms.staging", {**node, "concurrency": 0}, "ArmSpec", ["build"])
    assert raised.value.key == "arms.staging.concurrency"


def test_unknown_id_examples_are_distinct_ids(caplog: pytest.LogCaptureFixture) -> None:
    # The same retired id in every answer: one example (with the first query that gave it),
    # and the warning names it once, not "12, 12, 12".
    answer = hits((A, 2.0), ("12", 1.0), ("13", 0.5))
    with serve(lambda body: (200, answer)) as (url, _):
        arm = make_arm(url, concurrency=1)
        arm.search([query("q1"), query("q2"), query("q3")], 10, [None] * 3)
    info = arm.info()
    assert info["bad_input"]["unknown_ids"] == 6
    assert info["unknown_id_examples"] == [
        {"query_id": "q1", "id": "12"},
        {"query_id": "q1", "id": "13"},
    ]
    [warning] = [r.getMessage() for r in caplog.records if "not in the corpus" in r.getMessage()]
    assert warning.endswith("(in 3 queries), e.g. 12, 13; they cannot be ranked")


def test_a_service_answering_only_unknown_ids_is_refused_naming_what_it_lacked() -> None:
    answer = hits(("doc-7", 2.0), ("doc-9", 1.0))
    with serve(lambda body: (200, answer)) as (url, _), pytest.raises(NothingUsable) as raised:
        make_arm(url).search([query("q1"), query("q2")], 10, [None, None])
    assert str(raised.value) == (
        f"arm 'service': service {url} returned 4 ids for 2 queries, none of them a passage "
        "of the corpus (e.g. 'doc-7', 'doc-9'): does it search another collection, or return "
        "another id field (arms.service.id_field)?"
    )
    assert isinstance(raised.value, BenchError)  # exit 2, as a job that scored nothing


def test_a_service_whose_every_query_failed_under_skip_is_refused() -> None:
    with serve(lambda body: (503, {"error": "down"})) as (url, _), pytest.raises(
        NothingUsable, match=r"every one of its 2 queries failed \(http_503 2\)"
    ):
        make_arm(url, retries=0, on_error="skip").search([query("q1"), query("q2")], 10, [None] * 2)
