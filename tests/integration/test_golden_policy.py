"""The shipped `policy` set, pinned: the per-role allowed sets of the permission filter (the
README's ACL table and per-role counts), the README's query counts, and BM25's figures with the
permission filter on and off (one in-process job each, per module)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, run_in_process

from retrieval_bench.config.filters import FilterConfig
from retrieval_bench.data.loader import load_dataset
from retrieval_bench.job.filters import PassageFilter
from retrieval_bench.job.result import JobResult
from retrieval_bench.records import Dataset
from retrieval_bench.scoring.families import ScoringContext
from retrieval_bench.scoring.permissions import may_read

# corpus/policy/README.md, "Roles and `meta.acl`": each restricted document and who reads it.
RESTRICTED = {
    "hr-salary-bands": {"hr", "executive"},
    "hr-performance": {"manager", "hr", "executive"},
    "fin-entertainment": {"manager", "finance", "executive"},
    "fin-approval-matrix": {"manager", "finance", "executive", "procurement"},
    "it-firewall": {"it_admin", "security"},
    "it-server-room": {"it_admin", "security"},
    "sec-incident-response": {"security", "it_admin", "executive"},
    "sec-pentest-2024q2": {"security"},
    "proc-supplier": {"procurement", "finance", "executive"},
    "proc-it-price-list": {"procurement", "it_admin"},
    "eng-code-review": {"engineer", "it_admin"},
    "eng-release": {"engineer", "it_admin", "manager"},
    "eng-dwg-2107": {"engineer"},
    "eng-dwg-3302-revb": {"engineer"},
    "eng-dwg-3302-revc": {"engineer"},
    "eng-lg500-test-matrix": {"engineer"},
}
# "Passages each role may read" in the same README.
READABLE_COUNTS = {
    "employee": 106,
    "hr": 113,
    "procurement": 119,
    "finance": 119,
    "manager": 121,
    "security": 122,
    "engineer": 126,
    "it_admin": 131,
    "executive": 131,
}


@pytest.fixture(scope="module")
def dataset() -> Dataset:
    return load_dataset(
        "native",
        "policy",
        ROOT / "corpus" / "policy",
        ROOT / "evalsets" / "policy.jsonl",
        Path(),
        "test",
    )


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, JobResult]:
    """BM25 on policy with the permission filter on and off."""
    tmp = tmp_path_factory.mktemp("policy")
    base = ["dataset=policy", "retriever=bm25", f"cache_dir={tmp / 'cache'}"]
    on, _ = run_in_process(base, tmp / "on")
    off, _ = run_in_process([*base, "filters.permissions=false"], tmp / "off")
    return {"on": on, "off": off}


def test_the_readme_query_counts(dataset: Dataset) -> None:
    by_type = Counter(q.query_type for q in dataset.queries)
    assert by_type == {
        "exact_number": 32,
        "procedure": 22,
        "multi_hop": 17,
        "permission": 14,
        "version": 8,
        "no_answer": 12,
    }
    status = Counter(q.label_status for q in dataset.queries)
    assert status == {"reviewed": 88, "unreviewed": 5, "no_answer": 12}
    roles = Counter(q.user_role for q in dataset.queries)
    assert roles == {
        "employee": 58,
        "engineer": 15,
        "manager": 9,
        "hr": 5,
        "procurement": 5,
        "finance": 4,
        "security": 3,
        "it_admin": 3,
        "executive": 3,
    }


@pytest.mark.parametrize("role", sorted(READABLE_COUNTS))
def test_each_role_is_allowed_exactly_the_public_passages_and_its_documents(
    dataset: Dataset, role: str
) -> None:
    passages = dataset.passages
    public = {p.id for p in passages if "acl" not in p.meta}
    assert len(public) == 106
    own = {p.id for p in passages if "acl" in p.meta and role in RESTRICTED[p.doc_id or ""]}
    expected = public | own
    decision = PassageFilter(passages, FilterConfig()).decide((), role, ())
    assert decision.applied == ("permissions",)
    assert decision.mask is not None
    allowed = {passages[i].id for i in np.flatnonzero(decision.mask)}
    assert allowed == expected
    assert len(allowed) == decision.allowed == READABLE_COUNTS[role]
    # Scoring (readable recall, leak) reads the same ACLs the same way.
    # Its lookup lists the passages with an ACL; a passage absent from it is public.
    acl = ScoringContext.from_dataset(dataset).passage_acl
    assert set(acl) == {p.id for p in passages if "acl" in p.meta}
    assert {p.id for p in passages if may_read(role, acl.get(p.id))} == expected


def test_every_acl_in_the_corpus_is_the_readmes(dataset: Dataset) -> None:
    acl = {p.doc_id: set(p.meta["acl"]) for p in dataset.passages if "acl" in p.meta}
    assert acl == RESTRICTED
    assert sum("acl" in p.meta for p in dataset.passages) == 60


def test_no_role_or_filter_off_allows_everything_and_an_unknown_role_only_public(
    dataset: Dataset,
) -> None:
    passage_filter = PassageFilter(dataset.passages, FilterConfig())
    assert passage_filter.decide((), None, ()).mask is None
    off = PassageFilter(dataset.passages, FilterConfig(permissions=False))
    assert off.decide((), "employee", ()).mask is None
    assert passage_filter.decide((), "intern", ()).allowed == 106


def test_bm25_figures_with_the_filter_on(jobs: dict[str, JobResult]) -> None:
    final = jobs["on"].metrics["stages"]["final"]
    overall = final["overall"]
    assert overall["n"] == 88 and overall["n_readable"] == 74 and overall["n_leak"] == 105
    assert overall["recall@6"] == pytest.approx(0.7632575757575758, rel=1e-12)
    assert overall["readable_recall@6"] == pytest.approx(0.9076576576576577, rel=1e-12)
    assert overall["hit@6"] == pytest.approx(70 / 88, rel=1e-12)
    assert overall["mrr@6"] == pytest.approx(0.6865530303030304, rel=1e-12)
    assert overall["ndcg@6"] == pytest.approx(0.6962700632692163, rel=1e-12)
    assert overall["leak@6"] == 0.0
    by_type = final["by_type"]
    assert by_type["permission"]["recall@6"] == 0.0  # a correct system finds none of them
    assert by_type["permission"]["readable_recall@6"] is None
    assert by_type["version"]["recall@6"] == 1.0
    assert by_type["exact_number"]["recall@6"] == pytest.approx(28 / 29, rel=1e-12)
    assert by_type["procedure"]["recall@6"] == pytest.approx(0.925, rel=1e-12)
    assert by_type["multi_hop"]["recall@6"] == pytest.approx(0.7450980392156863, rel=1e-12)


def test_bm25_figures_with_the_filter_off(jobs: dict[str, JobResult]) -> None:
    final = jobs["off"].metrics["stages"]["final"]
    overall = final["overall"]
    assert overall["recall@6"] == pytest.approx(0.9053030303030304, rel=1e-12)
    assert overall["readable_recall@6"] == pytest.approx(0.8873873873873874, rel=1e-12)
    assert overall["leak@6"] == pytest.approx(0.15079365079365076, rel=1e-12)
    assert final["by_type"]["permission"]["recall@6"] == 1.0  # every leak "found"
    assert final["by_type"]["permission"]["leak_any@6"] == 1.0
    assert final["by_type"]["permission"]["leak@6"] == pytest.approx(0.5357142857142858)


def test_the_filter_never_lowers_readable_recall_of_any_query(jobs: dict[str, JobResult]) -> None:
    on = jobs["on"].metrics["stages"]["final"]["families"]["readable"]["per_query"]
    off = jobs["off"].metrics["stages"]["final"]["families"]["readable"]["per_query"]
    assert on.keys() == off.keys() and len(on) == 74
    lower = [q for q in on if on[q]["readable_recall@6"] < off[q]["readable_recall@6"]]
    assert lower == []
    higher = [q for q in on if on[q]["readable_recall@6"] > off[q]["readable_recall@6"]]
    assert len(higher) == 2, "hiding unreadable passages lets readable ones rise"


def test_each_query_ranks_only_what_its_role_may_read(
    jobs: dict[str, JobResult], dataset: Dataset
) -> None:
    acl = {p.id: set(p.meta.get("acl") or ()) for p in dataset.passages}
    for record in jobs["on"].records:
        role = record.query.user_role
        for name, stage in record.stages.items():
            unreadable = [pid for pid in stage.ids if acl[pid] and role not in acl[pid]]
            assert unreadable == [], (record.query.query_id, name)
