"""The answer side (`python -m run.answers`): citations resolved against the context a travel
job recorded, the answer metrics per type with the retrieval metrics' exclusions, what is
refused and what is counted in an answers file, and answer metrics in the monthly gate."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, run_in_process

from retrieval_bench.answers import write_answers
from retrieval_bench.answers.score import CITATIONS_UNKNOWN, load_job_answers
from retrieval_bench.benchmark.gate import OK, REGRESSION, run_gate
from retrieval_bench.benchmark.history import JobKey
from retrieval_bench.config.benchmark import BenchmarkConfig, GateConfig
from retrieval_bench.errors import ConfigError, DataError
from retrieval_bench.jobdir.read import FinishedJob
from retrieval_bench.scoring.measure_names import canonical_benchmark_metrics
from retrieval_bench.stats.settings import SignificanceSettings
from run.answers import main

EXAMPLE = ROOT / "evalsets" / "travel.answers.jsonl"


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished bm25 job on travel (top_k 6): the context the example answers were given."""
    tmp = tmp_path_factory.mktemp("answers")
    _, out = run_in_process(["retriever=bm25", f"cache_dir={tmp / 'cache'}"], tmp)
    return out


def contexts(job: Path) -> dict[str, list[str]]:
    rows = [json.loads(line) for line in (job / "rankings.jsonl").read_text().splitlines()]
    return {r["query_id"]: r["stages"]["final"]["ids"] for r in rows}


def evalset() -> dict[str, dict[str, Any]]:
    lines = (ROOT / "evalsets" / "travel.jsonl").read_text(encoding="utf-8").splitlines()
    return {q["query_id"]: q for q in map(json.loads, lines)}


def write_lines(path: Path, records: list[dict[str, Any] | str]) -> Path:
    text = [r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records]
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    return path


def test_the_shipped_travel_example_gives_the_per_type_table_and_the_diagnosis(job: Path) -> None:
    record = load_job_answers(job, EXAMPLE)
    assert record["context"]["stage"] == "final"  # the job recorded no context stage
    assert record["answers"]["answered"] == 166
    sources = record["families"]["sources"]
    # Source coverage recomputed here from the files: relevant ids cited in the answer (an id
    # given, or written in brackets, or a document file name covering its passages shown).
    labels, shown = evalset(), contexts(job)
    passages = [
        json.loads(line)
        for line in (ROOT / "corpus" / "travel" / "passages.jsonl").read_text().splitlines()
    ]
    doc_of = {p["id"]: p["doc_id"] for p in passages}
    docs: dict[str, set[str]] = {}
    for pid, doc in doc_of.items():
        docs.setdefault(doc, set()).add(pid)

    def via_document(pid: str, qid: str) -> bool:
        """A document cites its passages in the context, or all of them when none is."""
        return pid in shown[qid] or not docs[doc_of[pid]] & set(shown[qid])

    for line in EXAMPLE.read_text(encoding="utf-8").splitlines():
        answer = json.loads(line)
        qid = answer["query_id"]
        if qid not in sources["per_query"]:
            continue
        text = answer["answer"]
        gold = set(labels[qid]["relevant_ids"])
        given = set(answer.get("citations", ()))
        cited = {
            pid
            for pid in gold
            if pid in given
            or (
                "citations" not in answer
                and (f"[{pid}]" in text or (f"{doc_of[pid]}.md" in text and via_document(pid, qid)))
            )
        }
        assert sources["per_query"][qid]["source_coverage"] == len(cited) / len(gold), qid
    # Every labelled-relevant passage of a scored query falls in exactly one diagnosis cell.
    relevant = sum(len(labels[q]["relevant_ids"]) for q in sources["per_query"])
    every = record["diagnosis"]["all"]
    assert every["retrieved_cited"] + every["retrieved_not_cited"] + every["not_retrieved"] == (
        relevant
    )
    assert [every[k] for k in ("queries", "retrieved_cited", "retrieved_not_cited")] == [
        147,
        138,
        29,
    ]
    assert [every[k] for k in ("cited_not_relevant", "not_retrieved")] == [97, 135]
    # The same exclusions as retrieval: no_answer and unreviewed queries are not in coverage.
    assert sources["counts"]["excluded"] == {"no_answer": 13, "unreviewed": 6}
    assert sources["by_type"]["no_answer"]["source_coverage"] is None
    assert "no_answer=13" in sources["by_type"]["no_answer"]["undefined"]
    written = write_answers(job, record)
    markdown = written[1].read_text(encoding="utf-8")
    assert "| type | answered | refused | n scored | source_coverage | pooled |" in markdown
    assert "| all | 147 | 138 | 29 | 97 | 135 |" in markdown
    assert json.loads(written[0].read_text())["per_query"]["t001"]["query_type"] == "entity_exact"


def test_citations_resolve_against_the_context_the_answer_was_given(
    job: Path, tmp_path: Path
) -> None:
    shown = contexts(job)
    labels = evalset()
    gold = labels["t001"]["relevant_ids"][0]
    assert gold in shown["t001"]
    other = next(pid for pid in shown["t001"] if pid not in labels["t001"]["relevant_ids"])
    outside = next(pid for pid in shown["t002"] if pid not in shown["t001"])
    no_answer = [q for q, v in labels.items() if v["label_status"] == "no_answer"]
    unreviewed = next(q for q, v in labels.items() if v["label_status"] == "unreviewed")
    path = write_lines(
        tmp_path / "answers.jsonl",
        [
            {
                "query_id": "t001",
                "answer": "...",
                "citations": [gold, other, outside, "nowhere.pdf"],
                "scores": {"faithfulness": 0.9},
            },
            # pattern: nothing in brackets matches a passage, one bracket holds two citations
            {"query_id": "t002", "answer": f"... [{shown['t002'][0]}, {outside}]"},
            {"query_id": no_answer[0], "answer": "", "refused": True},
            {"query_id": no_answer[1], "answer": "...", "scores": {"faithfulness": float("nan")}},
            {"query_id": unreviewed, "answer": f"[{shown[unreviewed][0]}]"},
            {"query_id": "t003", "answer": "...", "scores": {"faithfulness": 1.7}},
            {"query_id": "nope", "answer": "..."},
        ],
    )
    record = load_job_answers(job, path)
    rows = record["per_query"]
    t001 = record["queries"]["t001"]
    assert (t001["valid_citations"], t001["unmapped"]) == (2, ["nowhere.pdf"])
    assert rows["t001"]["citation_validity"] == 0.5
    assert rows["t001"]["source_coverage"] == 1.0
    assert rows["t001"]["citation_precision"] == 1 / 3  # gold of gold, other, outside
    assert rows["t002"]["citation_validity"] == 1.0  # both shown for t002
    # A refused answer on a no_answer query is right, an answer to one is wrong.
    assert (rows[no_answer[0]]["refusal_correct"], rows[no_answer[1]]["refusal_correct"]) == (
        1.0,
        0.0,
    )
    # Labels play no part in citation validity: the unreviewed query's citation counts.
    assert rows[unreviewed] == {"query_type": labels[unreviewed]["query_type"], **rows[unreviewed]}
    assert rows[unreviewed]["citation_validity"] == 1.0
    assert "source_coverage" not in rows[unreviewed]
    # Judge scores: only the one in range is scored; the others are counted with their line.
    assert record["families"]["judge_faithfulness"]["overall"]["n"] == 1
    problems = record["answers"]["problems"]
    assert problems["unknown_queries"] == {"count": 1, "examples": ["line 7: nope"]}
    assert problems["judge_out_of_range"]["faithfulness"]["examples"] == ["line 6: t003 = 1.7"]
    assert problems["judge_nan"]["faithfulness"]["count"] == 1
    # Queries without an answer are excluded as such, never scored 0.
    counts = record["families"]["sources"]["counts"]
    assert counts["scored"] == 3 and counts["excluded"]["not_in_answers"] == 144


def test_a_citation_pattern_that_matches_nothing_leaves_citation_metrics_undefined(
    job: Path, tmp_path: Path
) -> None:
    path = write_lines(
        tmp_path / "answers.jsonl",
        [{"query_id": "t001", "answer": "see (sanya-wuzhizhoudao-tickets)"}],
    )
    record = load_job_answers(job, path)
    sources = record["families"]["sources"]
    assert sources["overall"]["source_coverage"] is None
    assert sources["excluded_queries"]["t001"] == CITATIONS_UNKNOWN
    assert (
        "matched in none of the 1 answers"
        in record["answers"]["problems"]["pattern_matched_nothing"]
    )
    assert record["per_query"]["t001"] == {"query_type": "entity_exact", "refusal_correct": 1.0}
    # The same answer with a pattern that fits the generator's style:
    from retrieval_bench.answers.read import AnswerOptions

    fitted = load_job_answers(job, path, AnswerOptions(citation_pattern=r"\(([^()]+)\)"))
    assert fitted["per_query"]["t001"]["source_coverage"] == 1.0


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"query_id": "t002", "answer": "x", "citation": ["a"]}, "unknown field 'citation'"),
        ({"query_id": "t001", "answer": "again"}, "query 't001' answered twice (first on line 1)"),
        (
            {"query_id": "t002", "answer": "x", "scores": {"faithfulness": "high"}},
            "must be a number",
        ),
        ({"query_id": "t002", "answer": "x", "refused": "yes"}, "'refused' must be true or false"),
        ('{"query_id": "t002", "answer": ', "malformed JSON"),
    ],
)
def test_an_unusable_answers_file_is_refused_with_its_line(
    job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], line: Any, message: str
) -> None:
    path = write_lines(tmp_path / "answers.jsonl", [{"query_id": "t001", "answer": "x"}, line])
    assert main([str(job), str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:2: " in err and message in err
    with pytest.raises(DataError):
        load_job_answers(job, path)


def test_answers_for_no_query_of_the_job_are_refused(job: Path, tmp_path: Path) -> None:
    path = write_lines(tmp_path / "answers.jsonl", [{"query_id": "p001", "answer": "x"}])
    with pytest.raises(DataError, match=r"answers.jsonl:1: none of its 1 answers is for a query"):
        load_job_answers(job, path)


def test_the_readmes_gate_tolerance_override_needs_its_plus() -> None:
    # README: a metric the shipped tolerances do not name is added with a leading `+`.
    from conftest import compose_config
    from hydra.errors import ConfigCompositionException

    added = "benchmark.gate.tolerances.source_coverage=0.05"
    cfg = compose_config(["experiment=monthly", f"+{added}"])
    assert cfg.benchmark.gate.tolerances["source_coverage"] == 0.05
    with pytest.raises(ConfigCompositionException, match=re.escape(f"use +{added}")):
        compose_config(["experiment=monthly", added])


def test_answer_metric_names_in_config_and_a_typo_refused() -> None:
    bench = BenchmarkConfig(
        enabled=True, gate=GateConfig(tolerances={"source_coverage": 0.05, "nDCG@K": 0.02})
    )
    canonical_benchmark_metrics(bench)
    assert bench.gate.tolerances == {"source_coverage": 0.05, "ndcg@K": 0.02}
    typo = BenchmarkConfig(enabled=True, gate=GateConfig(tolerances={"source_coverag": 0.05}))
    with pytest.raises(ConfigError, match="did you mean 'source_coverage'"):
        canonical_benchmark_metrics(typo)


def test_the_gate_fails_a_month_whose_source_coverage_drops_on_one_type(
    job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Same retrieval both months; this month's generator stops citing on entity_exact."""
    labels = evalset()
    months = {}
    for month in ("2026-10", "2026-11"):
        folder = tmp_path / month / "travel" / "bm25"
        shutil.copytree(job, folder, ignore=shutil.ignore_patterns("answers.*"))
        answers = [json.loads(line) for line in EXAMPLE.read_text(encoding="utf-8").splitlines()]
        if month == "2026-11":
            for a in answers:
                if labels[a["query_id"]]["query_type"] == "entity_exact":
                    a["citations"] = []
        path = write_lines(tmp_path / f"{month}.answers.jsonl", answers)
        assert main([str(folder), str(path)]) == 0
        months[month] = FinishedJob.load(folder)
    capsys.readouterr()
    gate = GateConfig(tolerances={"recall@K": 0.02, "source_coverage": 0.05})
    key = JobKey("travel", "bm25")
    result = run_gate(
        {key: months["2026-11"]},
        {key: months["2026-10"]},
        gate,
        SignificanceSettings(alpha=0.05, n_resamples=2000),
    )
    failed = [(c.metric, c.query_type, c.before, c.after) for c in result.failures]
    entity = months["2026-10"].answers["summary"]["source_coverage"]["by_type"]["entity_exact"]
    assert failed[0] == ("source_coverage", "entity_exact", entity["source_coverage"], 0.0)
    assert [f[:2] for f in failed] == [
        ("source_coverage", "entity_exact"),
        ("source_coverage", "all"),
    ]
    assert all(c.status == OK for c in result.checks if c.metric == "recall@K")
    assert {c.status for c in result.failures} == {REGRESSION}
    assert not result.passed
    assert not math.isnan(result.failures[0].p_holm)


def test_the_monthly_job_scores_an_answers_file_found_beside_a_job(
    job: Path, tmp_path: Path
) -> None:
    from retrieval_bench.answers import score_found_answers

    folder = tmp_path / "travel" / "bm25"
    shutil.copytree(job, folder, ignore=shutil.ignore_patterns("answers.*"))
    assert score_found_answers([folder]) == []  # no answers.jsonl: nothing to do
    found = write_lines(
        folder / "answers.jsonl", [{"query_id": "t001", "answer": "(sanya-wuzhizhoudao-tickets)"}]
    )
    assert main([str(folder), str(found), "--citation-pattern", r"\(([^()]+)\)"]) == 0
    # Scored by hand with its own pattern: current, so kept as it is.
    assert score_found_answers([folder]) == []
    write_lines(found, [{"query_id": "t002", "answer": "(baoting-yanoda-getting_there)"}])
    assert score_found_answers([folder]) == [f"{folder}: scored answers.jsonl into answers.json"]
    record = json.loads((folder / "answers.json").read_text(encoding="utf-8"))
    assert record["citation_pattern"] == r"\(([^()]+)\)"  # the recorded options, reused
    assert record["per_query"]["t002"]["source_coverage"] == 1.0
    assert list(record["queries"]) == ["t002"]


def test_a_relabelled_baseline_has_its_answers_rescored_too(job: Path, tmp_path: Path) -> None:
    from retrieval_bench.labels.rescore import relabel_baseline

    baseline_dir = tmp_path / "2026-10" / "travel" / "bm25"
    shutil.copytree(job, baseline_dir, ignore=shutil.ignore_patterns("answers.*"))
    answers = write_lines(
        tmp_path / "answers.jsonl",
        [{"query_id": "t001", "answer": "...", "citations": ["sanya-wuzhizhoudao-tickets"]}],
    )
    assert main([str(baseline_dir), str(answers)]) == 0
    # New labels: t001's relevant passage is now another one of the same place.
    snapshot = tmp_path / "travel-new.jsonl"
    lines = []
    for q in evalset().values():
        if q["query_id"] == "t001":
            q["relevant_ids"] = ["sanya-wuzhizhoudao-overview"]
        lines.append(q)
    write_lines(snapshot, lines)
    _, current_dir = run_in_process(
        ["retriever=bm25", f"dataset.evalset={snapshot}", f"cache_dir={tmp_path / 'cache'}"],
        tmp_path / "2026-11",
    )
    key = JobKey("travel", "bm25")
    before = FinishedJob.load(baseline_dir)
    assert before.per_query("final", "source_coverage")["t001"] == 1.0
    relabelled, notes = relabel_baseline({key: FinishedJob.load(current_dir)}, {key: before})
    assert notes[-1] == f"{key}: baseline answers re-scored against current labels"
    assert relabelled[key].per_query("final", "source_coverage")["t001"] == 0.0


def test_a_recorded_context_stage_is_the_context_citations_are_checked_against(
    job: Path, tmp_path: Path
) -> None:
    """A job with a `context` stage (what fit the generator's budget): a passage of `final`
    left out of the context is cited from outside it."""
    folder = tmp_path / "job"
    shutil.copytree(job, folder, ignore=shutil.ignore_patterns("answers.*"))
    rows = [json.loads(line) for line in (folder / "rankings.jsonl").read_text().splitlines()]
    for row in rows:
        final = row["stages"]["final"]
        row["stages"]["context"] = {**final, "ids": final["ids"][:2], "scores": final["scores"][:2]}
    write_lines(folder / "rankings.jsonl", rows)
    final = contexts(job)["t001"]
    path = write_lines(
        tmp_path / "answers.jsonl",
        [{"query_id": "t001", "answer": "...", "citations": [final[0], final[3]]}],
    )
    record = load_job_answers(folder, path)
    assert record["context"] == {"stage": "context", "note": ""}
    assert record["per_query"]["t001"]["citation_validity"] == 0.5
    on_final = load_job_answers(job, path)
    assert on_final["per_query"]["t001"]["citation_validity"] == 1.0


@pytest.mark.slow
def test_the_monthly_command_gates_answers_dropped_beside_its_jobs(tmp_path: Path) -> None:
    """The documented workflow: a month runs, the generator's answers.jsonl goes into each job
    folder, the same command again scores them, compares and gates; a month whose generator
    stops citing on entity_exact fails on source_coverage there."""
    from conftest import run_app

    root = tmp_path / "benchmarks"
    labels = evalset()

    def month(name: str) -> Any:
        return run_app(
            [
                "experiment=monthly",
                f"benchmark.month={name}",
                f"benchmark.root={root}",
                "benchmark.retrievers=[bm25]",
                "+benchmark.gate.tolerances.source_coverage=0.05",
                "compare.n_resamples=2000",
                f"cache_dir={tmp_path / 'cache'}",
            ]
        )

    for name in ("2026-09", "2026-10"):
        first = month(name)
        assert first.returncode == 0, first.stderr
        answers = [json.loads(line) for line in EXAMPLE.read_text(encoding="utf-8").splitlines()]
        if name == "2026-10":
            for a in answers:
                if labels[a["query_id"]]["query_type"] == "entity_exact":
                    a["citations"] = []
        job_dir = root / name / "travel" / "bm25"
        write_lines(job_dir / "answers.jsonl", answers)
        again = month(name)
        assert f"{job_dir}: scored answers.jsonl into answers.json" in again.stdout
    assert again.returncode == 1, again.stdout + again.stderr
    failed = [x for x in again.stderr.splitlines() if x.startswith("REGRESSION")]
    assert [x.split(":")[1].split(" (drop")[0] for x in failed] == [
        " travel retriever=bm25 type=entity_exact source_coverage",
        " travel retriever=bm25 type=all source_coverage",
    ]
    gate = json.loads((root / "2026-10" / "gate.json").read_text())
    assert gate["status"] == "failed"


def _doc_of() -> dict[str, str]:
    lines = (ROOT / "corpus" / "travel" / "passages.jsonl").read_text(encoding="utf-8")
    return {p["id"]: p["doc_id"] for p in map(json.loads, lines.splitlines())}


def test_a_document_citation_is_one_valid_citation_whatever_it_shows(
    job: Path, tmp_path: Path
) -> None:
    # A document two of whose passages are in the context: cited once, it is one citation,
    # valid once, and cites both passages.
    doc_of, labels = _doc_of(), evalset()
    qid, doc, shown = next(
        (q, d, [p for p in ids if doc_of[p] == d])
        for q, ids in contexts(job).items()
        if labels[q]["label_status"] == "reviewed" and labels[q]["relevant_ids"]
        for d in {doc_of[p] for p in ids}
        if sum(doc_of[p] == d for p in ids) >= 2
    )
    path = write_lines(tmp_path / "answers.jsonl", [{"query_id": qid, "answer": f"[{doc}.md]"}])
    record = load_job_answers(job, path)
    query = record["queries"][qid]
    assert (query["valid_citations"], sorted(query["cited"])) == (1, sorted(shown))
    assert record["per_query"][qid]["citation_validity"] == 1.0
    citations = record["families"]["citations"]["overall"]
    assert citations["citation_validity_pooled"] == 1.0


def test_pooled_source_coverage_divides_by_the_relevant_passages(job: Path, tmp_path: Path) -> None:
    # t001 cites its first relevant passage and two that are not relevant; t002 cites nothing.
    labels, shown = evalset(), contexts(job)
    gold = labels["t001"]["relevant_ids"]
    others = [p for p in shown["t001"] if p not in gold][:2]
    path = write_lines(
        tmp_path / "answers.jsonl",
        [
            {"query_id": "t001", "answer": "...", "citations": [gold[0], *others]},
            {"query_id": "t002", "answer": "...", "citations": []},
        ],
    )
    sources = load_job_answers(job, path)["families"]["sources"]["overall"]
    relevant = len(gold) + len(labels["t002"]["relevant_ids"])
    assert sources["source_coverage_pooled"] == pytest.approx(1 / relevant, rel=1e-12)


def test_one_rule_for_unknown_citations_given_lists_scored_pattern_lines_excluded(
    job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Every answer empty: two lines give `citations: []` (known: they cite nothing), two have
    # no list and the pattern finds nothing in any answer (their citations are unknown).
    path = write_lines(
        tmp_path / "answers.jsonl",
        [
            {"query_id": "t001", "answer": "", "citations": []},
            {"query_id": "t002", "answer": "", "citations": []},
            {"query_id": "t003", "answer": ""},
            {"query_id": "t004", "answer": ""},
        ],
    )
    record = load_job_answers(job, path)
    sources = record["families"]["sources"]
    assert sorted(sources["per_query"]) == ["t001", "t002"]  # scored: they cite nothing
    assert [sources["per_query"][q]["source_coverage"] for q in ("t001", "t002")] == [0.0, 0.0]
    for qid in ("t003", "t004"):  # never 0: excluded as unknown, in every citation metric
        assert sources["excluded_queries"][qid] == CITATIONS_UNKNOWN
        assert record["families"]["citations"]["excluded_queries"][qid] == CITATIONS_UNKNOWN
        assert "source_coverage" not in record["per_query"][qid]
    assert record["citations_known"] == {"known": 2, "unknown": 2}
    assert main([str(job), str(path)]) == 0
    out = capsys.readouterr().out
    assert (
        "warning: the citation pattern matched in none of the 2 answers without a `citations` "
        "list: their citations are unknown, so they are excluded from every citation metric "
        "(citations_unknown), not scored 0"
    ) in out


def test_missing_answers_are_excluded_with_a_warning_giving_their_count(
    job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_lines(tmp_path / "answers.jsonl", [{"query_id": "t001", "answer": "[x]"}])
    assert main([str(job), str(path)]) == 0
    out = capsys.readouterr().out
    n = len(evalset()) - 1
    assert (
        f"warning: {n} queries of the job have no answer in the file: excluded (not_in_answers), "
        "never scored 0; e.g. t002, t003, t004, t005, t006"
    ) in out


def test_an_integer_query_id_is_refused_with_its_line(job: Path, tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "answers.jsonl",
        [{"query_id": "t001", "answer": "x"}, {"query_id": 1, "answer": "x"}],
    )
    with pytest.raises(DataError, match=r"answers.jsonl:2: field 'query_id' must be a non-empty "
                       r"string, got 1"):
        load_job_answers(job, path)


def test_refusals_cite_nothing_and_the_tables_say_so(
    job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Every answer refused: the answered column counts none, refused counts them all, and the
    # diagnosis split has its rows (a refusal cites nothing: every relevant passage is lost).
    path = write_lines(
        tmp_path / "answers.jsonl",
        [{"query_id": q, "answer": "", "refused": True} for q in ("t001", "t002", "t003")],
    )
    assert main([str(job), str(path)]) == 0
    out = capsys.readouterr().out
    table = out[out.index("type ") :]
    all_row = next(line for line in table.splitlines() if line.startswith("all "))
    assert all_row.split()[1:4] == ["0", "3", "3"]  # answered, refused, n scored
    diagnosis = out[out.index("retrieved and cited") :].splitlines()
    assert any(line.startswith("all ") for line in diagnosis)
    record = load_job_answers(job, path)
    assert record["diagnosis"]["all"]["retrieved_cited"] == 0
    assert record["diagnosis"]["all"]["queries"] == 3


def test_with_no_query_scored_the_diagnosis_says_so_not_a_bare_header(
    job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    labels = evalset()
    unreviewed = [q for q, v in labels.items() if v["label_status"] == "unreviewed"][:2]
    path = write_lines(
        tmp_path / "answers.jsonl", [{"query_id": q, "answer": "[x]"} for q in unreviewed]
    )
    assert main([str(job), str(path)]) == 0
    out = capsys.readouterr().out
    assert "Where relevant passages were lost: no query is scored for source coverage" in out
    assert "retrieved and cited" not in out
