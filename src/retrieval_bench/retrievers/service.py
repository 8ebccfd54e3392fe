"""An external retriever behind an HTTP API as an arm (`retriever=service arms.service.url=URL`).

Each query is POSTed as JSON `{"query", "query_id", "top_k", "user_role"}` (`user_role` null
when the query has none; `top_k` is the pool size the job asks every arm for); the answer's list
of results, and each result's id and score, are found at the dotted paths `results_path`,
`id_field` and `score_field` of the arm's node, so an existing service fits without a shim.

What the arm does with an answer:
- Ids not in the corpus cannot be ranked (a ranking holds corpus positions): they are counted
  and reported in the manifest (`unknown_ids`, with examples), never dropped unnoticed.
- An id given twice keeps its first place; the repeats are counted (`duplicate_ids`).
- The kept results are sorted by the service's scores with the project's tie-break (score
  descending, then id descending, as trec_eval orders a run), so the TREC export scores as the
  job does; a query whose order that changed is counted (`reordered_queries`).
- The job's own filters (metadata, permissions, exclusions) are not applied: the service ranks
  with its own access rules, and what it lets through is what leak@K measures. `allowed` is
  ignored on purpose.

When no query gets a passage of the corpus because every id the service returned is unknown to
it (another collection, another id field), or every query failed under `on_error=skip`, the job
stops with `NothingUsable` (exit 2, naming the arm and the URL) instead of scoring zeros.

A query that still fails after its retries (timeout, connection error, non-200 status,
malformed JSON, a result without its id or score) fails the job with `ServiceError`, naming the
query and the URL; with `on_error=skip` it gets an empty ranking with empty_reason
`service_error` instead, counted in the manifest and in metrics.json's empty rankings.
`ServiceError` is a `BenchError` (exit 2, one line, no traceback): the service is an input of
the job, like its dataset files, and its failure is something the user acts on (the URL, the
service, `on_error=skip`), not a bug in this tool to report (exit 3).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retrieval_bench.config.service import ServiceConfig
from retrieval_bench.errors import BenchError, NothingUsable
from retrieval_bench.http_json import AttemptFailed, Connections, post_json, with_retries
from retrieval_bench.progress import progress
from retrieval_bench.protocols import BuildContext
from retrieval_bench.records import NO_CANDIDATES, EvalQuery, Ranked
from retrieval_bench.tiebreak import TieBreak

log = logging.getLogger(__name__)

# Why a service arm's ranking is empty (`Ranked.empty_reason`): the query failed and
# on_error=skip counted it, or every id the service returned is absent from the corpus.
SERVICE_ERROR = "service_error"
UNKNOWN_IDS = "unknown_ids"

UNKNOWN_ID_EXAMPLES = 10


class ServiceError(BenchError):
    """A query the service did not answer usably after its retries (see the module docs)."""

    def __init__(self, url: str, query_id: str, reason: str, arm: str = "service") -> None:
        super().__init__(
            f"service {url}: query '{query_id}': {reason}; set arms.{arm}.on_error=skip to "
            "count failed queries instead of failing the job"
        )
        self.url = url
        self.query_id = query_id
        self.reason = reason


@dataclass
class _Answer:
    """One query's outcome, made in a worker thread and counted in the calling one."""

    ranked: Ranked
    latency_ms: float
    attempts: int
    unknown: list[str] = field(default_factory=list)
    duplicates: int = 0
    reordered: bool = False
    failure: AttemptFailed | None = None


def _dig(value: Any, path: str, key: str, kind: str) -> Any:
    """`value` at the dotted `path` ("" is the value itself); a missing step is a `kind`
    failure naming the config `key`."""
    if not path:
        return value
    for step in path.split("."):
        if isinstance(value, Mapping) and step in value:
            value = value[step]
        elif isinstance(value, list) and step.isdigit() and int(step) < len(value):
            value = value[int(step)]
        else:
            found = (
                f"its keys: {sorted(value)[:10]}"
                if isinstance(value, Mapping)
                else f"found {type(value).__name__}"
            )
            raise AttemptFailed(kind, f"no '{step}' on the path {key}={path!r} ({found})")
    return value


def _result_field(item: Any, rank: int, path: str, key: str, kind: str) -> Any:
    """A field of the answer's `rank`-th result; a failure says which result."""
    try:
        return _dig(item, path, key, kind)
    except AttemptFailed as failed:
        raise AttemptFailed(failed.kind, f"result {rank}: {failed}") from None


class ServiceArm:
    """Ranks by asking the service (see the module docs); `allowed` is never applied: the
    service filters by its own access rules, which the pipeline trusts (`applies_own_acl`,
    job.contract) and leak@K measures."""

    applies_own_acl = True
    # Not timed again by the latency probe (job.latency): that would send the service more
    # requests; each query's latency of the run itself (`latency_ms_by_query`) stands in.
    latency_probe = False

    def __init__(
        self,
        name: str,
        cfg: ServiceConfig,
        positions: Mapping[str, int],
        tie_break: TieBreak,
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.positions = positions
        self.tie_break = tie_break
        self.latency_ms: dict[str, float] = {}
        self.retried_queries = 0
        self.retries = 0
        self.failures: dict[str, int] = {}
        self.failed_query_ids: list[str] = []
        self.unknown_ids = 0
        self.queries_with_unknown_ids = 0
        self.unknown_id_examples: list[dict[str, str]] = []
        self.duplicate_ids = 0
        self.reordered_queries = 0

    def search(
        self, queries: Sequence[EvalQuery], k: int, allowed: Sequence[np.ndarray | None]
    ) -> list[Ranked]:
        """One ranking per query, `concurrency` requests in flight; `allowed` is ignored."""
        answers: list[_Answer | None] = [None] * len(queries)
        connections = Connections(self.cfg.url, self.cfg.timeout_s)
        pool = ThreadPoolExecutor(self.cfg.concurrency, thread_name_prefix=f"service-{self.name}")
        try:
            with progress(f"service arm {self.name}", total=len(queries), unit="query") as bar:
                futures: dict[Future[_Answer], int] = {
                    pool.submit(self._ask, connections, query, k): i
                    for i, query in enumerate(queries)
                }
                for future in as_completed(futures):
                    i = futures[future]
                    answer = future.result()
                    if answer.failure is not None and self.cfg.on_error == "fail":
                        raise ServiceError(
                            self.cfg.url, queries[i].query_id, str(answer.failure), self.name
                        )
                    answers[i] = answer
                    bar.update(1)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            connections.close()
        done = [answer for answer in answers if answer is not None]
        for query, answer in zip(queries, done, strict=True):
            self._count(query.query_id, answer)
        self._check_usable(done)
        if self.failed_query_ids:
            log.warning(
                "service %s: %d queries failed and were skipped (%s); their rankings are empty",
                self.cfg.url,
                len(self.failed_query_ids),
                ", ".join(f"{kind} {n}" for kind, n in sorted(self.failures.items())),
            )
        if self.unknown_ids:
            log.warning(
                "service %s returned %d ids that are not in the corpus (in %d queries), "
                "e.g. %s; they cannot be ranked",
                self.cfg.url,
                self.unknown_ids,
                self.queries_with_unknown_ids,
                ", ".join(e["id"] for e in self.unknown_id_examples[:3]),  # distinct
            )
        return [answer.ranked for answer in done]

    def _check_usable(self, done: Sequence[_Answer]) -> None:
        """NothingUsable when no query got a passage of the corpus because every id the
        service returned is unknown to it, or every query failed (on_error=skip): each ranking
        would be empty and score 0, which measures a mismatch, not the service."""
        if not done or any(answer.ranked.returned for answer in done):
            return
        where = f"arm {self.name!r}: service {self.cfg.url}"
        unknown = [pid for answer in done for pid in answer.unknown]
        if unknown:
            examples = ", ".join(repr(pid) for pid in list(dict.fromkeys(unknown))[:3])
            raise NothingUsable(
                f"{where} returned {len(unknown)} ids for {len(done)} queries, none of them a "
                f"passage of the corpus (e.g. {examples}): does it search another collection, "
                f"or return another id field (arms.{self.name}.id_field)?"
            )
        if all(answer.failure is not None for answer in done):
            kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(self.failures.items()))
            raise NothingUsable(
                f"{where}: every one of its {len(done)} queries failed ({kinds}); nothing to "
                "score"
            )

    def _count(self, query_id: str, answer: _Answer) -> None:
        # Latest answer wins when a job asks the same query twice (a router's baselines).
        self.latency_ms[query_id] = answer.latency_ms
        if answer.attempts > 1:
            self.retried_queries += 1
            self.retries += answer.attempts - 1
        if answer.failure is not None:
            self.failures[answer.failure.kind] = self.failures.get(answer.failure.kind, 0) + 1
            self.failed_query_ids.append(query_id)
        if answer.unknown:
            self.unknown_ids += len(answer.unknown)
            self.queries_with_unknown_ids += 1
            shown = {example["id"] for example in self.unknown_id_examples}
            for pid in answer.unknown:  # distinct ids, each with the first query that gave it
                if len(self.unknown_id_examples) < UNKNOWN_ID_EXAMPLES and pid not in shown:
                    shown.add(pid)
                    self.unknown_id_examples.append({"query_id": query_id, "id": pid})
        self.duplicate_ids += answer.duplicates
        self.reordered_queries += answer.reordered

    def _ask(self, connections: Connections, query: EvalQuery, k: int) -> _Answer:
        """One query: its attempts, then its answer ranked; a last failure is returned (the
        caller decides whether it fails the job)."""
        body = json.dumps(
            {
                "query": query.query,
                "query_id": query.query_id,
                "top_k": k,
                "user_role": query.user_role,
            },
            ensure_ascii=False,
        ).encode()
        start = time.perf_counter()
        answer, failed, attempts = with_retries(
            lambda: self._rank(self._post(connections, body), k),
            self.cfg.retries,
            self.cfg.retry_backoff_s,
            connections.closed,
        )
        if answer is None:
            empty = Ranked(
                np.empty(0, np.int64), np.empty(0), requested=k, empty_reason=SERVICE_ERROR
            )
            answer = _Answer(empty, 0.0, attempts, failure=failed)
        answer.latency_ms = (time.perf_counter() - start) * 1000
        answer.attempts = attempts
        return answer

    def _post(self, connections: Connections, body: bytes) -> list[Any]:
        """One attempt: the answer's list of results, or `AttemptFailed`."""
        payload = post_json(connections, body, f"arms.{self.name}.timeout_s={self.cfg.timeout_s}")
        results = _dig(
            payload, self.cfg.results_path, f"arms.{self.name}.results_path", "malformed_response"
        )
        if not isinstance(results, list):
            raise AttemptFailed(
                "malformed_response",
                f"arms.{self.name}.results_path={self.cfg.results_path!r} holds "
                f"{type(results).__name__}, not a list of results",
            )
        return results

    def _rank(self, results: list[Any], k: int) -> _Answer:
        """The answer's results as a ranking of corpus positions (see the module docs)."""
        indices: list[int] = []
        scores: list[float] = []
        unknown: list[str] = []
        seen: set[str] = set()
        duplicates = 0
        for rank, item in enumerate(results, start=1):
            pid = _result_field(
                item, rank, self.cfg.id_field, f"arms.{self.name}.id_field", "missing_id"
            )
            if isinstance(pid, int) and not isinstance(pid, bool):
                pid = str(pid)
            if not isinstance(pid, str):
                raise AttemptFailed(
                    "malformed_response",
                    f"result {rank}: id {pid!r} (arms.{self.name}.id_field={self.cfg.id_field!r}) "
                    "is not a string",
                )
            if self.cfg.score_field:
                key = f"arms.{self.name}.score_field"
                score = _result_field(item, rank, self.cfg.score_field, key, "missing_score")
                if (
                    isinstance(score, bool)
                    or not isinstance(score, (int, float))
                    or not math.isfinite(score)
                ):
                    raise AttemptFailed(
                        "malformed_response",
                        f"result {rank}: score {score!r} (arms.{self.name}.score_field="
                        f"{self.cfg.score_field!r}) is not a finite number",
                    )
            else:
                score = 1.0 / rank
            if pid in seen:
                duplicates += 1
                continue
            seen.add(pid)
            position = self.positions.get(pid)
            if position is None:
                unknown.append(pid)
                continue
            indices.append(position)
            scores.append(float(score))
        given = np.asarray(indices, dtype=np.int64)
        top, top_scores = self.tie_break.top(given, np.asarray(scores, dtype=np.float64), k)
        reordered = not np.array_equal(top, given[: len(top)])
        reason = None if len(top) else (UNKNOWN_IDS if unknown else NO_CANDIDATES)
        ranked = Ranked(top, top_scores, requested=k, empty_reason=reason)
        return _Answer(ranked, 0.0, 0, unknown, duplicates, reordered)

    def info(self) -> dict[str, Any]:
        """The manifest's record of this arm: where it asked, how fast it answered (every
        query's latency, and p50/p95/max), and what it could not use."""
        latencies = np.fromiter(self.latency_ms.values(), dtype=np.float64)
        summary = (
            {
                "p50": round(float(np.percentile(latencies, 50)), 3),
                "p95": round(float(np.percentile(latencies, 95)), 3),
                "max": round(float(latencies.max()), 3),
                "mean": round(float(latencies.mean()), 3),
            }
            if len(latencies)
            else {}
        )
        return {
            "kind": "service",
            "url": self.cfg.url,
            "queries": len(self.latency_ms),
            "concurrency": self.cfg.concurrency,
            "filters_applied": False,
            "latency_ms": summary,
            "latency_ms_by_query": {q: round(ms, 3) for q, ms in self.latency_ms.items()},
            "retried_queries": self.retried_queries,
            "retries": self.retries,
            # What the service sent that could not be used, counted (the convention of every
            # arm that reads outside input), with the details below.
            "bad_input": {
                "failed_queries": len(self.failed_query_ids),
                "unknown_ids": self.unknown_ids,
                "duplicate_ids": self.duplicate_ids,
            },
            "failures": dict(sorted(self.failures.items())),
            "failed_query_ids": list(self.failed_query_ids),
            "queries_with_unknown_ids": self.queries_with_unknown_ids,
            "unknown_id_examples": list(self.unknown_id_examples),
            "reordered_queries": self.reordered_queries,
        }


@dataclass
class ServiceArmSpec(ServiceConfig):
    """`arms.<name>: {_target_: retrieval_bench.retrievers.service.ServiceArmSpec, url: ...}`:
    its keyword arguments are `config.service.ServiceConfig`'s fields, so two services can be
    compared in one job (`arms.prod: {_target_: ..., url: ...}`)."""

    def __post_init__(self) -> None:
        self.validate()  # a bad value fails when the config is read

    def check(self, name: str, ctx: BuildContext) -> None:
        """Before any arm builds (a BM25 arm beside it need not tokenise for a job that cannot
        run): the URL this arm would call."""
        self.require_url(f"arms.{name}")

    def build(self, name: str, ctx: BuildContext) -> ServiceArm:
        return ServiceArm(name, self, ctx.positions, ctx.tie_break)
