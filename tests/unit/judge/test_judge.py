"""The model judge end to end against a stand-in model on 127.0.0.1
(tests/support/judge_server.py: a deterministic rule over the prompt's query and passage): a
pool is judged, imported as a label snapshot and re-scored; failures are retried then counted
as unjudged, never guessed; a rerun asks nothing twice; bad flags exit 2 naming the flag;
calibration's kappa equals scikit-learn's on the same pairs; the three estimates agree with the
published PPI formula applied by hand to the stored rankings re-scored against people's and the
judge's labels.

Jobs run in-process on the mini fixture (two bm25 jobs, `conftest.judge_sweep`), as
tests/unit/labels/test_pool.py runs them; evaluation sets are copies in tmp, so snapshots never
touch the repository.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import FIXTURE, run_mini
from conftest import MINI_CORPUS as CORPUS
from support.datasets import read_jsonl
from support.judge_server import chat_model, pair_of, rule_grade
from support.judging import TRAVEL, TRAVEL_CORPUS, expected_grade, with_people_zeros
from support.references import cohen_kappa_score

from retrieval_bench.data.evalset import load_evalset
from retrieval_bench.judge.prompt import shipped_prompt
from retrieval_bench.labels.rescore import rescore_job
from run.compare import main as compare_main
from run.judge import main as judge_main
from run.pool import main as pool_main
from run.rescore import main as rescore_main


def judge_args(url: str, cache: Path, *extra: str) -> list[str]:
    return [
        "--judge",
        "openai",
        "--url",
        url,
        "--model",
        "stand-in",
        "--cache-dir",
        str(cache),
        *extra,
    ]


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_pool_is_judged_imported_and_rescored(
    judge_sweep: tuple[Path, Path], tmp_path: Path
) -> None:
    folder, evalset = judge_sweep
    pool = read_jsonl(folder / "pool.jsonl")
    out = tmp_path / "judgments.jsonl"
    with chat_model() as (url, received):
        assert (
            judge_main([str(folder / "pool.jsonl"), *judge_args(url, tmp_path), "--out", str(out)])
            == 0
        )
    assert len(received) == len(pool)
    zh = shipped_prompt("zh")
    judged = read_jsonl(out)
    assert [(r["query_id"], r["id"]) for r in judged] == [(r["query_id"], r["id"]) for r in pool]
    for record in judged:
        own, binary = expected_grade(record)
        assert (record["judge_grade"], record["grade"]) == (own, binary)
        assert record["source"] == "judge" and record["model"] == "stand-in"
        assert record["prompt_sha256"] == zh.sha256  # Chinese text: the Chinese prompt
        assert record["raw_answer"] == f"##final score: {own}"
        assert record["cost"]["prompt_tokens"] > 0 and record["unjudged"] is None
    # Every prompt the model received is the shipped one, filled with the pair.
    assert {pair_of(body["messages"][0]["content"])[0] for body in received} == {
        r["query"] for r in pool
    }

    snapshot = tmp_path / "judged.jsonl"
    args = ["--import", str(out), "--evalset", str(evalset), "--corpus", str(CORPUS)]
    assert pool_main([*args, "--out", str(snapshot)]) == 0
    before = {q.query_id: q for q in load_evalset(evalset)}
    for query in load_evalset(snapshot):
        assert query.people_relevance == before[query.query_id].relevance
        mine = [r for r in judged if r["query_id"] == query.query_id]
        assert {pid: (g.grade, g.is_label) for pid, g in query.judge.items()} == {
            r["id"]: (r["grade"], True) for r in mine
        }
        assert all(query.relevance[r["id"]] == r["grade"] for r in mine)

    assert rescore_main([str(folder / "0"), "--evalset", str(snapshot)]) == 0
    rescored = json.loads((folder / "0" / "metrics.rescored.json").read_text(encoding="utf-8"))
    final = rescored["stages"]["final"]["per_query"]
    labelled = {q.query_id: q.relevance for q in load_evalset(snapshot)}
    # Every passage of every final list now carries a label: the pool held all the others.
    lengths = {}
    for line in (folder / "0" / "rankings.jsonl").open(encoding="utf-8"):
        row = json.loads(line)
        ids = row["stages"]["final"]["ids"]
        assert all(pid in labelled[row["query_id"]] for pid in ids)
        lengths[row["query_id"]] = len(ids)
    assert final and all(row["judged@6"] == lengths[q] / 6 for q, row in final.items())
    original = json.loads((folder / "0" / "metrics.json").read_text(encoding="utf-8"))
    assert any(
        row["judged@6"] < lengths[q] / 6
        for q, row in original["stages"]["final"]["per_query"].items()
    )


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_a_rerun_asks_nothing_twice(judge_sweep: tuple[Path, Path], tmp_path: Path) -> None:
    folder, _ = judge_sweep
    out = tmp_path / "j.jsonl"
    args = [str(folder / "pool.jsonl"), *judge_args("", tmp_path), "--out", str(out)]
    with chat_model() as (url, received):
        args[args.index("--url") + 1] = url
        assert judge_main(args) == 0
        first = read_jsonl(out)
        assert judge_main(args) == 0
        assert len(received) == len(first)  # the second run asked nothing
    second = read_jsonl(out)
    assert all(r["cached"] for r in second) and not any(r["cached"] for r in first)
    assert [r["grade"] for r in second] == [r["grade"] for r in first]


def test_failures_are_retried_then_unjudged_never_guessed(
    judge_sweep: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, evalset = judge_sweep
    pool = read_jsonl(folder / "pool.jsonl")
    queries = sorted({r["query"] for r in pool})
    behaviour = {
        queries[0]: ("prose", "This passage looks relevant to me."),
        queries[1]: ("status", 503),
        queries[2]: ("status", 400),
        queries[3]: ("hang", 8.0),  # well past the timeout below, whatever the load
    }
    out = tmp_path / "j.jsonl"
    extra = ["--out", str(out), "--retries", "1", "--retry-backoff-s", "0", "--timeout-s", "1.5"]
    with chat_model(lambda q, p: behaviour.get(q)) as (url, received):
        assert judge_main([str(folder / "pool.jsonl"), *judge_args(url, tmp_path), *extra]) == 0
        asked: dict[str, int] = {}
        for body in received:
            query = pair_of(body["messages"][0]["content"])[0]
            asked[query] = asked.get(query, 0) + 1
    judged = read_jsonl(out)
    kinds = {"prose": "not_a_grade", "status": None, "hang": "timeout"}
    for record in judged:
        action = behaviour.get(record["query"])
        n_pairs = sum(1 for r in pool if r["query"] == record["query"])
        if action is None:
            assert record["grade"] == expected_grade(record)[1] and record["unjudged"] is None
            assert asked[record["query"]] == n_pairs
            continue
        assert record["grade"] is None and record["judge_grade"] is None
        kind = kinds[action[0]] or f"http_{action[1]}"
        assert record["unjudged"].startswith(f"{kind}: ")
        # Retried once, except a 400: the endpoint would answer the same.
        attempts = 1 if action == ("status", 400) else 2
        if action[0] != "hang":  # a timed-out request may still reach the server late
            assert asked[record["query"]] == attempts * n_pairs
    printed = capsys.readouterr().out
    assert "unjudged (left unlabelled, never guessed)" in printed

    snapshot = tmp_path / "s.jsonl"
    args = ["--import", str(out), "--evalset", str(evalset), "--corpus", str(CORPUS)]
    assert pool_main([*args, "--out", str(snapshot)]) == 0
    assert "pairs the judge could not grade stay unlabelled" in capsys.readouterr().out
    unjudged = {(r["query_id"], r["id"]) for r in judged if r["grade"] is None}
    for query in load_evalset(snapshot):
        for qid, pid in unjudged:
            if qid == query.query_id:
                assert pid not in query.relevance and pid not in query.judge


def test_an_endpoint_that_is_down_judges_nothing_and_exits_2(
    judge_sweep: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, _ = judge_sweep
    with chat_model() as (url, _):
        pass  # the server is gone: nothing listens on its port now
    extra = ["--out", str(tmp_path / "j.jsonl"), "--concurrency", "2", "--retry-backoff-s", "0.3"]
    extra += ["--retries", "1"]  # one retry shows it: each further one only waits longer
    assert judge_main([str(folder / "pool.jsonl"), *judge_args(url, tmp_path), *extra]) == 2
    assert "graded none of the" in capsys.readouterr().err
    judged = read_jsonl(tmp_path / "j.jsonl")
    assert all(r["unjudged"].startswith("connection: ") for r in judged)
    # After the first 10 requests all failed to connect, the rest were not asked (but the
    # one or two already in flight).
    assert len(judged) > 10
    assert sum("not asked" in r["unjudged"] for r in judged) >= len(judged) - 10 - 2


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (["--judge", "openai", "--url", "not a url", "--model", "m"], "--url"),
        (["--judge", "openai", "--url", "ftp://host/v1", "--model", "m"], "--url"),
        (["--judge", "openai", "--url", "http://127.0.0.1:99999/v1", "--model", "m"], "--url"),
        (["--judge", "openai", "--model", "m"], "--url"),
        (
            ["--judge", "openai", "--url", "http://127.0.0.1:9/v1", "--model", "m",
             "--prompt-zh", "/no/such/prompt.txt"],
            "--prompt-zh",
        ),
        (["--judge", "gpt", "--model", "m"], "--judge"),
        (["--judge", "cross_encoder", "--model", "/no/model"], "--thresholds"),
        (["--judge", "cross_encoder", "--model", "/no/model", "--thresholds", "1"], "--model"),
        (["--judge", "cross_encoder", "--model", "/no", "--thresholds", "2,1", "--grades",
          "0,1,2"], "--thresholds"),
        (["--judge", "openai", "--url", "http://127.0.0.1:9/v1", "--model", "m", "--grades",
          "0,1,2"], "--grades"),
    ],
)  # fmt: skip
def test_bad_flags_exit_2_naming_the_flag(
    judge_sweep: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    flag: str,
) -> None:
    folder, _ = judge_sweep
    try:
        code = judge_main([str(folder / "pool.jsonl"), "--cache-dir", str(tmp_path), *extra])
    except SystemExit as exc:  # argparse's own refusals (an unknown --judge)
        code = int(exc.code or 0)
    assert code == 2
    assert flag in capsys.readouterr().err
    assert not (folder / "judgments.jsonl").exists()


def judge_grades(records: list[dict[str, Any]], scale_max: int) -> dict[tuple[str, str], int]:
    """The stand-in's grade of each calibration record's pair, on the scale (computed here)."""
    out = {}
    for r in records:
        own = rule_grade(r["query"], r["text"])
        out[(r["query_id"], r["id"])] = own if scale_max == 3 else int(own >= 2)
    return out


def test_calibration_kappa_equals_scikit_learn(tmp_path: Path) -> None:
    evalset = with_people_zeros(tmp_path)
    out = tmp_path / "cal"
    with chat_model() as (url, _):
        args = ["--calibrate", "--evalset", str(evalset), "--corpus", str(TRAVEL_CORPUS)]
        assert judge_main([*args, *judge_args(url, tmp_path), "--out", str(out)]) == 0
    record = json.loads((out / "calibration.json").read_text(encoding="utf-8"))
    judgments = read_jsonl(out / "calibration.jsonl")
    people = {
        (q.query_id, pid): (g, q.query_type)
        for q in load_evalset(evalset)
        if q.label_status != "unreviewed"
        for pid, g in q.relevance.items()
    }
    assert {(r["query_id"], r["id"]) for r in judgments} == set(people)
    judge = judge_grades(judgments, 1)
    assert {(r["query_id"], r["id"]): r["grade"] for r in judgments} == judge
    for name, reported in record["agreement"].items():
        pairs = [p for p in people if name == "all" or people[p][1] == name]
        a = [int(people[p][0] > 0) for p in pairs]
        b = [judge[p] for p in pairs]
        assert reported["n"] == len(pairs)
        if len(pairs) < 30:
            assert reported["kappa_binary"] is None
            assert reported["note"].startswith("not estimated: ")
            continue
        assert reported["kappa_binary"] == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
        # On a 0,1 scale the weighted kappa is the binary one.
        assert reported["kappa_weighted"] == pytest.approx(reported["kappa_binary"], abs=1e-12)
    matrix = np.array(record["agreement"]["all"]["confusion"]["counts"])
    assert matrix.shape == (2, 4) and matrix.sum() == len(people)
    # The cut that makes the judge's 0-3 grades binary, if it started at 1, 2 or 3.
    own = {(r["query_id"], r["id"]): r["judge_grade"] for r in judgments}
    for cut, value in record["kappa_by_cut"].items():
        a = [int(people[p][0] > 0) for p in people]
        b = [int(own[p] >= int(cut)) for p in people]
        assert value == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)


def test_graded_calibration_on_a_sample(tmp_path: Path) -> None:
    evalset = with_people_zeros(tmp_path, graded=True)
    out = tmp_path / "cal"
    with chat_model() as (url, received):
        args = ["--calibrate", "--evalset", str(evalset), "--corpus", str(TRAVEL_CORPUS)]
        extra = ["--out", str(out), "--grades", "0,1,2,3", "--sample", "120", "--seed", "3"]
        assert judge_main([*args, *judge_args(url, tmp_path), *extra]) == 0
    assert len(received) == 120
    record = json.loads((out / "calibration.json").read_text(encoding="utf-8"))
    judgments = read_jsonl(out / "calibration.jsonl")
    people = {(q.query_id, pid): g for q in load_evalset(evalset) for pid, g in q.relevance.items()}
    judge = judge_grades(judgments, 3)
    pairs = list(judge)
    a, b = [people[p] for p in pairs], [judge[p] for p in pairs]
    overall = record["agreement"]["all"]
    assert overall["kappa_weighted"] == pytest.approx(
        cohen_kappa_score(a, b, labels=[0, 1, 2, 3], weights="quadratic"), abs=1e-12
    )
    assert overall["kappa_binary"] == pytest.approx(
        cohen_kappa_score([int(x > 0) for x in a], [int(y > 0) for y in b]), abs=1e-12
    )
    assert (record["sample"]["pairs"], record["sample"]["seed"]) == (120, 3)


def test_people_labels_only_evalset_says_kappa_is_not_estimated(tmp_path: Path) -> None:
    """The shipped travel set has relevant labels only: kappa cannot measure agreement."""
    with chat_model() as (url, _):
        args = ["--calibrate", "--evalset", str(TRAVEL), "--corpus", str(TRAVEL_CORPUS)]
        args += ["--sample", "40", *judge_args(url, tmp_path), "--out", str(tmp_path / "c")]
        assert judge_main(args) == 0
    record = json.loads((tmp_path / "c" / "calibration.json").read_text(encoding="utf-8"))
    assert record["agreement"]["all"]["kappa_binary"] is None
    assert "people gave every pair grade 1" in record["agreement"]["all"]["note"]


def write_people_pool(pool: list[dict[str, Any]], queries: set[str], path: Path) -> None:
    """A pool filled by "people" for `queries`: relevant when the stand-in's grade is 2 or
    more, except passages about diving (where the people and the stand-in disagree)."""
    lines = []
    for r in pool:
        if r["query_id"] in queries:
            grade = expected_grade(r)[1]
            if "dive" in r["id"]:
                grade = 1 - grade
            lines.append(json.dumps({**r, "grade": grade}, ensure_ascii=False) + "\n")
    path.write_text("".join(lines), encoding="utf-8")


def per_query(job: Path, evalset: Path, metric: str) -> dict[str, float]:
    rows = rescore_job(job, evalset).metrics["stages"]["final"]["per_query"]
    return {q: row[metric] for q, row in rows.items() if row.get(metric) is not None}


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_three_estimates_agree_with_ppi_by_hand(
    judge_sweep: tuple[Path, Path], tmp_path: Path
) -> None:
    folder, evalset = judge_sweep
    pool = read_jsonl(folder / "pool.jsonl")
    people_queries = {"m01", "m02", "m03", "m04"}
    filled = tmp_path / "people.jsonl"
    write_people_pool(pool, people_queries, filled)
    people = tmp_path / "people-labels.jsonl"
    corpus = ["--corpus", str(CORPUS)]
    assert (
        pool_main(
            ["--import", str(filled), "--evalset", str(evalset), *corpus, "--out", str(people)]
        )
        == 0
    )
    rest = tmp_path / "rest"
    assert (
        pool_main([str(folder), "--depth", "6", "--evalset", str(people), "--out", str(rest)]) == 0
    )
    with chat_model() as (url, _):
        assert judge_main([str(rest / "pool.jsonl"), *judge_args(url, tmp_path)]) == 0
        args = ["--calibrate", "--evalset", str(people), *corpus, "--out", str(tmp_path / "cal")]
        assert judge_main([*args, *judge_args(url, tmp_path)]) == 0
    mixed = tmp_path / "mixed.jsonl"
    both = tmp_path / "both.jsonl"
    assert (
        pool_main(
            [
                "--import",
                str(rest / "judgments.jsonl"),
                "--evalset",
                str(people),
                *corpus,
                "--out",
                str(mixed),
            ]
        )
        == 0
    )
    cal = str(tmp_path / "cal" / "calibration.jsonl")
    assert pool_main(["--import", cal, "--evalset", str(mixed), *corpus, "--out", str(both)]) == 0

    out = tmp_path / "cmp"
    args = [str(folder), "--judged-labels", str(both), "--min-queries", "2", "--out", str(out)]
    assert compare_main([*args, "--metric", "ndcg@K", "--metric", "precision@K"]) == 0
    record = json.loads((out / "comparison.json").read_text(encoding="utf-8"))
    estimates = record["datasets"]["mini"]["judge_estimates"]
    assert "## Estimates with the judge's labels" in (out / "comparison.md").read_text(
        encoding="utf-8"
    )

    # The judge's labels everywhere it graded (people's elsewhere), written independently.
    judged_file = tmp_path / "judge-everywhere.jsonl"
    lines = []
    for r in read_jsonl(both):
        judge = r.pop("judge", {})
        relevance = {pid: 1 for pid in r["relevant_ids"]} | (r.get("relevance") or {})
        relevance = {p: g for p, g in relevance.items() if not judge.get(p, {}).get("label")}
        relevance |= {p: entry["grade"] for p, entry in judge.items()}
        r["relevant_ids"] = [p for p, g in relevance.items() if g > 0]
        r["relevance"] = {p: g for p, g in relevance.items() if g != 1}
        lines.append(json.dumps(r, ensure_ascii=False) + "\n")
    judged_file.write_text("".join(lines), encoding="utf-8")

    # PPI's labelled queries: every top-6 passage of both jobs labelled by people and graded.
    by_id = {q.query_id: q for q in load_evalset(both)}
    tops = {
        json.loads(line)["query_id"]: set()
        for line in (folder / "0" / "rankings.jsonl").open(encoding="utf-8")
    }
    for job in ("0", "1"):
        for line in (folder / job / "rankings.jsonl").open(encoding="utf-8"):
            row = json.loads(line)
            tops[row["query_id"]] |= set(row["stages"]["final"]["ids"][:6])
    labelled = {
        q for q, ids in tops.items()
        if ids and all(p in by_id[q].people_relevance and p in by_id[q].judge for p in ids)
    }  # fmt: skip
    assert labelled & people_queries
    assert estimates["labelled_queries"] == len(labelled)

    labels = {c["label"]: Path(c["path"]) for c in record["datasets"]["mini"]["configurations"]}
    for spec, metric in (("ndcg@K", "ndcg@6"), ("precision@K", "precision@6")):
        entry = next(m for m in estimates["metrics"] if m["spec"] == spec)
        cells = entry["types"]["all"]
        for label, means in cells["means"].items():
            job = labels[label]
            y = per_query(job, people, metric)
            f = per_query(job, judged_file, metric)
            m = per_query(job, both, metric)
            assert means["people"]["mean"] == pytest.approx(np.mean(list(y.values())))
            assert means["people+judge"]["mean"] == pytest.approx(np.mean(list(m.values())))
            # Over people's queries: f the judge's value, else people's plus the judge's.
            def pred(q: str, f: dict[str, float] = f, m: dict[str, float] = m) -> float:
                return f[q] if q in f else m[q]

            units = [q for q in y if q in labelled]
            rest_f = np.array([pred(q) for q in y if q not in labelled])
            rect = np.array([pred(q) - y[q] for q in units])
            theta = rest_f.mean() - rect.mean()
            se = np.sqrt(rest_f.var(ddof=1) / len(rest_f) + rect.var(ddof=1) / len(rect))
            assert means["ppi"]["mean"] == pytest.approx(theta, abs=1e-12)
            assert means["ppi"]["se"] == pytest.approx(se, abs=1e-12)
            assert means["ppi"]["n"] + means["ppi"]["n_predicted"] == len(y)
        for diff in cells["differences"]:
            made = {
                n: diff[n]["verdict"]
                for n in ("people", "people+judge", "ppi")
                if "verdict" in diff[n]
            }
            assert diff["changed"] == (len(set(made.values())) > 1)

    # How much of each ranking rests on the judge: its labels' share of the final top 6.
    for label, job in labels.items():
        shares = estimates["judged"][label]["all"]
        scored = per_query(job, both, "ndcg@6")
        counted = []
        for line in (job / "rankings.jsonl").open(encoding="utf-8"):
            row = json.loads(line)
            if row["query_id"] in scored:
                judge = by_id[row["query_id"]].judge
                ids = row["stages"]["final"]["ids"][:6]
                counted.append(sum(1 for p in ids if p in judge and judge[p].is_label) / 6)
        assert shares["by_judge"] == pytest.approx(np.mean(counted))


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_a_robustness_job_is_scored_under_each_label_variant(tmp_path: Path) -> None:
    """A job that ran perturbed variants beside its queries: the estimates compare the labels
    with its original queries (the variants are the job's, not the labels'), and the people-only
    estimate of its stored rankings is the job's own metrics.json."""
    from retrieval_bench.jobdir.files import read_rankings
    from retrieval_bench.jobdir.read import load_jobs
    from retrieval_bench.judge.estimates import PEOPLE, _scored

    evalset = tmp_path / "mini.jsonl"
    shutil.copy(FIXTURE / "evalsets" / "mini.jsonl", evalset)
    job_dir = run_mini(
        tmp_path / "job",
        "bm25",
        evalset,
        tmp_path / "cache",
        "robustness.kinds=[fullwidth,truncate]",
    )
    (job,) = load_jobs([job_dir])
    assert any(r.query.perturbed_from for r in read_rankings(job_dir))
    scored = _scored(job, load_evalset(evalset))
    people = scored[PEOPLE].metrics["stages"]["final"]["overall"]
    assert people == job.metrics["stages"]["final"]["overall"]
