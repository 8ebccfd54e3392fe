"""The shipped `travel` set, pinned: the README's per-type MRR@10 table (bm25 / dense / hybrid at
top_k=10, default USE encoder) reproduces, and BM25's figures exactly (one in-process job per
retriever, per module; dense and hybrid encode the corpus, so they are marked slow)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from conftest import ROOT, run_in_process

from retrieval_bench.job.result import JobResult

README = ROOT / "corpus" / "travel" / "README.md"
RETRIEVERS = ("bm25", "dense", "hybrid")
ROW = re.compile(r"^\| \**(\w+)\** \| (\d+) \| ([\d.]+) / ([\d.]+) / ([\d.]+) \|$")
# BM25's MRR@10 per type, to the last digit (rankings and ranks are exact).
BM25_MRR = {
    "constraint_dense": 0.7103858784893267,
    "entity_exact": 0.9696969696969697,
    "fuzzy_intent": 0.2318965517241379,
    "multi_hop": 0.8385416666666666,
    "negation": 0.25042989417989414,
    "all": 0.6270057229240902,
}


def readme_table() -> dict[str, tuple[int, dict[str, float]]]:
    """{type: (n, {retriever: MRR@10})} from the README's "What the shipped retrievers make of
    it" table."""
    rows = {}
    for line in README.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if match:
            qtype, n, *values = match.groups()
            rows[qtype] = (int(n), dict(zip(RETRIEVERS, map(float, values), strict=True)))
    return rows


class Jobs:
    """Each retriever's job, run once per module on first use."""

    def __init__(self, tmp: Path, cache: Path) -> None:
        self.tmp, self.cache, self.done = tmp, cache, {}

    def __getitem__(self, retriever: str) -> JobResult:
        if retriever not in self.done:
            overrides = [f"retriever={retriever}", "top_k=10", f"cache_dir={self.cache}"]
            self.done[retriever], _ = run_in_process(overrides, self.tmp / retriever)
        return self.done[retriever]


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory, shared_cache: Path) -> Jobs:
    return Jobs(tmp_path_factory.mktemp("travel"), shared_cache)


def test_the_readme_table_is_complete() -> None:
    table = readme_table()
    assert sorted(table) == sorted(BM25_MRR)
    assert {t: n for t, (n, _) in table.items()} == {
        "constraint_dense": 29,
        "entity_exact": 33,
        "fuzzy_intent": 29,
        "multi_hop": 32,
        "negation": 24,
        "all": 147,
    }


@pytest.mark.parametrize(
    "retriever",
    [
        "bm25",
        pytest.param("dense", marks=pytest.mark.slow),
        pytest.param("hybrid", marks=pytest.mark.slow),
    ],
)
def test_readme_mrr_table_reproduces(jobs: Jobs, retriever: str) -> None:
    final = jobs[retriever].metrics["stages"]["final"]
    groups = {**final["by_type"], "all": final["overall"]}
    for qtype, (n, values) in readme_table().items():
        assert groups[qtype]["n"] == n, qtype
        assert round(groups[qtype]["mrr@10"], 2) == values[retriever], (qtype, retriever)


def test_bm25_mrr_to_the_last_digit(jobs: Jobs) -> None:
    final = jobs["bm25"].metrics["stages"]["final"]
    groups = {**final["by_type"], "all": final["overall"]}
    assert {t: groups[t]["mrr@10"] for t in BM25_MRR} == pytest.approx(BM25_MRR, rel=1e-12)
    assert final["by_type"]["no_answer"]["mrr@10"] is None  # no_answer is never scored as 0
    assert final["counts"]["scored"] == 147
    assert final["counts"]["excluded"] == {"no_answer": 13, "unreviewed": 6}


def test_bm25_pools_and_cut_on_every_query(jobs: Jobs) -> None:
    records = jobs["bm25"].records
    assert len(records) == 166
    shapes = Counter(
        (r.stages["bm25"].pool_requested, r.stages["final"].pool_requested) for r in records
    )
    assert shapes == {(10, 10): 166}
    for record in records:
        assert record.stages["final"].ids == record.stages["bm25"].ids[:10]
